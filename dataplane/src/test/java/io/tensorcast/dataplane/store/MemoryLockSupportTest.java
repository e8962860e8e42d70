package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class MemoryLockSupportTest {

  @Test
  void capIpcLockIsBit14OfCapEff() {
    assertThat(MemoryLockSupport.capIpcLockIn("Name:\tjava\nCapEff:\t000001fffeffffff\n")).isTrue();
    assertThat(MemoryLockSupport.capIpcLockIn("CapEff:\t000001fffeffbfff\n")).isFalse();
    assertThat(MemoryLockSupport.capIpcLockIn("CapEff:\t0000000000004000\n")).isTrue();
    assertThat(MemoryLockSupport.capIpcLockIn("CapInh:\t0000000000004000\n")).isFalse();
  }

  @Test
  void vmLckIsReadInKilobytes() {
    assertThat(MemoryLockSupport.vmLckBytesIn("VmLck:\t    8192 kB\n")).isEqualTo(8192L * 1024);
    assertThat(MemoryLockSupport.vmLckBytesIn("VmRSS:\t 1 kB\n")).isZero();
  }

  @Test
  void errnoNames() {
    assertThat(MemoryLockSupport.errnoName(12)).isEqualTo("ENOMEM");
    assertThat(MemoryLockSupport.errnoName(1)).isEqualTo("EPERM");
    assertThat(MemoryLockSupport.errnoName(11)).isEqualTo("EAGAIN");
    assertThat(MemoryLockSupport.errnoName(4242)).isEqualTo("errno 4242");
  }

  @Test
  void factsMatchWhatTheShellAndProcSay() throws IOException, InterruptedException {
    MemoryLockSupport.Facts facts = MemoryLockSupport.facts();
    Process p = new ProcessBuilder("sh", "-c", "ulimit -l").redirectErrorStream(true).start();
    String ulimit = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    assertThat(p.waitFor()).isZero();
    long expected = ulimit.equals("unlimited") ? Long.MAX_VALUE : Long.parseLong(ulimit) * 1024;
    assertThat(facts.softLimitBytes()).isEqualTo(expected);

    String status = Files.readString(Path.of("/proc/self/status"));
    String capEff =
        status.lines().filter(l -> l.startsWith("CapEff:")).findFirst().orElseThrow().substring(7);
    boolean bit14 = (Long.parseUnsignedLong(capEff.trim(), 16) >> 14 & 1) == 1;
    assertThat(facts.capIpcLock()).isEqualTo(bit14);
    assertThat(MemoryLockSupport.pageSize()).isEqualTo(4096L);
  }

  @Test
  void limitTooLowMessageCarriesTheNumbersAndTheRemedies() {
    var facts = new MemoryLockSupport.Facts(8L << 20, 8L << 20, false, 0);
    LockStatus s = MemoryLockSupport.failure(16L << 20, MemoryLockSupport.ENOMEM, facts);
    assertThat(s.locked()).isFalse();
    assertThat(s.lockedBytes()).isZero();
    assertThat(s.reason()).isEqualTo(Reason.MemlockLimitTooLow);
    assertThat(s.message())
        .contains("mlock of 16777216 bytes failed with ENOMEM")
        .contains("RLIMIT_MEMLOCK is 8388608 bytes (soft)")
        .contains("CAP_IPC_LOCK is not in the effective capability set")
        .contains("securityContext.capabilities.add: [IPC_LOCK]")
        .contains("raise the memlock limit to at least 16777216 bytes");
  }

  @Test
  void failureWithTheCapabilityIsLockFailed() {
    var facts = new MemoryLockSupport.Facts(8L << 20, 8L << 20, true, 0);
    LockStatus s = MemoryLockSupport.failure(1L << 30, MemoryLockSupport.EAGAIN, facts);
    assertThat(s.reason()).isEqualTo(Reason.LockFailed);
    assertThat(s.message()).contains("failed with EAGAIN").contains("CAP_IPC_LOCK is in effect");
  }

  @Test
  void factsAllow() {
    assertThat(new MemoryLockSupport.Facts(100, 100, false, 40).allows(60)).isTrue();
    assertThat(new MemoryLockSupport.Facts(100, 100, false, 40).allows(61)).isFalse();
    assertThat(new MemoryLockSupport.Facts(100, 100, true, 40).allows(1L << 40)).isTrue();
    assertThat(
            new MemoryLockSupport.Facts(Long.MAX_VALUE, Long.MAX_VALUE, false, 0).allows(1L << 40))
        .isTrue();
  }
}
