package io.tensorcast.operator.validation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class EndpointAllowlistTest {

  @Test
  void emptyAllowsEverything() {
    assertThat(EndpointAllowlist.parse(" ").isEmpty()).isTrue();
    assertThat(EndpointAllowlist.parse(null).allows("http://anything:1")).isTrue();
  }

  @Test
  void aStarStandsForCharactersWithinOneLabel() {
    EndpointAllowlist l = EndpointAllowlist.parse("https://s3.*.amazonaws.com");

    assertThat(l.allows("https://s3.eu-west-1.amazonaws.com")).isTrue();
    assertThat(l.allows("https://S3.EU-WEST-1.amazonaws.com./prefix")).isTrue();
    assertThat(l.allows("https://s3.amazonaws.com")).isFalse();
    assertThat(l.allows("https://s3.a.b.amazonaws.com")).isFalse();
    assertThat(l.allows("https://s3.x.evil.example")).isFalse();
    assertThat(l.allows("http://s3.eu-west-1.amazonaws.com")).isFalse();
    assertThat(l.allows("https://s3.eu-west-1.amazonaws.com:8443")).isFalse();
  }

  @Test
  void portsMustMatchAndDefaultByScheme() {
    EndpointAllowlist l =
        EndpointAllowlist.parse(
            "https://minio.storage:9000 http://store.ns.svc, https://[fd00::5]");

    assertThat(l.entries())
        .containsExactly("https://minio.storage:9000", "http://store.ns.svc", "https://[fd00::5]");
    assertThat(l.allows("https://minio.storage:9000")).isTrue();
    assertThat(l.allows("https://minio.storage")).isFalse();
    assertThat(l.allows("http://store.ns.svc:80/x")).isTrue();
    assertThat(l.allows("http://store.ns.svc:8080")).isFalse();
    assertThat(l.allows("https://[FD00::5]")).isTrue();
  }

  @Test
  void badEntriesAreNamed() {
    assertThatThrownBy(() -> EndpointAllowlist.parse("ftp://x"))
        .hasMessage("allowed endpoint 'ftp://x' has scheme 'ftp'; only https and http");
    assertThatThrownBy(() -> EndpointAllowlist.parse("https://x.example/bucket"))
        .hasMessageContaining("has a path, query or fragment");
    assertThatThrownBy(() -> EndpointAllowlist.parse("https://x.example:99999"))
        .hasMessageContaining("port '99999' is not 1-65535");
    assertThatThrownBy(() -> EndpointAllowlist.parse("https://bad_host"))
        .hasMessageContaining("host 'bad_host' is not a DNS name");
  }
}
