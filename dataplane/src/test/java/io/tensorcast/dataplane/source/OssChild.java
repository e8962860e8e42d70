package io.tensorcast.dataplane.source;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.net.URI;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;

/**
 * Runs in a child JVM started by {@link OssSourceIT} with {@code -Djdk.net.hosts.file} (so {@code
 * <bucket>.<domain>} resolves to 127.0.0.1) and OSS credentials in its environment. Prints
 * {@code @@ key=value} lines.
 *
 * <p>Arguments: the OSS endpoint, an {@code oss://} URI.
 */
public final class OssChild {
  private OssChild() {}

  public static void main(String[] args) throws Exception {
    URI endpoint = URI.create(args[0]);
    String uri = args[1];
    SourceOptions options =
        SourceOptions.builder()
            .endpoint(endpoint)
            .region("cn-hangzhou")
            .allowInsecureEndpoint(true) // the OSS front is plain http on loopback
            .build();
    try (ArtifactSource source = Sources.open(uri, options)) {
      List<SourceFile> files = source.list();
      for (SourceFile f : files) {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        long half = f.size() / 2;
        try (InputStream in = source.openRange(f, 0, half)) {
          in.transferTo(all);
        }
        try (InputStream in = source.openRange(f, half, f.size() - half)) {
          in.transferTo(all);
        }
        String sha =
            HexFormat.of()
                .formatHex(MessageDigest.getInstance("SHA-256").digest(all.toByteArray()));
        System.out.println(
            "@@ file:"
                + f.path()
                + "="
                + f.size()
                + " "
                + f.etag()
                + " "
                + f.sha256().orElse("-")
                + " "
                + sha);
      }
    } catch (SourceException e) {
      System.out.println("@@ error=" + e.reason() + ": " + e.getMessage());
    }
    // The same bucket path-style, as plain S3 would address it: OSS refuses it.
    SourceOptions pathStyle =
        SourceOptions.builder()
            .endpoint(endpoint)
            .region("cn-hangzhou")
            .pathStyle(true)
            .credentials(
                new SourceOptions.StaticCredentials(
                    System.getenv("OSS_ACCESS_KEY_ID"),
                    System.getenv("OSS_ACCESS_KEY_SECRET"),
                    java.util.Optional.empty()))
            .build();
    try (ArtifactSource source =
        S3Source.open(SourceUri.parse(uri.replace("oss://", "s3://")), pathStyle)) {
      source.list();
      System.out.println("@@ pathStyle=listed");
    } catch (SourceException e) {
      System.out.println("@@ pathStyle=" + e.reason() + ": " + e.getMessage());
    }
    System.out.println("@@ done=ok");
  }
}
