package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.dataplane.consumer.ByteRange.Kind;
import org.junit.jupiter.api.Test;

class ByteRangeTest {

  private static void partial(String header, long length, long first, long last) {
    ByteRange r = ByteRange.evaluate(header, length);
    assertThat(r.kind()).as(header).isEqualTo(Kind.PARTIAL);
    assertThat(r.first()).as(header + " first").isEqualTo(first);
    assertThat(r.last()).as(header + " last").isEqualTo(last);
    assertThat(r.length()).isEqualTo(last - first + 1);
  }

  private static void kind(String header, long length, Kind kind) {
    assertThat(ByteRange.evaluate(header, length).kind()).as(header).isEqualTo(kind);
  }

  @Test
  void singleRangesOfRfc9110() {
    partial("bytes=0-0", 100, 0, 0);
    partial("bytes=99-99", 100, 99, 99);
    partial("bytes=10-19", 100, 10, 19);
    partial("bytes=90-", 100, 90, 99); // open-ended
    partial("bytes=0-", 100, 0, 99); // the whole body as a range: still 206
    partial("bytes=-1", 100, 99, 99); // suffix
    partial("bytes=-10", 100, 90, 99);
    partial("bytes=-1000", 100, 0, 99); // suffix longer than the body: all of it
    partial("bytes=50-1000", 100, 50, 99); // last past the end is clamped
    partial("bytes=5-99999999999999999999999", 100, 5, 99); // beyond 64 bits saturates
    partial("Bytes = 3-4", 100, 3, 4); // unit case-insensitive, spaces allowed
    partial("bytes=, 3-4 ,", 100, 3, 4); // empty list elements are allowed
  }

  @Test
  void unsatisfiableRangesAre416() {
    kind("bytes=100-", 100, Kind.UNSATISFIABLE);
    kind("bytes=100-200", 100, Kind.UNSATISFIABLE);
    kind("bytes=-0", 100, Kind.UNSATISFIABLE);
    kind("bytes=0-0", 0, Kind.UNSATISFIABLE); // an empty body has no byte 0
    kind("bytes=-5", 0, Kind.UNSATISFIABLE);
    kind("bytes=200-300, 400-", 100, Kind.UNSATISFIABLE);
  }

  @Test
  void severalRangesAreServedWhole() {
    kind("bytes=0-0,-1", 100, Kind.WHOLE);
    kind("bytes=0-9, 200-300", 100, Kind.WHOLE); // one satisfiable among several
  }

  @Test
  void invalidSpecifiersAreIgnored() {
    kind(null, 100, Kind.WHOLE);
    kind("items=0-5", 100, Kind.WHOLE);
    kind("bytes=5-3", 100, Kind.WHOLE);
    kind("bytes=abc", 100, Kind.WHOLE);
    kind("bytes=1-2-3", 100, Kind.WHOLE);
    kind("bytes=-", 100, Kind.WHOLE);
    kind("bytes=", 100, Kind.WHOLE);
    kind("bytes=+1-2", 100, Kind.WHOLE);
    ByteRange whole = ByteRange.evaluate(null, 100);
    assertThat(whole.first()).isZero();
    assertThat(whole.last()).isEqualTo(99);
  }
}
