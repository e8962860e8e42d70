package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class SourceOptionsTest {

  @Test
  void defaultsAreDocumentedValues() {
    SourceOptions o = SourceOptions.defaults();
    assertThat(o.endpoint()).isEmpty();
    assertThat(o.region()).isEmpty();
    assertThat(o.pathStyle()).isFalse();
    assertThat(o.credentialsMode()).isEqualTo(SourceOptions.CredentialsMode.DEFAULT_CHAIN);
    assertThat(o.maxConnections()).isEqualTo(32);
    assertThat(o.readTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(o.filter().accepts("any/file.bin")).isTrue();
  }

  @Test
  void toStringNeverShowsSecrets() {
    SourceOptions o =
        SourceOptions.builder()
            .endpoint(URI.create("http://127.0.0.1:9000"))
            .credentials(
                new SourceOptions.StaticCredentials(
                    "AKIDEXAMPLE", "wJalrXUtnFEMI-secret", Optional.of("session-token-xyz")))
            .build();
    assertThat(o.toString())
        .contains("AKIDEXAMPLE")
        .doesNotContain("wJalrXUtnFEMI-secret")
        .doesNotContain("session-token-xyz");
  }

  @Test
  void badFieldsAreNamed() {
    assertThatThrownBy(() -> SourceOptions.builder().endpoint(URI.create("ftp://host/x")).build())
        .hasMessageContaining("endpoint 'ftp://host/x' must be an http:// or https:// URL");
    assertThatThrownBy(() -> SourceOptions.builder().region("US_EAST").build())
        .hasMessageContaining("region 'US_EAST'");
    assertThatThrownBy(() -> SourceOptions.builder().maxConnections(0).build())
        .hasMessageContaining("maxConnections must be between 1 and 4096, got 0");
    assertThatThrownBy(() -> SourceOptions.builder().readTimeout(Duration.ZERO).build())
        .hasMessageContaining("readTimeout must be a positive duration");
    assertThatThrownBy(() -> SourceOptions.builder().include(List.of("a**")).build())
        .hasMessageContaining("include[0]: glob 'a**'");
    assertThatThrownBy(() -> new SourceOptions.StaticCredentials("AKID", "", Optional.empty()))
        .hasMessageContaining("secretAccessKey is empty for access key AKID");
  }
}
