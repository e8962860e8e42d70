package io.tensorcast.operator.trust;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.desired.CopyGeneration;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ArtifactKeysTest {
  private static final String MATERIAL = "k".repeat(40);

  private static MasterKey key(Path dir, String material) throws Exception {
    Path f = dir.resolve("master-key");
    Files.writeString(f, material + "\n");
    return MasterKey.fromFile(f);
  }

  @Test
  void valuesAreTheDocumentedHmacs(@TempDir Path dir) throws Exception {
    ModelArtifact a = artifact("ns", "m", 7, "s3://b/m/");

    ArtifactKeys k =
        ArtifactKeys.derive(
            key(dir, MATERIAL),
            a,
            io.tensorcast.operator.desired.CopyGeneration.of(a).generation());

    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(MATERIAL.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
    byte[] peer =
        mac.doFinal("tensorcast/v1 peer-secret\nuid-m\n7".getBytes(StandardCharsets.UTF_8));
    byte[] read = mac.doFinal("tensorcast/v1 read-token\nuid-m".getBytes(StandardCharsets.UTF_8));
    assertThat(k.peerSecret()).isEqualTo(Base64.getEncoder().encodeToString(peer)).hasSize(44);
    assertThat(Base64.getDecoder().decode(k.peerSecret())).hasSize(32);
    assertThat(k.readToken())
        .isEqualTo(Base64.getUrlEncoder().withoutPadding().encodeToString(read))
        .hasSize(43);
    assertThat(k.adminToken()).hasSize(43).isNotEqualTo(k.readToken());
    assertThat(k.keyId()).matches("[0-9a-f]{16}");
    assertThat(k.toString()).doesNotContain(k.adminToken(), k.peerSecret(), k.readToken());
  }

  @Test
  void thePeerSecretChangesWithTheGenerationTheTokensOnlyWithTheArtifact(@TempDir Path dir)
      throws Exception {
    MasterKey key = key(dir, MATERIAL);
    ArtifactKeys g1 = derive(key, artifact("ns", "m", 1, "s3://b/m/"));
    ArtifactKeys g2 = derive(key, artifact("ns", "m", 2, "s3://b/m/"));
    ModelArtifact recreated = artifact("ns", "m", 1, "s3://b/m/");
    recreated.getMetadata().setUid("another-uid");
    ArtifactKeys again = derive(key, recreated);

    assertThat(g2.peerSecret()).isNotEqualTo(g1.peerSecret());
    assertThat(g2.readToken()).isEqualTo(g1.readToken());
    assertThat(g2.adminToken()).isEqualTo(g1.adminToken());
    assertThat(again.readToken()).isNotEqualTo(g1.readToken());
    assertThat(again.peerSecret()).isNotEqualTo(g1.peerSecret());
    assertThat(derive(key, artifact("ns", "m", 1, "s3://b/m/"))).isEqualTo(g1);
  }

  @Test
  void anotherMasterKeyGivesOtherValuesAndAnotherId(@TempDir Path dir) throws Exception {
    ModelArtifact a = artifact("ns", "m", 1, "s3://b/m/");
    MasterKey one = key(dir, MATERIAL);
    MasterKey two = MasterKey.random();

    assertThat(derive(two, a).adminToken()).isNotEqualTo(derive(one, a).adminToken());
    assertThat(two.id()).isNotEqualTo(one.id());
    assertThat(one.id()).isEqualTo(key(dir, MATERIAL).id());
    assertThat(one.toString()).doesNotContain(MATERIAL).contains(one.id());
    assertThat(HexFormat.of().parseHex(one.id())).hasSize(8);
  }

  @Test
  void aShortOrMissingKeyFileIsRefusedWithItsName(@TempDir Path dir) throws Exception {
    Path shortKey = dir.resolve("short");
    Files.writeString(shortKey, "too-short\n");

    assertThatThrownBy(() -> MasterKey.fromFile(shortKey))
        .hasMessageContaining("the master key in " + shortKey + " is 9 bytes; at least 32");
    assertThatThrownBy(() -> MasterKey.fromFile(dir.resolve("absent")))
        .hasMessageContaining("cannot read the master key file " + dir.resolve("absent"));
  }

  @Test
  void anArtifactWithoutUidHasNoKeys() {
    ModelArtifact a = artifact("ns", "m", 1, "s3://b/m/");
    a.getMetadata().setUid(null);

    assertThatThrownBy(() -> derive(MasterKey.random(), a))
        .hasMessageContaining("ModelArtifact ns/m has no uid");
  }

  /** The keys of a ModelArtifact at its copy generation, as the reconciler derives them. */
  private static ArtifactKeys derive(MasterKey key, ModelArtifact artifact) {
    return ArtifactKeys.derive(key, artifact, CopyGeneration.of(artifact).generation());
  }
}
