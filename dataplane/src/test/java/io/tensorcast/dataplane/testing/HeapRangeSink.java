package io.tensorcast.dataplane.testing;

import io.tensorcast.dataplane.load.RangeSink;
import io.tensorcast.dataplane.source.SourceFile;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link RangeSink} backed by one heap array per file, for tests. Refuses a range asked for twice
 * or completed without having been given out, so a reader that duplicates work fails the test.
 */
public final class HeapRangeSink implements RangeSink {

  /** A range reported complete. */
  public record Completed(String path, long offset, int length) {}

  private final Map<String, byte[]> contents = new ConcurrentHashMap<>();
  private final Set<String> given = ConcurrentHashMap.newKeySet();
  private final List<Completed> completed = new CopyOnWriteArrayList<>();

  @Override
  public ByteBuffer target(SourceFile file, long offset, int length) {
    if (file.size() > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(file.path() + " is too big for a heap sink");
    }
    if (!given.add(file.path() + "@" + offset)) {
      throw new IllegalStateException(
          "range at " + offset + " of " + file.path() + " was asked for twice");
    }
    byte[] bytes = contents.computeIfAbsent(file.path(), p -> new byte[(int) file.size()]);
    return ByteBuffer.wrap(bytes, (int) offset, length).slice();
  }

  @Override
  public void rangeCompleted(SourceFile file, long offset, int length) {
    if (!given.contains(file.path() + "@" + offset)) {
      throw new IllegalStateException(
          "range at " + offset + " of " + file.path() + " completed but never given out");
    }
    completed.add(new Completed(file.path(), offset, length));
  }

  /** The bytes of a file as received so far (zeros where nothing arrived). */
  public byte[] bytes(String path) {
    byte[] b = contents.get(path);
    return b == null ? new byte[0] : b.clone();
  }

  /** Ranges reported complete, in completion order. */
  public List<Completed> completed() {
    return List.copyOf(completed);
  }

  /** Sum of the lengths of completed ranges. */
  public long completedBytes() {
    return completed.stream().mapToLong(Completed::length).sum();
  }
}
