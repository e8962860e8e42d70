package io.tensorcast.e2e.cluster;

import java.util.concurrent.CompletableFuture;

/** A running container, as seen by {@link SimulatedKubelet}. */
public interface ContainerProcess {

  /** PID of the container's main process (used as {@code containerID: process://<pid>}). */
  long pid();

  boolean isAlive();

  /**
   * Completes once the container has exited, with its exit status (128 + signal number when a
   * signal ended it, e.g. 137 after SIGKILL, 143 after SIGTERM).
   */
  CompletableFuture<Integer> onExit();

  /** Asks the container to stop (SIGTERM); returns at once. */
  void terminate();

  /** Kills the container at once (SIGKILL); returns at once. */
  void kill();
}
