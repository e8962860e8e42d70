package io.tensorcast.dataplane.format.safetensors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

class DtypeTest {

  @Test
  void namesAndBitSizesAreTheReferences() {
    // huggingface/safetensors Dtype, in its declaration order, with Dtype::bitsize().
    assertThat(Arrays.stream(Dtype.values()).map(d -> d.name() + ":" + d.bitSize()))
        .containsExactly(
            "BOOL:8",
            "F4:4",
            "F6_E2M3:6",
            "F6_E3M2:6",
            "U8:8",
            "I8:8",
            "F8_E5M2:8",
            "F8_E4M3:8",
            "F8_E8M0:8",
            "I16:16",
            "U16:16",
            "F16:16",
            "BF16:16",
            "I32:32",
            "U32:32",
            "F32:32",
            "C64:64",
            "F64:64",
            "I64:64",
            "U64:64");
  }

  @Test
  void byteSizeOfWholeAndSubByteTypes() {
    assertThat(Dtype.F32.byteSize(6)).isEqualTo(24);
    assertThat(Dtype.BF16.byteSize(0)).isZero();
    assertThat(Dtype.F4.byteSize(6)).isEqualTo(3);
    assertThat(Dtype.F6_E3M2.byteSize(4)).isEqualTo(3);
    assertThat(Dtype.U64.byteSize(Long.MAX_VALUE / 8)).isEqualTo(Long.MAX_VALUE / 8 * 8);
  }

  @Test
  void subByteTypesMustFillWholeBytes() {
    assertThatThrownBy(() -> Dtype.F6_E2M3.byteSize(3))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("3 elements of F6_E2M3")
        .hasMessageContaining("18 bits");
  }

  @Test
  void overflowAndNegativeCountsAreRefused() {
    assertThatThrownBy(() -> Dtype.F64.byteSize(Long.MAX_VALUE / 8 + 1))
        .isInstanceOf(ArithmeticException.class);
    assertThatThrownBy(() -> Dtype.F4.byteSize(Long.MAX_VALUE / 4 + 1))
        .isInstanceOf(ArithmeticException.class);
    assertThatThrownBy(() -> Dtype.U8.byteSize(-1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void fromNameIsCaseSensitive() {
    assertThat(Dtype.fromName("F8_E4M3")).contains(Dtype.F8_E4M3);
    assertThat(Dtype.fromName("f8_e4m3")).isEmpty();
    assertThat(Dtype.fromName("FLOAT32")).isEmpty();
  }
}
