package io.tensorcast.dataplane.store;

import io.tensorcast.testing.TestFiles;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Rough timings of the steps of a load into the store, run by hand (not a test): {@code java -cp
 * <test classpath> io.tensorcast.dataplane.store.StoreLoadMeasurement [MiB]}. Prints GB/s for
 * posix_fallocate, mlock with 1 and N threads (after fallocate and without), and a fill.
 *
 * <p>Measured 1 GiB on this project's 2-core test VM (Firecracker guest, load average 6-11 from
 * other builds, so only rough): posix_fallocate 0.7-6 GB/s; mlock of fallocated pages 0.2-2.7 GB/s
 * with no clear gain from 2 threads over 1 (windows of 64 MiB); the first write through the mapping
 * 0.1-0.7 GB/s whatever pre-faulting preceded it (mlock, MADV_POPULATE_WRITE or none gave 0.2-0.7,
 * 0.5-0.7 and 0.1-0.3 GB/s), rewriting 4-13 GB/s; SHA-256 over the mapping 0.5-0.7 GB/s. So first
 * touch of guest memory, not page-table population, bounds a cold load here; locking per window in
 * parallel is kept because it costs nothing and scales where the kernel allows.
 */
public final class StoreLoadMeasurement {
  private StoreLoadMeasurement() {}

  public static void main(String[] args) throws Exception {
    long bytes = (args.length > 0 ? Long.parseLong(args[0]) : 1024) << 20;
    long window = 64L << 20;
    int threads = Runtime.getRuntime().availableProcessors();
    Path dir = Files.createTempDirectory(ShmRoot.SHM, "tensorcast-measure-");
    try {
      for (boolean fallocate : new boolean[] {true, false}) {
        for (int t : new int[] {1, threads}) {
          Path f = dir.resolve("m-" + fallocate + "-" + t);
          long t0 = System.nanoTime();
          long address;
          int fd = MemoryLockSupport.createExclusive(f);
          try {
            if (fallocate) {
              MemoryLockSupport.fallocate(fd, bytes);
            } else {
              MemoryLockSupport.ftruncate(fd, bytes, f);
            }
            address = MemoryLockSupport.mmapShared(fd, bytes, f);
          } finally {
            MemoryLockSupport.close(fd);
          }
          long t1 = System.nanoTime();
          ExecutorService pool = Executors.newFixedThreadPool(t);
          List<Future<Integer>> fs = new ArrayList<>();
          for (long off = 0; off < bytes; off += window) {
            long o = off;
            fs.add(pool.submit(() -> MemoryLockSupport.mlock(address + o, window)));
          }
          for (Future<Integer> x : fs) {
            if (x.get() != 0) {
              throw new IllegalStateException("mlock: " + MemoryLockSupport.errnoName(x.get()));
            }
          }
          pool.shutdown();
          long t2 = System.nanoTime();
          ByteBuffer src = ByteBuffer.allocateDirect(1 << 20);
          for (long off = 0; off < bytes; off += 1 << 20) {
            src.clear();
            new com.sun.jna.Pointer(address).getByteBuffer(off, 1 << 20).put(src);
          }
          long t3 = System.nanoTime();
          MemoryLockSupport.munlock(address, bytes);
          MemoryLockSupport.munmap(address, bytes, f);
          Files.delete(f);
          System.out.printf(
              "%s, %d mlock thread(s): size %.2f GB/s, mlock %.2f GB/s, fill %.2f GB/s%n",
              fallocate ? "posix_fallocate" : "ftruncate",
              t,
              gbps(bytes, t1 - t0),
              gbps(bytes, t2 - t1),
              gbps(bytes, t3 - t2));
        }
      }
    } finally {
      TestFiles.deleteTree(dir);
    }
  }

  private static double gbps(long bytes, long nanos) {
    return bytes / (double) nanos;
  }
}
