package io.tensorcast.dataplane.testing;

import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.testing.S3MockServer;
import java.net.URI;
import java.util.Optional;

/**
 * Source options that reach an {@link S3MockServer}, directly or through a proxy in front of it.
 */
public final class S3Options {
  private S3Options() {}

  /** Options that reach {@code s3} directly (path-style, the test credentials). */
  public static SourceOptions.Builder direct(S3MockServer s3) {
    return via(s3.endpoint());
  }

  /**
   * Options for an endpoint in front of S3Mock (e.g. a fault-injecting proxy): plain http on
   * loopback, allowed explicitly as an in-cluster store would be.
   */
  public static SourceOptions.Builder via(URI endpoint) {
    return SourceOptions.builder()
        .endpoint(endpoint)
        .region(S3MockServer.REGION)
        .pathStyle(true)
        .allowInsecureEndpoint(true)
        .credentials(
            new SourceOptions.StaticCredentials(
                S3MockServer.ACCESS_KEY, S3MockServer.SECRET_KEY, Optional.empty()));
  }
}
