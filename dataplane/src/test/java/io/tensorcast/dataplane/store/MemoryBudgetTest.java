package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MemoryBudgetTest {
  private static final long MIB = 1L << 20;
  private static final long GIB = 1L << 30;

  @TempDir Path fake;

  private void write(String path, String content) throws IOException {
    Path p = fake.resolve(path);
    Files.createDirectories(p.getParent());
    Files.writeString(p, content);
  }

  private static final String V2_MOUNTINFO =
      "30 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2"
          + " rw,nsdelegate\n"
          + "40 22 0:50 / /dev/shm rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,size=65536k\n";

  @Test
  void cgroupV2AncestorLimitMinusWorkingSetBindsTheBudget() throws IOException {
    // the container's own cgroup has no limit; the pod's does (Kubernetes layout)
    write("sys/fs/cgroup/kubepods/pod1/c1/memory.max", "max\n");
    write("sys/fs/cgroup/kubepods/pod1/c1/memory.current", "100\n");
    write("sys/fs/cgroup/kubepods/pod1/memory.max", GIB + "\n");
    write("sys/fs/cgroup/kubepods/pod1/memory.current", 600 * MIB + "\n");
    write(
        "sys/fs/cgroup/kubepods/pod1/memory.stat",
        "anon 1000\nfile 2000\ninactive_file " + 100 * MIB + "\nshmem 300\n");
    write("sys/fs/cgroup/kubepods/memory.max", 8 * GIB + "\n");
    write("sys/fs/cgroup/kubepods/memory.current", 7 * GIB + "\n");

    MemoryBudget b =
        MemoryBudget.detect(
            fake,
            "0::/kubepods/pod1/c1\n",
            V2_MOUNTINFO,
            "MemTotal: 24000000 kB\nMemAvailable:    2097152 kB\n",
            10 * GIB,
            "/dev/shm on tmpfs");

    assertThat(b.bytes()).isEqualTo(GIB - 500 * MIB);
    assertThat(b.boundBy()).isEqualTo(MemoryBudget.CGROUP_V2);
    assertThat(b.description())
        .startsWith((GIB - 500 * MIB) + " bytes, bound by cgroup memory.max (")
        .contains("kubepods/pod1: memory.max " + GIB)
        .contains("MemAvailable: " + 2 * GIB + " bytes")
        .contains("filesystem free space: " + 10 * GIB + " bytes");
    assertThat(b.bounds()).hasSize(3);
  }

  @Test
  void cgroupV1InsideANamespacedMountUsesTheMountItself() throws IOException {
    // docker-style v1: the mount's root is the container's cgroup, /proc/self/cgroup shows the same
    write("sys/fs/cgroup/memory/memory.limit_in_bytes", 512 * MIB + "\n");
    write("sys/fs/cgroup/memory/memory.usage_in_bytes", 200 * MIB + "\n");
    write("sys/fs/cgroup/memory/memory.stat", "cache 5\ntotal_inactive_file " + 50 * MIB + "\n");
    String mountinfo =
        "34 30 0:31 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

    MemoryBudget b =
        MemoryBudget.detect(
            fake,
            "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n",
            mountinfo,
            "MemAvailable: 8388608 kB\n",
            GIB,
            "/dev/shm");

    assertThat(b.boundBy()).isEqualTo(MemoryBudget.CGROUP_V1);
    assertThat(b.bytes()).isEqualTo(512 * MIB - 150 * MIB);
  }

  @Test
  void unlimitedCgroupsLeaveMemAvailableOrTheFilesystem() throws IOException {
    write("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "9223372036854771712\n");
    write("sys/fs/cgroup/memory/a/memory.usage_in_bytes", "1\n");
    write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    String mountinfo = "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

    // a tmpfs whose df size exceeds real memory: MemAvailable binds
    MemoryBudget memBound =
        MemoryBudget.detect(
            fake, "4:memory:/a\n", mountinfo, "MemAvailable: 1048576 kB\n", 24 * GIB, "/dev/shm");
    assertThat(memBound.boundBy()).isEqualTo(MemoryBudget.MEM_AVAILABLE);
    assertThat(memBound.bytes()).isEqualTo(GIB);
    assertThat(memBound.bounds()).hasSize(2);

    // a small tmpfs: its free space binds
    MemoryBudget fsBound =
        MemoryBudget.detect(
            fake, "4:memory:/a\n", mountinfo, "MemAvailable: 1048576 kB\n", 64 * MIB, "/dev/shm");
    assertThat(fsBound.boundBy()).isEqualTo(MemoryBudget.FILESYSTEM);
    assertThat(fsBound.bytes()).isEqualTo(64 * MIB);
  }

  @Test
  void mountPointsWithEscapedSpacesAreDecoded() throws IOException {
    write("sys/fs/my cgroup/memory.max", 100 * MIB + "\n");
    write("sys/fs/my cgroup/memory.current", "0\n");
    MemoryBudget b =
        MemoryBudget.detect(
            fake,
            "0::/\n",
            "30 22 0:27 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
            "MemAvailable: 8388608 kB\n",
            GIB,
            "/dev/shm");
    assertThat(b.bytes()).isEqualTo(100 * MIB);
  }

  @Test
  void realDetectionOnDevShmIsWithinMemAvailableAndFreeSpace() throws IOException {
    MemoryBudget b = MemoryBudget.detect(Path.of("/dev/shm/tensorcast-not-created-yet/x"));
    long memAvailable =
        Files.readAllLines(Path.of("/proc/meminfo")).stream()
                .filter(l -> l.startsWith("MemAvailable:"))
                .mapToLong(l -> Long.parseLong(l.replaceAll("[^0-9]", "")))
                .findFirst()
                .orElseThrow()
            * 1024;
    FileStore shm = Files.getFileStore(Path.of("/dev/shm"));
    assertThat(b.bytes()).isPositive();
    // both sides move while other processes run; allow 256 MiB of drift
    assertThat(b.bytes()).isLessThanOrEqualTo(memAvailable + 256 * MIB);
    assertThat(b.bytes()).isLessThanOrEqualTo(shm.getUsableSpace() + 256 * MIB);
    assertThat(b.boundBy())
        .isIn(
            MemoryBudget.CGROUP_V1,
            MemoryBudget.CGROUP_V2,
            MemoryBudget.MEM_AVAILABLE,
            MemoryBudget.FILESYSTEM);
    assertThat(b.description()).contains("bound by " + b.boundBy());
  }
}
