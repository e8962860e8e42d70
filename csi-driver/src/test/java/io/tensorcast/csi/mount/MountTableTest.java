package io.tensorcast.csi.mount;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MountTableTest {

  @Test
  void readsMountPointsWithTheKernelsEscapes(@TempDir Path dir) throws Exception {
    Path mountinfo = dir.resolve("mountinfo");
    Files.writeString(
        mountinfo,
        "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
            + "35 22 0:31 / /dev/shm rw,nosuid,nodev shared:9 - tmpfs tmpfs rw\n"
            + "90 35 0:31 /tensorcast/a.b/a-b-g1 /var/lib/kubelet/pods/u1/volumes/"
            + "kubernetes.io~csi/my\\040model/mount ro,relatime shared:9 - tmpfs tmpfs rw\n");
    assertThat(MountTable.mountPoints(mountinfo))
        .containsExactly(
            Path.of("/"),
            Path.of("/dev/shm"),
            Path.of("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/my model/mount"));
    assertThat(MountTable.unescape("a\\011b\\134c\\012")).isEqualTo("a\tb\\c\n");
    assertThat(MountTable.unescape("no\\08escape")).isEqualTo("no\\08escape");
  }
}
