package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReadPlanTest {

  /** Three segments of two files: body bytes 0-9 from a@100, 10-14 from b@0, 15-19 from a@500. */
  private static final ReadPlan PLAN =
      new ReadPlan(
          "t",
          Dtype.U8,
          new long[] {20},
          List.of(new Segment("a", 100, 10), new Segment("b", 0, 5), new Segment("a", 500, 5)));

  @Test
  void slicesCutTheEndsAndKeepTheMiddle() {
    assertThat(PLAN.length()).isEqualTo(20);
    assertThat(PLAN.slice(0, 20)).isEqualTo(PLAN.segments());
    assertThat(PLAN.slice(0, 1)).containsExactly(new Segment("a", 100, 1));
    assertThat(PLAN.slice(19, 1)).containsExactly(new Segment("a", 504, 1));
    assertThat(PLAN.slice(9, 2)).containsExactly(new Segment("a", 109, 1), new Segment("b", 0, 1));
    assertThat(PLAN.slice(8, 10))
        .containsExactly(
            new Segment("a", 108, 2), new Segment("b", 0, 5), new Segment("a", 500, 3));
    assertThat(PLAN.slice(10, 5)).containsExactly(new Segment("b", 0, 5));
    assertThat(PLAN.slice(5, 0)).isEmpty();
  }

  @Test
  void everySliceOfAByteMapIsItsConcatenation() {
    // exhaustive: body byte i lives at (file, offset) per the plan; every slice maps the same bytes
    List<String> where = new ArrayList<>();
    for (Segment s : PLAN.segments()) {
      for (long o = s.offset(); o < s.end(); o++) {
        where.add(s.file() + "@" + o);
      }
    }
    for (int from = 0; from <= 20; from++) {
      for (int n = 0; from + n <= 20; n++) {
        List<String> got = new ArrayList<>();
        for (Segment s : PLAN.slice(from, n)) {
          assertThat(s.length()).isPositive();
          for (long o = s.offset(); o < s.end(); o++) {
            got.add(s.file() + "@" + o);
          }
        }
        assertThat(got).as("slice %d+%d", from, n).isEqualTo(where.subList(from, from + n));
      }
    }
  }

  @Test
  void adjacentSegmentsMergeAndEmptyOnesDrop() {
    ReadPlan p =
        new ReadPlan(
            "t",
            Dtype.F32,
            new long[] {2, 2},
            List.of(
                new Segment("a", 8, 4),
                new Segment("a", 12, 0),
                new Segment("a", 12, 4),
                new Segment("b", 16, 8)));
    assertThat(p.segments()).containsExactly(new Segment("a", 8, 8), new Segment("b", 16, 8));
    assertThat(p.shapeHeader()).isEqualTo("2,2");
    assertThat(
            new ReadPlan("s", Dtype.F32, new long[0], List.of(new Segment("a", 8, 4)))
                .shapeHeader())
        .isEmpty();
  }

  @Test
  void aPlanMustHoldShapeTimesDtypeBytes() {
    assertThatThrownBy(
            () -> new ReadPlan("w", Dtype.BF16, new long[] {3}, List.of(new Segment("a", 0, 5))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tensor \"w\": BF16 × [3] = 6 bytes but the segments hold 5");
    assertThatThrownBy(() -> PLAN.slice(15, 6))
        .isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining("range [15, 21) is outside the body of 20 bytes");
  }
}
