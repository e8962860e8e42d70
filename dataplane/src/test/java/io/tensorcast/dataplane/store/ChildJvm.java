package io.tensorcast.dataplane.store;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Runs {@link StoreChild} in a child JVM on the test classpath and collects its results. */
final class ChildJvm {
  private ChildJvm() {}

  /** The first of setpriv / capsh found on the PATH's usual places, or null. */
  static List<String> dropIpcLockPrefix() {
    for (String dir : List.of("/usr/bin", "/bin", "/usr/sbin", "/sbin")) {
      if (Files.isExecutable(Path.of(dir, "setpriv"))) {
        return List.of(dir + "/setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock");
      }
    }
    return null;
  }

  static Process start(List<String> prefix, String... args) throws IOException {
    List<String> cmd = new ArrayList<>(prefix);
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(
        List.of(
            "-Xmx128m",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            System.getProperty("java.class.path"),
            StoreChild.class.getName()));
    cmd.addAll(List.of(args));
    return new ProcessBuilder(cmd).redirectErrorStream(true).start();
  }

  /**
   * Reads the child's {@code @@ key=value} lines until it exits, or until a line with key {@code
   * stopAt} (null: until exit). Fails after 60 s. Other lines are kept in {@code log} for failure
   * messages.
   */
  static Map<String, String> results(Process p, String stopAt, StringBuilder log) throws Exception {
    CompletableFuture<Map<String, String>> f =
        CompletableFuture.supplyAsync(
            () -> {
              Map<String, String> r = new HashMap<>();
              try (BufferedReader in =
                  new BufferedReader(
                      new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                  log.append(line).append('\n');
                  if (line.startsWith("@@ ")) {
                    int eq = line.indexOf('=');
                    r.put(line.substring(3, eq), line.substring(eq + 1));
                    if (line.substring(3, eq).equals(stopAt)) {
                      return r;
                    }
                  }
                }
              } catch (IOException e) {
                throw new RuntimeException(e);
              }
              return r;
            });
    return f.get(60, TimeUnit.SECONDS);
  }
}
