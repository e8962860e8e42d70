package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Page-locking in a child JVM that runs without {@code CAP_IPC_LOCK} ({@code setpriv} drops it from
 * the inheritable and bounding sets, so the exec'd JVM does not get it even as root), where {@code
 * RLIMIT_MEMLOCK} (8 MiB on these machines) applies.
 */
class MemoryLockWithoutCapabilityIT {
  private ShmRoot shm;
  private List<String> dropCap;
  private long limit;

  @BeforeEach
  void setUp() throws Exception {
    dropCap = ChildJvm.dropIpcLockPrefix();
    assumeTrue(dropCap != null, "setpriv (util-linux) not found: cannot drop CAP_IPC_LOCK");
    limit = MemoryLockSupport.facts().softLimitBytes();
    assumeTrue(limit < (1L << 30), "RLIMIT_MEMLOCK is " + limit + ": too high to exceed here");
    shm = ShmRoot.create();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (shm != null) {
      shm.close();
    }
  }

  private Map<String, String> run(String... args) throws Exception {
    Process p = ChildJvm.start(dropCap, args);
    StringBuilder log = new StringBuilder();
    Map<String, String> r = ChildJvm.results(p, null, log);
    assertThat(p.waitFor()).as("child exit; output:\n%s", log).isZero();
    assertThat(r.get("cap")).as("the child must run without CAP_IPC_LOCK").isEqualTo("false");
    assertThat(r.get("softLimit")).isEqualTo(Long.toString(limit));
    return r;
  }

  private long tooBig() {
    return Math.max(16L << 20, 2 * limit);
  }

  @Test
  void requiredRefusesClearlyAndCreatesNothing() throws Exception {
    Map<String, String> r =
        run("allocate", shm.dir.resolve("store").toString(), "REQUIRED", Long.toString(tooBig()));
    assertThat(r.get("outcome")).isEqualTo("Refused");
    assertThat(r.get("exception")).isEqualTo("MemoryLockException");
    assertThat(r.get("reason")).isEqualTo("MemlockLimitTooLow");
    assertThat(r.get("message"))
        .contains("artifact probe could not be page-locked")
        .contains("mlock of " + tooBig() + " bytes was not attempted")
        .contains("RLIMIT_MEMLOCK is " + limit + " bytes (soft)")
        .contains("CAP_IPC_LOCK is not in the effective capability set")
        .contains("securityContext.capabilities.add: [IPC_LOCK]")
        .contains("raise the memlock limit to at least " + tooBig() + " bytes");
    assertThat(r.get("tree")).isEqualTo(".tensorcast,.tensorcast/store.lock");
  }

  @Test
  void bestEffortLoadsUnlockedAndSaysWhy() throws Exception {
    Map<String, String> r =
        run(
            "allocate",
            shm.dir.resolve("store").toString(),
            "BEST_EFFORT",
            Long.toString(tooBig()));
    assertThat(r.get("outcome")).isEqualTo("Loaded");
    assertThat(r.get("bytesEqual")).isEqualTo("true");
    assertThat(r.get("locked")).isEqualTo("false");
    assertThat(r.get("lockedBytes")).isEqualTo("0");
    assertThat(r.get("reason")).isEqualTo("MemlockLimitTooLow");
    assertThat(r.get("message")).contains("CAP_IPC_LOCK is not in the effective capability set");
    assertThat(r.get("tree")).isEqualTo(".tensorcast,.tensorcast/store.lock");
  }

  @Test
  void withinTheLimitLockingWorksWithoutTheCapability() throws Exception {
    long small = limit / 2;
    Map<String, String> r =
        run("allocate", shm.dir.resolve("store").toString(), "REQUIRED", Long.toString(small));
    assertThat(r.get("outcome")).isEqualTo("Loaded");
    assertThat(r.get("locked")).isEqualTo("true");
    assertThat(r.get("lockedBytes")).isEqualTo(Long.toString(small));
  }

  @Test
  void theKernelRefusesWithEnomemAndTheMessageExplainsIt() throws Exception {
    Map<String, String> r = run("mlock", shm.dir.toString(), Long.toString(tooBig()));
    assertThat(r.get("errno")).isEqualTo("ENOMEM");
    assertThat(r.get("reason")).isEqualTo("MemlockLimitTooLow");
    assertThat(r.get("message"))
        .contains("mlock of " + tooBig() + " bytes failed with ENOMEM")
        .contains("CAP_IPC_LOCK is not in the effective capability set");
  }
}
