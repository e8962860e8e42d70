package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.testing.Corpus;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileSourceTest {
  @TempDir Path tmp;

  @Test
  void listsTheCorpusRecursivelySortedWithTheManifestSizes() throws Exception {
    Path corpus = Corpus.dir();
    Map<String, Corpus.Entry> manifest = Corpus.manifest();
    try (FileSource source = FileSource.open(corpus, PathFilter.all())) {
      List<SourceFile> files = source.list();
      List<String> paths = files.stream().map(SourceFile::path).toList();
      assertThat(paths).isSorted().doesNotHaveDuplicates();
      // every manifest entry is listed with the size the manifest records
      for (Corpus.Entry entry : manifest.values()) {
        assertThat(files)
            .as(entry.path())
            .anySatisfy(
                f -> {
                  assertThat(f.path()).isEqualTo(entry.path());
                  assertThat(f.size()).isEqualTo(entry.bytes());
                });
      }
      assertThat(paths).contains("MANIFEST.tsv");
      // a local file's identity: size, modification time and inode
      assertThat(files).allSatisfy(f -> assertThat(f.etag()).startsWith(f.size() + "-"));
    }
  }

  @Test
  void includeAndExcludeGlobsSelectFiles() throws Exception {
    Path corpus = Corpus.dir();
    PathFilter filter =
        PathFilter.of(List.of("index/safetensorsjl-tiny-sharded/"), List.of("*.json"));
    try (FileSource source = FileSource.open(corpus, filter)) {
      assertThat(source.list())
          .extracting(SourceFile::path)
          .containsExactly(
              "index/safetensorsjl-tiny-sharded/model-00001-of-00006.safetensors",
              "index/safetensorsjl-tiny-sharded/model-00002-of-00006.safetensors",
              "index/safetensorsjl-tiny-sharded/model-00003-of-00006.safetensors",
              "index/safetensorsjl-tiny-sharded/model-00004-of-00006.safetensors",
              "index/safetensorsjl-tiny-sharded/model-00005-of-00006.safetensors",
              "index/safetensorsjl-tiny-sharded/model-00006-of-00006.safetensors");
    }
  }

  @Test
  void rangedReadsAreByteEqualIncludingRangesEndingAtEof() throws Exception {
    Path file = Corpus.dir().resolve("safetensors/burn__import_complex_nested.safetensors");
    byte[] expected = Files.readAllBytes(file);
    try (FileSource source = FileSource.open(file.getParent(), PathFilter.all())) {
      SourceFile sf =
          source.list().stream()
              .filter(f -> f.path().equals("burn__import_complex_nested.safetensors"))
              .findFirst()
              .orElseThrow();
      for (int rangeSize : new int[] {1, 7, 4096, expected.length}) {
        for (long offset = 0; offset < expected.length; offset += rangeSize) {
          int length = (int) Math.min(rangeSize, expected.length - offset);
          try (InputStream in = source.openRange(sf, offset, length)) {
            assertThat(in.readAllBytes())
                .as("range size %d at %d", rangeSize, offset)
                .isEqualTo(Arrays.copyOfRange(expected, (int) offset, (int) offset + length));
          }
        }
      }
      assertThatThrownBy(() -> source.openRange(sf, expected.length - 1, 2))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("outside burn__import_complex_nested.safetensors");
    }
  }

  @Test
  void refusesASymlinkThatEscapesTheRoot() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("artifact"));
    Files.write(root.resolve("model.safetensors"), new byte[] {1, 2, 3});
    Path outside = Files.writeString(tmp.resolve("secret.txt"), "not part of the artifact");
    Files.createSymbolicLink(root.resolve("config.json"), outside);

    try (FileSource source = FileSource.open(root, PathFilter.all())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.UnsafePath))
          .hasMessageContaining("refusing 'config.json'")
          .hasMessageContaining("is a symbolic link");
    }
    // a link the filter does not select is skipped, never followed
    try (FileSource source = FileSource.open(root, PathFilter.of(List.of(), List.of("*.json")))) {
      assertThat(source.list()).extracting(SourceFile::path).containsExactly("model.safetensors");
    }
  }

  @Test
  void refusesADirectorySymlinkAndDoesNotListThroughIt() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("artifact"));
    Path elsewhere = Files.createDirectories(tmp.resolve("elsewhere"));
    Files.write(elsewhere.resolve("weights.bin"), new byte[] {9});
    Files.createSymbolicLink(root.resolve("sub"), elsewhere);
    try (FileSource source = FileSource.open(root, PathFilter.all())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.UnsafePath))
          .hasMessageContaining("refusing 'sub'");
    }
  }

  @Test
  void refusesAReadOfAFileSwappedForALinkAfterListing() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("artifact"));
    Files.write(root.resolve("a.bin"), new byte[] {1, 2, 3, 4});
    Path outside = Files.write(tmp.resolve("outside.bin"), new byte[] {7, 7, 7, 7});
    try (FileSource source = FileSource.open(root, PathFilter.all())) {
      SourceFile listed = source.list().get(0);
      Files.delete(root.resolve("a.bin"));
      Files.createSymbolicLink(root.resolve("a.bin"), outside);
      assertThatThrownBy(() -> source.openRange(listed, 0, 4))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.UnsafePath))
          .hasMessageContaining("no longer a regular file");
    }
  }

  @Test
  void aFileRewrittenInPlaceWithTheSameSizeIsObjectChanged() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("rewritten"));
    Path a = root.resolve("a.bin");
    Files.write(a, new byte[] {1, 2, 3, 4});
    try (FileSource source = FileSource.open(root, PathFilter.all())) {
      SourceFile listed = source.list().get(0);
      source.checkUnchanged(listed); // untouched: fine
      Files.write(a, new byte[] {9, 9, 9, 9});
      Files.setLastModifiedTime(
          a,
          java.nio.file.attribute.FileTime.fromMillis(
              Files.getLastModifiedTime(a).toMillis() + 1000));
      assertThatThrownBy(() -> source.openRange(listed, 0, 4))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.ObjectChanged))
          .hasMessageContaining("modified after it was listed");
      assertThatThrownBy(() -> source.checkUnchanged(listed))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.ObjectChanged));
    }
  }

  @Test
  void aFileThatChangedSizeIsObjectChangedAndAMissingOneObjectNotFound() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("artifact"));
    Files.write(root.resolve("a.bin"), new byte[] {1, 2, 3, 4});
    Files.write(root.resolve("b.bin"), new byte[] {5});
    try (FileSource source = FileSource.open(root, PathFilter.all())) {
      List<SourceFile> files = source.list();
      Files.write(root.resolve("a.bin"), new byte[] {1, 2});
      Files.delete(root.resolve("b.bin"));
      assertThatThrownBy(() -> source.openRange(files.get(0), 0, 1))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.ObjectChanged))
          .hasMessageContaining("a.bin is now 2 bytes but was listed with 4");
      assertThatThrownBy(() -> source.openRange(files.get(1), 0, 1))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.ObjectNotFound));
    }
  }

  @Test
  void missingOrNonDirectoryRootIsSourceNotFound() throws Exception {
    assertThatThrownBy(() -> FileSource.open(tmp.resolve("nope"), PathFilter.all()))
        .isInstanceOfSatisfying(
            SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.SourceNotFound))
        .hasMessageContaining("does not exist");
    Path file = Files.write(tmp.resolve("file.bin"), new byte[] {1});
    assertThatThrownBy(() -> FileSource.open(file, PathFilter.all()))
        .isInstanceOfSatisfying(
            SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.SourceNotFound))
        .hasMessageContaining("is not a directory");
  }

  @Test
  void sourcesOpensFileUris() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("artifact"));
    Files.write(root.resolve("x.bin"), new byte[] {1, 2});
    Files.write(root.resolve("empty.bin"), new byte[0]);
    try (ArtifactSource source = Sources.open(root.toUri().toString(), SourceOptions.defaults())) {
      assertThat(source.list())
          .extracting(SourceFile::path, SourceFile::size)
          .containsExactly(
              org.assertj.core.groups.Tuple.tuple("empty.bin", 0L),
              org.assertj.core.groups.Tuple.tuple("x.bin", 2L));
      assertThat(source.describe()).startsWith("file:///").endsWith("/artifact/");
    }
  }
}
