package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.OssFront;
import io.tensorcast.testing.S3MockServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.core.sync.RequestBody;

/**
 * {@code oss://} end to end: {@link Sources#open} → S3Source with the OSS settings → {@link
 * OssFront} (virtual-hosted only, no aws-chunked, access key checked) → S3Mock holding real corpus
 * files, one of them uploaded by multipart.
 *
 * <p>Virtual-hosted names ({@code <bucket>.oss-test.localhost}) need name resolution the machine
 * does not have, so the client runs in a child JVM ({@link OssChild}) started with {@code
 * -Djdk.net.hosts.file} pointing at a hosts file this test writes, and with {@code
 * OSS_ACCESS_KEY_ID}/{@code OSS_ACCESS_KEY_SECRET} in its environment — the variables the OSS
 * source reads. No build setting is involved, and other tests' name resolution is untouched.
 */
class OssSourceIT {
  private static final String BUCKET = "oss-it-bucket";
  private static final String KEY_ID = "LTAI-oss-it-key";
  private static final String DOMAIN = "oss-test.localhost";

  @Test
  void ossListsAndReadsVirtualHostedWithEnvCredentialsAndRefusesPathStyle() throws Exception {
    S3MockServer s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    Path dir = Corpus.dir().resolve("index/safetensorsjl-tiny-sharded");
    Map<String, Path> local = new TreeMap<>();
    try (var files = Files.list(dir)) {
      for (Path f : files.sorted().toList()) {
        s3.putFile(BUCKET, "models/tiny/" + f.getFileName(), f);
        local.put(f.getFileName().toString(), f);
      }
    }
    // a multipart object: two parts (5 MiB minimum for all but the last), real bytes repeated
    byte[] shard = Files.readAllBytes(local.get("model-00001-of-00006.safetensors"));
    byte[] big = new byte[5 * 1024 * 1024 + shard.length];
    for (int i = 0; i < big.length; i++) {
      big[i] = shard[i % shard.length];
    }
    String multipartEtag = multipart(s3, BUCKET, "models/tiny/multipart.bin", big, 5 * 1024 * 1024);
    assertThat(multipartEtag).endsWith("-2");

    try (OssFront front = new OssFront(DOMAIN, KEY_ID, s3.endpoint())) {
      Path hosts = Files.createTempFile("oss-hosts", ".txt");
      Files.writeString(hosts, front.hostsFile(BUCKET));
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.addAll(
          List.of(
              "-Xmx256m",
              "-XX:TieredStopAtLevel=1",
              "-Djdk.net.hosts.file=" + hosts,
              "-cp",
              System.getProperty("java.class.path"),
              OssChild.class.getName(),
              front.endpoint().toString(),
              "oss://" + BUCKET + "/models/tiny/"));
      ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
      pb.environment().put("OSS_ACCESS_KEY_ID", KEY_ID);
      pb.environment().put("OSS_ACCESS_KEY_SECRET", "oss-it-secret");
      pb.environment().remove("AWS_ACCESS_KEY_ID");
      Process p = pb.start();
      Map<String, String> results = new TreeMap<>();
      StringBuilder log = new StringBuilder();
      try (BufferedReader in =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          log.append(line).append('\n');
          if (line.startsWith("@@ ")) {
            int eq = line.indexOf('=');
            results.put(line.substring(3, eq), line.substring(eq + 1));
          }
        }
      }
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
      Files.deleteIfExists(hosts);
      assertThat(results).as(log.toString()).containsEntry("done", "ok").doesNotContainKey("error");

      assertThat(results.keySet())
          .as(log.toString())
          .contains("file:multipart.bin")
          .containsAll(local.keySet().stream().map(k -> "file:" + k).toList());
      for (Map.Entry<String, Path> e : local.entrySet()) {
        String[] got = results.get("file:" + e.getKey()).split(" ");
        assertThat(Long.parseLong(got[0])).isEqualTo(Files.size(e.getValue()));
        assertThat(got[2]).as("no sha256 from an ETag").isEqualTo("-");
        assertThat(got[3]).as(e.getKey()).isEqualTo(sha256(Files.readAllBytes(e.getValue())));
      }
      String[] mp = results.get("file:multipart.bin").split(" ");
      assertThat(mp[1]).isEqualTo(multipartEtag); // listed and sent as If-Match, never as an MD5
      assertThat(mp[2]).isEqualTo("-");
      assertThat(mp[3]).isEqualTo(sha256(big));

      assertThat(results.get("pathStyle"))
          .startsWith("AccessDenied")
          .contains("SecondLevelDomainForbidden");
      // every accepted request was virtual-hosted
      assertThat(front.hosts()).contains(BUCKET + "." + DOMAIN + ":" + front.endpoint().getPort());
    }
  }

  private static String multipart(
      S3MockServer s3, String bucket, String key, byte[] bytes, int part) {
    var client = s3.client();
    String uploadId = client.createMultipartUpload(b -> b.bucket(bucket).key(key)).uploadId();
    List<software.amazon.awssdk.services.s3.model.CompletedPart> parts = new ArrayList<>();
    int n = 1;
    for (int off = 0; off < bytes.length; off += part, n++) {
      byte[] chunk = java.util.Arrays.copyOfRange(bytes, off, Math.min(bytes.length, off + part));
      int number = n;
      String etag =
          client
              .uploadPart(
                  b -> b.bucket(bucket).key(key).uploadId(uploadId).partNumber(number),
                  RequestBody.fromBytes(chunk))
              .eTag();
      parts.add(
          software.amazon.awssdk.services.s3.model.CompletedPart.builder()
              .partNumber(number)
              .eTag(etag)
              .build());
    }
    return client
        .completeMultipartUpload(
            b -> b.bucket(bucket).key(key).uploadId(uploadId).multipartUpload(m -> m.parts(parts)))
        .eTag()
        .replace("\"", "");
  }

  static String sha256(byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
