package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import java.net.URI;
import org.junit.jupiter.api.Test;

class EndpointPolicyTest {
  @Test
  void credentialsGoToPlainHttpOnlyWhenAllowed() {
    URI http = URI.create("http://minio.storage.svc:9000");
    assertThatThrownBy(() -> EndpointPolicy.check(http, true, false, "endpoint"))
        .isInstanceOf(SourceException.class)
        .hasMessageStartingWith(
            "endpoint 'http://minio.storage.svc:9000' is plain http and this source sends"
                + " credentials")
        .extracting(e -> ((SourceException) e).reason())
        .isEqualTo(Reason.InsecureEndpoint);
    assertThatCode(() -> EndpointPolicy.check(http, true, true, "endpoint"))
        .doesNotThrowAnyException();
    assertThatCode(() -> EndpointPolicy.check(http, false, false, "endpoint"))
        .as("anonymous requests carry no credentials")
        .doesNotThrowAnyException();
    assertThatCode(
            () -> EndpointPolicy.check(URI.create("https://s3.example.com"), true, false, "e"))
        .doesNotThrowAnyException();
  }

  @Test
  void linkLocalAndMetadataEndpointsAreRefusedEvenWhenPlainHttpIsAllowed() {
    for (String url :
        new String[] {
          "http://169.254.169.254/latest/meta-data",
          "https://169.254.170.2",
          "http://[fd00:ec2::254]",
          "http://[fe80::1]:9000",
          "http://metadata.google.internal",
          "http://METADATA.google.internal.",
          "http://100.100.100.200",
          "http://[::ffff:169.254.169.254]"
        }) {
      assertThatThrownBy(() -> EndpointPolicy.check(URI.create(url), false, true, "endpoint"))
          .as(url)
          .isInstanceOf(SourceException.class)
          .hasMessageContaining("is refused: ")
          .hasMessageEndingWith("a data plane never sends requests (or credentials) there")
          .extracting(e -> ((SourceException) e).reason())
          .isEqualTo(Reason.ForbiddenEndpoint);
    }
  }
}
