package io.tensorcast.dataplane.store;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * The byte ranges of one stored file that hold bytes of one source object version: sorted,
 * disjoint, adjacent ranges merged. Thread-safe.
 */
final class StoredRanges {
  private final String version;
  private final TreeMap<Long, Long> ranges = new TreeMap<>(); // start → end (exclusive)

  StoredRanges(String version) {
    this.version = version;
  }

  String version() {
    return version;
  }

  boolean isVersion(String v) {
    return Objects.equals(version, v);
  }

  /** Adds {@code [start, end)}, merging it with the ranges it overlaps or touches. */
  synchronized void add(long start, long end) {
    if (end <= start) {
      return;
    }
    Map.Entry<Long, Long> before = ranges.floorEntry(start);
    if (before != null && before.getValue() >= start) {
      start = before.getKey();
      end = Math.max(end, before.getValue());
    }
    Map.Entry<Long, Long> next = ranges.ceilingEntry(start);
    while (next != null && next.getKey() <= end) {
      end = Math.max(end, next.getValue());
      ranges.remove(next.getKey());
      next = ranges.ceilingEntry(start);
    }
    ranges.put(start, end);
  }

  /** The ranges as {@code [start, end)} pairs, in order. */
  synchronized List<long[]> ranges() {
    List<long[]> out = new ArrayList<>(ranges.size());
    ranges.forEach((s, e) -> out.add(new long[] {s, e}));
    return out;
  }
}
