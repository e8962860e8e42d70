package io.tensorcast.dataplane.source;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.util.Locale;
import java.util.Optional;
import javax.net.ssl.SSLException;
import org.apache.http.HttpHost;
import org.apache.http.conn.socket.ConnectionSocketFactory;
import org.apache.http.protocol.HttpContext;
import software.amazon.awssdk.http.apache.ApacheHttpClient;

/**
 * The TLS side of an Apache HTTP client whose every request goes to a plain {@code http://}
 * endpoint: none. The SDK's Apache client otherwise builds its {@code https} socket factory when
 * the client is built — an {@code SSLContext} and the JDK's default trust managers, which read and
 * parse the whole CA trust store — although no request of such a client ever opens a TLS
 * connection. Here the {@code https} scheme gets a socket factory that refuses, naming the
 * endpoint, so the trust store is never loaded.
 *
 * <p>Clients of {@code https://} endpoints and of AWS itself (no endpoint override) keep the SDK's
 * own TLS socket factory, trust managers and hostname verification unchanged.
 */
public final class PlainHttpEndpoint implements ConnectionSocketFactory {
  private final URI endpoint;

  private PlainHttpEndpoint(URI endpoint) {
    this.endpoint = endpoint;
  }

  /**
   * The {@code https} socket factory for a client of {@code endpoint}: a refusing one when the
   * endpoint is {@code http://}, empty (the SDK's TLS socket factory) otherwise.
   *
   * @param endpoint the client's endpoint override; empty for AWS itself
   */
  public static Optional<ConnectionSocketFactory> tlsSocketFactory(Optional<URI> endpoint) {
    return endpoint
        .filter(e -> e.getScheme() != null && "http".equals(e.getScheme().toLowerCase(Locale.ROOT)))
        .map(PlainHttpEndpoint::new);
  }

  /**
   * Sets the {@code https} socket factory of {@code builder} to {@link #tlsSocketFactory}'s when
   * there is one.
   *
   * @return {@code builder}
   */
  public static ApacheHttpClient.Builder withoutTlsFor(
      ApacheHttpClient.Builder builder, Optional<URI> endpoint) {
    tlsSocketFactory(endpoint).ifPresent(builder::socketFactory);
    return builder;
  }

  @Override
  public Socket createSocket(HttpContext context) throws IOException {
    throw refused();
  }

  @Override
  public Socket connectSocket(
      int connectTimeout,
      Socket socket,
      HttpHost host,
      InetSocketAddress remoteAddress,
      InetSocketAddress localAddress,
      HttpContext context)
      throws IOException {
    throw refused();
  }

  private SSLException refused() {
    return new SSLException(
        "no TLS connection is made by the client of the plain http endpoint "
            + endpoint
            + ": its requests all go to that endpoint over http");
  }
}
