package io.tensorcast.e2e.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A local OS process started by the harness (a control-plane component or a pod's container) that
 * cannot outlive the JVM that started it.
 *
 * <p>Every command runs under a small {@code /bin/sh} watchdog: the watchdog starts the command as
 * its child, forwards SIGTERM/SIGINT to it, exits with the child's exit status, and kills the child
 * with SIGKILL as soon as its own standard input reaches end-of-file, which happens when the JVM
 * holding the other end of that pipe is gone for any reason (including {@code kill -9} of the JVM,
 * where no shutdown hook runs). A JVM shutdown hook additionally stops every live process on an
 * orderly exit.
 *
 * <p>Standard output and standard error of the command are appended to one log file.
 */
public final class ManagedProcess implements ContainerProcess {

  private static final String WATCHDOG =
      """
      #!/bin/sh
      # Tensorcast harness watchdog: runs "$@" as a child; SIGTERM/SIGINT are forwarded to it;
      # EOF on stdin (the starting JVM has exited) kills it. Exits with the child's status.
      # $1: file to receive the child's PID.
      pidfile=$1
      shift
      exec 3<&0
      "$@" </dev/null 3<&- &
      child=$!
      echo "$child" >"$pidfile"
      ( trap - TERM INT; while IFS= read -r _; do :; done; kill -KILL "$child" 2>/dev/null ) <&3 &
      watcher=$!
      exec 3<&-
      trap 'kill -TERM "$child" 2>/dev/null' TERM INT
      while :; do
        wait "$child"; rc=$?
        kill -0 "$child" 2>/dev/null || break
      done
      kill "$watcher" 2>/dev/null
      exit "$rc"
      """;

  private static final Set<ManagedProcess> LIVE = ConcurrentHashMap.newKeySet();
  private static volatile Path watchdogScript;

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  List<ManagedProcess> all = new ArrayList<>(LIVE);
                  all.forEach(ManagedProcess::terminate);
                  for (ManagedProcess p : all) {
                    p.stop(Duration.ofSeconds(3));
                  }
                },
                "tensorcast-process-reaper"));
  }

  private final String name;
  private final List<String> command;
  private final Process process;
  private final Path logFile;
  private final Path pidFile;
  private volatile long childPid;

  private ManagedProcess(
      String name, List<String> command, Process process, Path logFile, Path pidFile) {
    this.name = name;
    this.command = List.copyOf(command);
    this.process = process;
    this.logFile = logFile;
    this.pidFile = pidFile;
  }

  /**
   * Starts {@code command} under the watchdog.
   *
   * @param name a short name used in messages (e.g. {@code kube-apiserver})
   * @param command the program and its arguments; the program is looked up on {@code PATH}
   * @param environment the complete environment of the process (nothing is inherited)
   * @param workingDir the working directory; created if missing
   * @param logFile stdout and stderr are appended here; parent directories are created
   * @throws IOException when the process cannot be started (e.g. program not found)
   */
  public static ManagedProcess start(
      String name,
      List<String> command,
      Map<String, String> environment,
      Path workingDir,
      Path logFile)
      throws IOException {
    if (command.isEmpty()) {
      throw new IllegalArgumentException(name + ": empty command");
    }
    Files.createDirectories(workingDir);
    Files.createDirectories(logFile.toAbsolutePath().getParent());
    Path pidFile = Files.createTempFile("tensorcast-pid-", "");
    List<String> argv = new ArrayList<>();
    argv.add("/bin/sh");
    argv.add(watchdog().toString());
    argv.add(pidFile.toString());
    argv.addAll(command);
    ProcessBuilder pb = new ProcessBuilder(argv);
    pb.environment().clear();
    pb.environment().putAll(environment);
    pb.directory(workingDir.toFile());
    pb.redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
    // stdin stays a pipe held by this JVM: its EOF is the watchdog's signal that the JVM is gone.
    Process process;
    try {
      process = pb.start();
    } catch (IOException e) {
      Files.deleteIfExists(pidFile);
      throw e;
    }
    ManagedProcess p = new ManagedProcess(name, command, process, logFile, pidFile);
    LIVE.add(p);
    p.process
        .onExit()
        .thenRun(
            () -> {
              LIVE.remove(p);
              p.pid(); // keep the PID for status reports before the file goes
              try {
                Files.deleteIfExists(pidFile);
              } catch (IOException e) {
                // best effort: a stray empty temp file
              }
            });
    return p;
  }

  private static Path watchdog() {
    Path script = watchdogScript;
    if (script == null) {
      synchronized (ManagedProcess.class) {
        script = watchdogScript;
        if (script == null) {
          try {
            script =
                Files.createTempFile(
                    "tensorcast-watchdog-",
                    ".sh",
                    PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwx------")));
            Files.writeString(script, WATCHDOG, StandardCharsets.UTF_8);
            script.toFile().deleteOnExit();
          } catch (IOException e) {
            throw new UncheckedIOException("cannot write the process watchdog script", e);
          }
          watchdogScript = script;
        }
      }
    }
    return script;
  }

  /** The short name given at start. */
  public String name() {
    return name;
  }

  /** The command as given (without the watchdog). */
  public List<String> command() {
    return command;
  }

  /** Where stdout and stderr go. */
  public Path logFile() {
    return logFile;
  }

  /**
   * PID of the command itself (the watchdog's child). The watchdog reports it right after the fork;
   * this waits up to 2 s for that report and returns -1 if none came (the watchdog died first).
   */
  @Override
  public long pid() {
    long pid = childPid;
    if (pid > 0) {
      return pid;
    }
    synchronized (this) {
      long deadline = System.nanoTime() + 2_000_000_000L;
      while (childPid <= 0 && System.nanoTime() < deadline) {
        try {
          String text = Files.readString(pidFile).trim();
          if (!text.isEmpty()) {
            childPid = Long.parseLong(text);
            Files.deleteIfExists(pidFile);
            break;
          }
        } catch (IOException | NumberFormatException e) {
          // not written yet (or already consumed by another caller)
        }
        if (!process.isAlive()) {
          break;
        }
        try {
          Thread.sleep(5);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      return childPid > 0 ? childPid : -1;
    }
  }

  @Override
  public boolean isAlive() {
    return process.isAlive();
  }

  /** Completes with the command's exit status (128 + signal number when killed by a signal). */
  @Override
  public CompletableFuture<Integer> onExit() {
    return process.onExit().thenApply(Process::exitValue);
  }

  /** Sends SIGTERM to the command (through the watchdog) without waiting. */
  @Override
  public void terminate() {
    // Not Process.destroy(): that also closes our end of the stdin pipe, which the watchdog takes
    // for "the JVM is gone" and answers with SIGKILL.
    process.toHandle().destroy();
  }

  /**
   * Sends SIGKILL to the command and everything it started; the watchdog then exits with status
   * 137, as a container runtime reports a killed container.
   */
  @Override
  public void kill() {
    process.descendants().forEach(ProcessHandle::destroyForcibly);
  }

  /**
   * Stops the process: SIGTERM, then after {@code grace} SIGKILL to the whole tree; returns once it
   * has exited (bounded by {@code grace} plus a few seconds).
   *
   * @return the exit status, or -1 if the process could not be confirmed dead
   */
  public int stop(Duration grace) {
    if (process.isAlive()) {
      terminate();
      try {
        if (!process.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS)) {
          process.descendants().forEach(ProcessHandle::destroyForcibly);
          process.destroyForcibly();
          if (!process.waitFor(5, TimeUnit.SECONDS)) {
            return -1;
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
        return -1;
      }
    }
    return process.exitValue();
  }

  /**
   * Closes this JVM's end of the watchdog's stdin pipe, which is what the watchdog sees when the
   * JVM dies; for tests of that guarantee.
   */
  void closeWatchdogPipe() throws IOException {
    process.getOutputStream().close();
  }

  /** The last {@code maxLines} lines of the log file, for error messages. */
  public String logTail(int maxLines) {
    return tail(logFile, maxLines);
  }

  static String tail(Path file, int maxLines) {
    try {
      if (!Files.exists(file)) {
        return "(no log at " + file + ")";
      }
      // Lenient decoding: a log may hold bytes that are not UTF-8.
      List<String> lines =
          new String(Files.readAllBytes(file), StandardCharsets.UTF_8).lines().toList();
      return String.join("\n", lines.subList(Math.max(0, lines.size() - maxLines), lines.size()));
    } catch (IOException | UncheckedIOException e) {
      return "(cannot read " + file + ": " + e.getMessage() + ")";
    }
  }

  @Override
  public String toString() {
    return name + "[pid " + process.pid() + "]";
  }
}
