package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import org.junit.jupiter.api.Test;

class ContentDigestTest {
  private static final String SHA256 =
      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

  @Test
  void aSha256IsWrittenAsBareHexAndEveryOtherAlgorithmWithItsName() {
    assertThat(ContentDigest.sha256(SHA256.toUpperCase()).toString()).isEqualTo(SHA256);
    assertThat(ContentDigest.parse(SHA256)).isEqualTo(ContentDigest.sha256(SHA256));
    assertThat(new ContentDigest(Algorithm.CRC64NVME, "AE8B14860A799888").toString())
        .isEqualTo("crc64nvme:ae8b14860a799888");
    assertThat(new ContentDigest(Algorithm.GIT_BLOB_SHA1, "a".repeat(40)).toString())
        .isEqualTo("git-blob-sha1:" + "a".repeat(40));
    for (String written :
        new String[] {
          "crc64nvme:ae8b14860a799888",
          "crc32c:e3069283",
          "crc32:cbf43926",
          "md5:" + "0".repeat(32),
          "sha1:" + "1".repeat(40),
          "git-blob-sha1:" + "2".repeat(40),
          SHA256
        }) {
      assertThat(ContentDigest.parse(written).toString()).isEqualTo(written);
    }
    assertThat(ContentDigest.parse("crc32c:e3069283").algorithm()).isEqualTo(Algorithm.CRC32C);
    assertThat(ContentDigest.parse("crc32c:e3069283").isSha256()).isFalse();
  }

  @Test
  void whatIsNotADigestOfItsAlgorithmIsRefusedByName() {
    assertThatThrownBy(() -> ContentDigest.parse(SHA256.substring(1)))
        .hasMessage("not a sha256 value (64 hex digits): '" + SHA256.substring(1) + "'");
    assertThatThrownBy(() -> ContentDigest.parse("crc32c:e306928"))
        .hasMessage("not a crc32c value (8 hex digits): 'e306928'");
    assertThatThrownBy(() -> ContentDigest.parse("md5:" + "g".repeat(32)))
        .hasMessageStartingWith("not a md5 value (32 hex digits)");
    assertThatThrownBy(() -> ContentDigest.parse("sha512:00"))
        .hasMessage("unknown digest algorithm 'sha512' in content digest 'sha512:00'");
    assertThatThrownBy(() -> ContentDigest.parse(null)).hasMessage("no content digest");
  }
}
