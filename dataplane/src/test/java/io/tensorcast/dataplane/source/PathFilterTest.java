package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class PathFilterTest {

  @Test
  void filterKeepsIncludedAndNotExcludedAndNamesTheBadField() {
    PathFilter filter = PathFilter.of(List.of("*.safetensors", "*.json"), List.of("*.index.json"));
    assertThat(filter.accepts("model.safetensors")).isTrue();
    assertThat(filter.accepts("config.json")).isTrue();
    assertThat(filter.accepts("model.safetensors.index.json")).isFalse();
    assertThat(filter.accepts("pytorch_model.bin")).isFalse();
    assertThat(PathFilter.of(List.of(), List.of("*.bin")).accepts("x/y.txt")).isTrue();
    assertThat(PathFilter.all().accepts("anything")).isTrue();

    assertThatThrownBy(() -> PathFilter.of(List.of("ok"), List.of("fine", "bad[")))
        .hasMessageStartingWith("exclude[1]: glob 'bad['");
  }
}
