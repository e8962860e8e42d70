package io.tensorcast.dataplane.source;

import io.tensorcast.dataplane.testing.S3Options;
import java.io.InputStream;
import java.net.URI;
import java.security.MessageDigest;
import java.util.HexFormat;

/**
 * Runs in a child JVM started by {@link S3SourceIT} (with the class-load log on): lists an {@code
 * s3://} prefix on a plain {@code http://} endpoint and reads every file whole. Prints {@code @@
 * file:PATH=SHA-256} lines and {@code @@ done=ok}.
 *
 * <p>Arguments: the endpoint, an {@code s3://} URI.
 */
public final class PlainHttpChild {
  private PlainHttpChild() {}

  public static void main(String[] args) throws Exception {
    try (ArtifactSource source =
        Sources.open(args[1], S3Options.via(URI.create(args[0])).build())) {
      for (SourceFile f : source.list()) {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        try (InputStream in = source.openRange(f, 0, f.size())) {
          sha.update(in.readAllBytes());
        }
        System.out.println("@@ file:" + f.path() + "=" + HexFormat.of().formatHex(sha.digest()));
      }
    }
    System.out.println("@@ done=ok");
  }
}
