package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class StoredRangesTest {

  private static List<List<Long>> of(StoredRanges r) {
    return r.ranges().stream().map(a -> List.of(a[0], a[1])).toList();
  }

  @Test
  void rangesAreKeptSortedAndAdjacentOrOverlappingOnesMerge() {
    StoredRanges r = new StoredRanges("etag-1");
    r.add(100, 200);
    r.add(0, 50);
    r.add(300, 400);
    assertThat(of(r)).containsExactly(List.of(0L, 50L), List.of(100L, 200L), List.of(300L, 400L));
    r.add(50, 100); // touches both neighbours
    assertThat(of(r)).containsExactly(List.of(0L, 200L), List.of(300L, 400L));
    r.add(150, 350); // overlaps both
    assertThat(of(r)).containsExactly(List.of(0L, 400L));
    r.add(10, 20); // inside
    r.add(5, 5); // empty
    assertThat(of(r)).containsExactly(List.of(0L, 400L));
  }

  @Test
  void aRangeCoveringSeveralIsOneAndTheVersionIsCompared() {
    StoredRanges r = new StoredRanges("v1");
    r.add(10, 20);
    r.add(30, 40);
    r.add(50, 60);
    r.add(0, 100);
    assertThat(of(r)).containsExactly(List.of(0L, 100L));
    assertThat(r.isVersion("v1")).isTrue();
    assertThat(r.isVersion("v2")).isFalse();
  }
}
