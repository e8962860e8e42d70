package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The watchdog around every harness process, with real processes. */
class ManagedProcessIT {

  private static final Map<String, String> ENV = Map.of("PATH", "/usr/bin:/bin");

  /** How long a process start or exit may take on a loaded machine. */
  private static final Duration PROCESS = Duration.ofSeconds(30);

  @TempDir Path dir;

  @Test
  void terminateDeliversSigtermToTheCommandAndReportsItsStatus() throws Exception {
    ManagedProcess p =
        ManagedProcess.start("sleeper", List.of("sleep", "300"), ENV, dir, dir.resolve("log"));
    await().atMost(PROCESS).until(() -> p.pid() != -1 && hasChild(p));
    ProcessHandle child = ProcessHandle.of(p.pid()).orElseThrow();

    p.terminate();

    assertThat(p.onExit().get(PROCESS.toSeconds(), TimeUnit.SECONDS))
        .isEqualTo(143); // 128 + SIGTERM
    assertThat(child.isAlive()).isFalse();
  }

  @Test
  void killReportsSigkillStatus() throws Exception {
    ManagedProcess p =
        ManagedProcess.start("sleeper", List.of("sleep", "300"), ENV, dir, dir.resolve("log"));
    await().atMost(PROCESS).until(() -> hasChild(p));

    p.kill();

    assertThat(p.onExit().get(PROCESS.toSeconds(), TimeUnit.SECONDS))
        .isEqualTo(137); // 128 + SIGKILL
  }

  @Test
  void commandDiesWhenTheOwningJvmSideOfThePipeCloses() throws Exception {
    ManagedProcess p =
        ManagedProcess.start("orphan", List.of("sleep", "300"), ENV, dir, dir.resolve("log"));
    await().atMost(PROCESS).until(() -> hasChild(p));
    ProcessHandle child = ProcessHandle.of(p.pid()).orElseThrow();

    p.closeWatchdogPipe(); // what the watchdog sees when the JVM dies, even by SIGKILL

    await().atMost(PROCESS).until(() -> !child.isAlive());
    assertThat(p.onExit().get(PROCESS.toSeconds(), TimeUnit.SECONDS)).isEqualTo(137);
  }

  @Test
  void outputGoesToTheLogFileAndExitStatusIsTheCommands() throws Exception {
    Path log = dir.resolve("logs/out.log");
    ManagedProcess p =
        ManagedProcess.start(
            "echo", List.of("sh", "-c", "echo hello; echo oops >&2; exit 7"), ENV, dir, log);

    assertThat(p.onExit().get(PROCESS.toSeconds(), TimeUnit.SECONDS)).isEqualTo(7);
    assertThat(Files.readAllLines(log)).containsExactly("hello", "oops");
  }

  private static boolean hasChild(ManagedProcess p) {
    return ProcessHandle.of(p.pid())
        .map(h -> h.info().command().orElse("").endsWith("sleep"))
        .orElse(false);
  }
}
