package io.tensorcast.dataplane.testing;

import io.tensorcast.dataplane.load.ReadProgressListener;
import io.tensorcast.dataplane.source.SourceFile;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Records what a reader reports, and checks as it goes that no byte of a file is reported twice.
 */
public final class RecordingProgressListener implements ReadProgressListener {
  private final AtomicLong bytes = new AtomicLong();
  private final List<RetryEvent> retries = new CopyOnWriteArrayList<>();
  private final Map<String, TreeMap<Long, Long>> delivered = new ConcurrentHashMap<>();
  private final List<String> overlaps = new CopyOnWriteArrayList<>();

  @Override
  public void bytesDelivered(SourceFile file, long offset, int count) {
    bytes.addAndGet(count);
    TreeMap<Long, Long> intervals = delivered.computeIfAbsent(file.path(), p -> new TreeMap<>());
    synchronized (intervals) {
      var before = intervals.floorEntry(offset);
      var after = intervals.ceilingEntry(offset);
      if ((before != null && before.getValue() > offset)
          || (after != null && after.getKey() < offset + count)) {
        overlaps.add(file.path() + " [" + offset + ", " + (offset + count) + ")");
      }
      intervals.put(offset, offset + count);
    }
  }

  @Override
  public void retrying(RetryEvent event) {
    retries.add(event);
  }

  /** Bytes reported delivered. */
  public long bytes() {
    return bytes.get();
  }

  /** Retries reported, in order. */
  public List<RetryEvent> retries() {
    return List.copyOf(retries);
  }

  /** Byte intervals reported more than once ("path [a, b)"); empty when none. */
  public List<String> overlaps() {
    return new ArrayList<>(overlaps);
  }
}
