package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store's state and ranges files are written by Jackson's streaming generator (no data
 * binding): what the readers bind, with the same text as the data-binding writer wrote before.
 */
class StateFilesWriterTest {

  private static final String SHA = "ab".repeat(32);

  @Test
  void theStateFileIsTheDataBindingWritersTextAndReadsBack(@TempDir Path dir) throws Exception {
    ArtifactState state =
        new ArtifactState(
            ArtifactState.FORMAT_VERSION,
            "art",
            List.of(
                new ArtifactState.FileState("a \"quoted\" name\u00e9\u2603.safetensors", 7, null),
                new ArtifactState.FileState("sub/b.bin", 1L << 40, SHA),
                new ArtifactState.FileState("empty", 0, null)));
    // every record a SHA-256: format 1, as written before format 2 existed
    byte[] written = ArtifactState.toJson(state);
    assertThat(new String(written, StandardCharsets.UTF_8))
        .isEqualTo(
            new ObjectMapper()
                .writerWithDefaultPrettyPrinter()
                .writeValueAsString(
                    new Format1(
                        1,
                        "art",
                        state.files().stream()
                            .map(f -> new Format1File(f.path(), f.size(), f.digest()))
                            .toList())));
    Path file = ArtifactState.pathFor(dir, "art");
    ArtifactState.writeAtomically(file, state);
    assertThat(ArtifactState.read(file, "art")).isEqualTo(state);

    // one record of another digest: format 2, every file's "digest"
    ArtifactState mixed =
        new ArtifactState(
            ArtifactState.FORMAT_VERSION,
            "art",
            List.of(
                new ArtifactState.FileState("a.bin", 7, "crc64nvme:ae8b14860a799888"),
                new ArtifactState.FileState("sub/b.bin", 1L << 40, SHA),
                new ArtifactState.FileState("empty", 0, null)));
    assertThat(new String(ArtifactState.toJson(mixed), StandardCharsets.UTF_8))
        .isEqualTo(new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(mixed))
        .contains("\"formatVersion\" : 2");
    ArtifactState.writeAtomically(file, mixed);
    assertThat(ArtifactState.read(file, "art")).isEqualTo(mixed);
  }

  /** The state file's format 1, as its data-binding writer wrote it. */
  private record Format1(int formatVersion, String artifactId, List<Format1File> files) {}

  private record Format1File(String path, long size, String sha256) {}

  @Test
  void theRangesFileIsTheDataBindingWritersTextAndReadsBack(@TempDir Path dir) throws Exception {
    StoredRanges a = new StoredRanges("\"etag\"-1");
    a.add(0, 4096);
    a.add(8192, 10_000);
    StoredRanges none = new StoredRanges(null);
    Map<String, StoredRanges> byPath = new LinkedHashMap<>();
    byPath.put("a \"x\".safetensors", a);
    byPath.put("sub/none.bin", none);
    List<StoredRanges.FileEntry> entries = new ArrayList<>();
    byPath.forEach((p, r) -> entries.add(new StoredRanges.FileEntry(p, r.version(), r.ranges())));
    StoredRanges.FileForm form = new StoredRanges.FileForm(1, entries);
    assertThat(new String(StoredRanges.toJson(form), StandardCharsets.UTF_8))
        .isEqualTo(new ObjectMapper().writeValueAsString(form));

    Path file = StoredRanges.pathFor(dir, "art");
    StoredRanges.write(file, byPath);
    Map<String, StoredRanges> back =
        StoredRanges.read(file, Map.of("a \"x\".safetensors", 20_000L, "sub/none.bin", 5L));
    assertThat(back).containsOnlyKeys("a \"x\".safetensors", "sub/none.bin");
    assertThat(back.get("a \"x\".safetensors").version()).isEqualTo("\"etag\"-1");
    assertThat(back.get("a \"x\".safetensors").ranges())
        .containsExactly(new long[] {0, 4096}, new long[] {8192, 10_000});
    assertThat(back.get("sub/none.bin").version()).isNull();
    assertThat(back.get("sub/none.bin").ranges()).isEmpty();
  }

  /**
   * A cold allocation (state file) and its first stored ranges load no data-binding class: those
   * ~600 classes cost a cold JVM a few hundred milliseconds before the first byte of a load.
   */
  @Test
  @Timeout(120)
  void aColdAllocationLoadsNoDataBindingClass(@TempDir Path dir) throws Exception {
    Path classLog = dir.resolve("classes.log");
    try (ShmRoot shm = ShmRoot.create()) {
      Path root = shm.dir;
      List<String> cmd =
          List.of(
              Path.of(System.getProperty("java.home"), "bin", "java").toString(),
              "-Xmx128m",
              "-XX:TieredStopAtLevel=1",
              "-Xlog:class+load=info:file=" + classLog,
              "-cp",
              System.getProperty("java.class.path"),
              Child.class.getName(),
              root.toString());
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as(out).isTrue();
      assertThat(out).contains("@@ done=ok");
      assertThat(Files.readString(classLog))
          .contains("io.tensorcast.dataplane.store.MappedFile ")
          .contains("com.fasterxml.jackson.core.JsonGenerator ")
          .doesNotContain("com.fasterxml.jackson.databind.ObjectMapper ");
    }
  }

  /** Allocates a two-file artifact, stores a range and completes a file, in a fresh JVM. */
  public static final class Child {
    private Child() {}

    public static void main(String[] args) throws Exception {
      try (PinnedStore store =
          new PinnedStore(Path.of(args[0]), 1L << 30, LockPolicy.BEST_EFFORT)) {
        StoredArtifact a =
            store.allocate(
                "cold", List.of(new StoreFile("a.bin", 8192), new StoreFile("b.bin", 4096)));
        a.write("a.bin", 0, ByteBuffer.wrap(new byte[4096]));
        a.recordStored("a.bin", "v1", 0, 4096);
        a.writeStoredRanges();
        a.write("b.bin", 0, ByteBuffer.wrap(new byte[4096]));
        a.markComplete("b.bin");
        store.unload("cold");
      }
      System.out.println("@@ done=ok");
    }
  }
}
