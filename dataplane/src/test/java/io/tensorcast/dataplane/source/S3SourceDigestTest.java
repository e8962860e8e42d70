package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.http.SdkHttpResponse;
import software.amazon.awssdk.services.s3.model.ChecksumType;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ServerSideEncryption;

/** Which digest of a HEAD answer the loader checks, and why none when there is none. */
class S3SourceDigestTest {
  private static final String MD5 = "9e107d9d372bb6826bd81d3542a419d6";
  private static final SourceFile FILE = new SourceFile("w.bin", 10, MD5, Optional.empty());

  private static HeadObjectResponse.Builder head() {
    return HeadObjectResponse.builder().eTag('"' + MD5 + '"');
  }

  @Test
  void aFullObjectChecksumIsPreferredSha256First() {
    PublishedDigest d =
        S3Source.digestOf(
            head()
                .checksumCRC64NVME("AAAAAAAAAAE=")
                .checksumSHA256("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
                .build(),
            FILE);
    assertThat(d.algorithm()).isEqualTo(PublishedDigest.Algorithm.SHA256);
    assertThat(d.valueHex())
        .isEqualTo("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assertThat(d.description()).isEqualTo("SHA256 (full-object checksum)");
    PublishedDigest crc =
        S3Source.digestOf(
            head()
                .checksumType(ChecksumType.COMPOSITE)
                .checksumCRC32C("yZRlqg==-3")
                .checksumCRC64NVME("AAAAAAAAAAE=")
                .build(),
            FILE);
    assertThat(crc.algorithm())
        .as("CRC-64/NVME is of the full object even for a multipart upload")
        .isEqualTo(PublishedDigest.Algorithm.CRC64NVME);
    assertThat(crc.valueHex()).isEqualTo("0000000000000001");
  }

  @Test
  void aCompositeChecksumAndAMultipartEtagLeaveNoDigestAndSayWhy() {
    SourceFile multipart = new SourceFile("w.bin", 10, MD5 + "-3", Optional.empty());
    PublishedDigest d =
        S3Source.digestOf(
            HeadObjectResponse.builder()
                .eTag('"' + MD5 + "-3\"")
                .checksumType(ChecksumType.COMPOSITE)
                .checksumCRC32C("yZRlqg==-3")
                .build(),
            multipart);
    assertThat(d.present()).isFalse();
    assertThat(d.description())
        .isEqualTo(
            "the object's CRC32C checksum is composite (a digest of its multipart upload's"
                + " parts), which the bytes cannot be checked against; its ETag '"
                + MD5
                + "-3' is not an MD5 (a multipart upload's ETag is a digest of its parts)");
  }

  @Test
  void aSinglePartEtagIsTheMd5UnlessKmsOrCustomerKeysOrAnOssAppendableObject() {
    PublishedDigest plain = S3Source.digestOf(head().build(), FILE);
    assertThat(plain.algorithm()).isEqualTo(PublishedDigest.Algorithm.MD5);
    assertThat(plain.valueHex()).isEqualTo(MD5);
    assertThat(plain.description()).isEqualTo("MD5 (single-part ETag)");
    assertThat(
            S3Source.digestOf(
                    head().serverSideEncryption(ServerSideEncryption.AES256).build(), FILE)
                .algorithm())
        .as("SSE-S3 keeps the ETag an MD5")
        .isEqualTo(PublishedDigest.Algorithm.MD5);
    assertThat(
            S3Source.digestOf(
                    head().serverSideEncryption(ServerSideEncryption.AWS_KMS).build(), FILE)
                .description())
        .isEqualTo(
            "the object has no full-object checksum; its ETag is not the content's MD5 under"
                + " SSE-KMS encryption");
    assertThat(S3Source.digestOf(head().sseCustomerAlgorithm("AES256").build(), FILE).present())
        .isFalse();
    HeadObjectResponse appendable =
        (HeadObjectResponse)
            head()
                .sdkHttpResponse(
                    SdkHttpResponse.builder()
                        .statusCode(200)
                        .headers(Map.of("x-oss-object-type", List.of("Appendable")))
                        .build())
                .build();
    assertThat(S3Source.digestOf(appendable, FILE).description())
        .endsWith("its ETag is not the content's MD5 for an OSS Appendable object");
  }
}
