package io.tensorcast.dataplane.store;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * A small main run in a child JVM by the store's ITs. Prints its results as {@code @@ key=value}
 * lines on stdout (everything else on stdout is logging).
 *
 * <ul>
 *   <li>{@code allocate <root> <policy> <bytes>}: allocates artifact {@code probe} with one file,
 *       writes a pattern through the mapping, reads the file back with java.nio, reports the lock
 *       status or the refusal, and the store's tree afterwards.
 *   <li>{@code mlock <dir> <bytes>}: maps a file and calls {@code mlock} directly, reporting errno.
 *   <li>{@code crash <root>}: allocates {@code done} (all files complete) and {@code half} (one of
 *       two complete), prints {@code @@ ready=true}, then blocks until it is killed.
 * </ul>
 */
public final class StoreChild {
  private StoreChild() {}

  public static void main(String[] args) throws Exception {
    MemoryLockSupport.Facts facts = MemoryLockSupport.facts();
    out("cap", facts.capIpcLock());
    out("softLimit", facts.softLimitBytes());
    switch (args[0]) {
      case "allocate" ->
          allocate(Path.of(args[1]), LockPolicy.valueOf(args[2]), Long.parseLong(args[3]));
      case "mlock" -> mlock(Path.of(args[1]), Long.parseLong(args[2]));
      case "crash" -> crash(Path.of(args[1]));
      default -> throw new IllegalArgumentException("unknown mode " + args[0]);
    }
  }

  private static void out(String key, Object value) {
    System.out.println("@@ " + key + "=" + value);
    System.out.flush();
  }

  private static void allocate(Path root, LockPolicy policy, long bytes) throws Exception {
    try (PinnedStore store = new PinnedStore(root, 1L << 30, policy)) {
      try {
        StoredArtifact a = store.allocate("probe", List.of(new StoreFile("weights.bin", bytes)));
        byte[] data = PinnedStoreTest.pattern(7, (int) bytes);
        a.write("weights.bin", 0, ByteBuffer.wrap(data));
        out("outcome", "Loaded");
        out(
            "bytesEqual",
            java.util.Arrays.equals(
                data, Files.readAllBytes(a.directory().resolve("weights.bin"))));
        out("locked", a.lockStatus().locked());
        out("lockedBytes", a.lockStatus().lockedBytes());
        out("reason", a.lockStatus().reason());
        out("message", a.lockStatus().message());
        store.unload("probe");
      } catch (StoreException e) {
        out("outcome", "Refused");
        out("exception", e.getClass().getSimpleName());
        out("reason", e.reason());
        out("message", e.getMessage());
      }
      out("tree", String.join(",", ShmRoot.listTree(root)));
    }
  }

  private static void mlock(Path dir, long bytes) throws Exception {
    Path file = dir.resolve("raw.bin");
    MappedFile m = MappedFile.create("raw", new StoreFile("raw.bin", bytes), file, true);
    try {
      int errno = MemoryLockSupport.mlock(m.address, bytes);
      out("errno", MemoryLockSupport.errnoName(errno));
      if (errno != 0) {
        LockStatus s = MemoryLockSupport.failure(bytes, errno, MemoryLockSupport.facts());
        out("reason", s.reason());
        out("message", s.message());
      } else {
        MemoryLockSupport.munlock(m.address, bytes);
      }
    } finally {
      m.unmap();
      Files.delete(file);
    }
  }

  private static void crash(Path root) throws Exception {
    PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT, 4096);
    StoredArtifact done =
        store.allocate(
            "done",
            List.of(new StoreFile("model.safetensors", 100_000), new StoreFile("config.json", 77)));
    done.write("model.safetensors", 0, ByteBuffer.wrap(PinnedStoreTest.pattern(1, 100_000)));
    done.write("config.json", 0, ByteBuffer.wrap(PinnedStoreTest.pattern(2, 77)));
    done.markComplete("model.safetensors");
    done.markComplete("config.json");
    StoredArtifact half =
        store.allocate(
            "half", List.of(new StoreFile("a.bin", 50_000), new StoreFile("b.bin", 50_000)));
    half.write("a.bin", 0, ByteBuffer.wrap(PinnedStoreTest.pattern(3, 50_000)));
    half.markComplete("a.bin");
    half.write("b.bin", 0, ByteBuffer.wrap(PinnedStoreTest.pattern(4, 20_000))); // mid-file
    out("ready", true);
    System.in.read(); // until killed
  }
}
