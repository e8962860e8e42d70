package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a pod's volumes look like on a simulated node: paths, contents, modes, groups. */
class PodVolumesTest {

  private static final ObjectLookup LOOKUP =
      new ObjectLookup() {
        @Override
        public Map<String, byte[]> secret(String namespace, String name) {
          return name.equals("s")
              ? Map.of(
                  "a", "alpha".getBytes(StandardCharsets.UTF_8),
                  "b", "beta".getBytes(StandardCharsets.UTF_8))
              : null;
        }

        @Override
        public Map<String, byte[]> configMap(String namespace, String name) {
          return null;
        }
      };

  private static String mode(Path p) throws Exception {
    return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
  }

  @Test
  void secretFilesTakeTheirModeAndTheFsGroupAndHostPathsMapUnderTheNodeRoot(@TempDir Path dir)
      throws Exception {
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName("p")
            .withNamespace("ns")
            .endMetadata()
            .withNewSpec()
            .withNewSecurityContext()
            .withFsGroup(4242L)
            .endSecurityContext()
            .addNewVolume()
            .withName("secret")
            .withNewSecret()
            .withSecretName("s")
            .withDefaultMode(0400)
            .addNewItem()
            .withKey("a")
            .withPath("a")
            .endItem()
            .addNewItem()
            .withKey("b")
            .withPath("sub/b")
            .withMode(0600)
            .endItem()
            .endSecret()
            .endVolume()
            .addNewVolume()
            .withName("store")
            .withNewHostPath()
            .withPath("/dev/shm/tensorcast/ns.m")
            .withType("DirectoryOrCreate")
            .endHostPath()
            .endVolume()
            .addNewVolume()
            .withName("tmp")
            .withNewEmptyDir()
            .endEmptyDir()
            .endVolume()
            .endSpec()
            .build();
    Path nodeRoot = dir.resolve("node");

    PodVolumes v = PodVolumes.prepare(pod, nodeRoot, dir.resolve("pod"), LOOKUP);

    Path secret = v.hostDir("secret");
    assertThat(Files.readString(secret.resolve("a"))).isEqualTo("alpha");
    assertThat(mode(secret.resolve("a"))).isEqualTo("r--r-----");
    assertThat(mode(secret.resolve("sub/b"))).isEqualTo("rw-r-----");
    assertThat(Files.getAttribute(secret.resolve("a"), "unix:gid")).isEqualTo(4242);
    assertThat(v.hostDir("store")).isEqualTo(nodeRoot.resolve("dev/shm/tensorcast/ns.m"));
    assertThat(v.hostDir("store")).isDirectory();
    assertThat(nodeRoot.resolve("dev/shm/tensorcast")).isDirectory();
    assertThat(mode(v.hostDir("tmp"))).isEqualTo("rwxrwxrwx");
    assertThat(Files.getAttribute(v.hostDir("tmp"), "unix:gid")).isEqualTo(4242);
  }
}
