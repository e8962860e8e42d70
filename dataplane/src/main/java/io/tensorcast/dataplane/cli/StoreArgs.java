package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** Where the page-locked store lives and how much it may hold. */
final class StoreArgs {
  /** Environment variable for the budget; the operator sets it from the pod's memory limit. */
  static final String BUDGET_ENV = "TENSORCAST_MEMORY_BUDGET";

  @Option(
      names = "--store-root",
      description = "Store directory on a memory-backed file system (default ${DEFAULT-VALUE}).",
      defaultValue = "/dev/shm/tensorcast")
  Path root;

  @Option(
      names = "--budget",
      description =
          "Most bytes the store may hold, a quantity (default: $"
              + BUDGET_ENV
              + ", else measured from the memory cgroup, MemAvailable and the file system).")
  String budget;

  @Option(
      names = "--memory-limit",
      description = "Refuse an artifact larger than this quantity (spec.memory.limit).")
  String memoryLimit;

  @Option(
      names = "--lock-policy",
      defaultValue = "BEST_EFFORT",
      description =
          "REQUIRED: failing to mlock is an error; BEST_EFFORT: load anyway and report why the"
              + " pages are not locked; DISABLED (default ${DEFAULT-VALUE}).")
  LockPolicy lockPolicy;

  PinnedStore open() throws StoreException {
    String b = budget != null ? budget : System.getenv(BUDGET_ENV);
    if (b == null || b.isBlank()) {
      return PinnedStore.open(root, lockPolicy);
    }
    return new PinnedStore(root, Quantities.bytes(b, "--budget"), lockPolicy);
  }

  long memoryLimitBytes() {
    return memoryLimit == null ? 0 : Quantities.bytes(memoryLimit, "--memory-limit");
  }
}
