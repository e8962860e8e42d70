package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LocalControlPlaneTest {

  @TempDir Path dir;

  private final String saved = System.getProperty(LocalControlPlane.BIN_PROPERTY);

  @AfterEach
  void restore() {
    if (saved == null) {
      System.clearProperty(LocalControlPlane.BIN_PROPERTY);
    } else {
      System.setProperty(LocalControlPlane.BIN_PROPERTY, saved);
    }
  }

  @Test
  void missingBinariesAreNamedWithTheDirectoryAndHowToBuildThem() throws Exception {
    Files.createFile(dir.resolve("etcd")).toFile().setExecutable(true);
    System.setProperty(LocalControlPlane.BIN_PROPERTY, dir.toString());

    assertThatThrownBy(() -> LocalControlPlane.start(dir.resolve("work")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("missing in " + dir)
        .hasMessageContaining("system property tensorcast.k8s.bin")
        .hasMessageContaining("kube-apiserver, kube-controller-manager, kube-scheduler.")
        .hasMessageContaining("hack/k8s/build-binaries.sh");
  }
}
