package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A data plane killed with SIGKILL mid-load, then a new store on the same root: the complete
 * artifact is adopted with its bytes intact, the half-loaded one is removed.
 */
class StoreRestartIT {
  private ShmRoot shm;

  @BeforeEach
  void setUp() throws Exception {
    shm = ShmRoot.create();
  }

  @AfterEach
  void tearDown() throws Exception {
    shm.close();
  }

  @Test
  void afterAKilledProcessCompleteArtifactsAreAdoptedAndIncompleteOnesRemoved() throws Exception {
    Path root = shm.dir.resolve("store");
    Process child = ChildJvm.start(List.of(), "crash", root.toString());
    StringBuilder log = new StringBuilder();
    try {
      Map<String, String> r = ChildJvm.results(child, "ready", log);
      assertThat(r).as("child output:\n%s", log).containsEntry("ready", "true");
    } finally {
      child.destroyForcibly(); // SIGKILL: no close, no unload, no shutdown hooks
      assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
    }
    assertThat(root.resolve("half/b.bin")).exists(); // the crash left the half-loaded artifact

    try (PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.REQUIRED, 4096)) {
      Map<String, String> decisions =
          store.recovery().stream()
              .collect(Collectors.toMap(RecoveryAction::name, a -> a.action() + " " + a.reason()));
      assertThat(decisions)
          .containsExactlyInAnyOrderEntriesOf(
              Map.of("done", "ADOPTED Complete", "half", "REMOVED IncompleteFiles"));
      assertThat(root.resolve("half")).doesNotExist();
      assertThat(root.resolve(".tensorcast/half.json")).doesNotExist();

      StoredArtifact done = store.get("done").orElseThrow();
      assertThat(Files.readAllBytes(root.resolve("done/model.safetensors")))
          .isEqualTo(PinnedStoreTest.pattern(1, 100_000));
      assertThat(Files.readAllBytes(root.resolve("done/config.json")))
          .isEqualTo(PinnedStoreTest.pattern(2, 77));
      assertThat(done.isComplete()).isTrue();
      assertThat(done.lockStatus().locked()).isTrue();
      assertThat(store.bytesInUse()).isEqualTo(25 * 4096 + 4096);

      // the adopted artifact is a full citizen: it unloads like any other
      store.unload("done");
      assertThat(ShmRoot.listTree(root)).containsExactly(".tensorcast", ".tensorcast/store.lock");
    }
  }
}
