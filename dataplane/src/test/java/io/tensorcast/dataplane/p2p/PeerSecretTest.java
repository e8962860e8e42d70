package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Base64;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PeerSecretTest {
  @Test
  void aRotatedFileIsReadAgainAfterAFailedHandshakeAndABrokenOneKeepsTheLastKey(@TempDir Path dir)
      throws Exception {
    byte[] first = new byte[32];
    first[0] = 1;
    byte[] second = new byte[48];
    second[0] = 2;
    Path file = dir.resolve("peer-secret");
    Files.writeString(file, Base64.getEncoder().encodeToString(first) + "\n");
    PeerSecret s = PeerSecret.fromFile(file);
    assertThat(s.key()).isEqualTo(first);
    String fp = s.fingerprint();
    // The kubelet swaps the file atomically.
    Path next =
        Files.writeString(dir.resolve("next"), Base64.getUrlEncoder().encodeToString(second));
    Files.move(next, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    s.recheckNow();
    assertThat(s.key()).isEqualTo(second);
    assertThat(s.fingerprint()).hasSize(8).isNotEqualTo(fp);
    Files.writeString(file, "garbage");
    s.recheckNow();
    assertThat(s.key()).as("a broken file keeps the last good key").isEqualTo(second);
  }

  @Test
  void tooShortOrNotBase64IsRefusedNamingTheFile(@TempDir Path dir) throws Exception {
    Path shortFile =
        Files.writeString(dir.resolve("s"), Base64.getEncoder().encodeToString(new byte[31]));
    assertThatThrownBy(() -> PeerSecret.fromFile(shortFile))
        .hasMessageContaining(shortFile + " holds 31 bytes; at least 32 random bytes are needed");
    assertThatThrownBy(() -> PeerSecret.fromFile(dir.resolve("missing")))
        .hasMessageStartingWith("cannot read the peer secret file " + dir.resolve("missing"));
  }
}
