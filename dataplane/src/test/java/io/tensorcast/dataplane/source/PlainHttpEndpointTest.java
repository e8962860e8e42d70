package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.URI;
import java.util.Optional;
import javax.net.ssl.SSLException;
import org.apache.http.conn.socket.ConnectionSocketFactory;
import org.apache.http.protocol.BasicHttpContext;
import org.junit.jupiter.api.Test;

class PlainHttpEndpointTest {
  @Test
  void onlyAPlainHttpEndpointGoesWithoutTls() {
    assertThat(PlainHttpEndpoint.tlsSocketFactory(Optional.of(URI.create("http://127.0.0.1:9000"))))
        .isPresent();
    assertThat(PlainHttpEndpoint.tlsSocketFactory(Optional.of(URI.create("HTTP://minio:9000"))))
        .isPresent();
    assertThat(PlainHttpEndpoint.tlsSocketFactory(Optional.of(URI.create("https://minio:9000"))))
        .isEmpty();
    assertThat(PlainHttpEndpoint.tlsSocketFactory(Optional.empty())).as("AWS itself").isEmpty();
  }

  @Test
  void aTlsConnectionIsRefusedNamingTheEndpoint() {
    ConnectionSocketFactory none =
        PlainHttpEndpoint.tlsSocketFactory(Optional.of(URI.create("http://minio.store:9000")))
            .orElseThrow();

    assertThatThrownBy(() -> none.createSocket(new BasicHttpContext()))
        .isInstanceOf(SSLException.class)
        .hasMessage(
            "no TLS connection is made by the client of the plain http endpoint"
                + " http://minio.store:9000: its requests all go to that endpoint over http");
  }
}
