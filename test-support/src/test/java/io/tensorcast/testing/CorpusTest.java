package io.tensorcast.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CorpusTest {

  @Test
  void theRepositoryRootIsTheNearestDirectoryWithGitAboveTheWorkingDirectory(@TempDir Path tmp)
      throws Exception {
    Path repo = Files.createDirectories(tmp.resolve("checkout"));
    Files.writeString(repo.resolve(".git"), "gitdir: elsewhere\n"); // a worktree's .git file
    Files.writeString(repo.resolve("pom.xml"), "<project/>");
    Path module = Files.createDirectories(repo.resolve("dataplane"));
    Files.writeString(module.resolve("pom.xml"), "<project/>");

    assertThat(Corpus.repositoryRoot(module)).contains(repo);
    assertThat(Corpus.repositoryRoot(module.resolve("target/x"))).contains(repo);
  }

  @Test
  void withoutGitTheOutermostDirectoryWithAPomIsTheRoot(@TempDir Path tmp) throws Exception {
    Path repo = Files.createDirectories(tmp.resolve("unpacked"));
    Files.writeString(repo.resolve("pom.xml"), "<project/>");
    Path module = Files.createDirectories(repo.resolve("e2e"));
    Files.writeString(module.resolve("pom.xml"), "<project/>");

    assertThat(Corpus.repositoryRoot(module)).contains(repo);
  }

  @Test
  void deleteTreeRemovesEverythingBelowWithoutFollowingLinks(@TempDir Path tmp) throws Exception {
    Path keep = Files.createDirectories(tmp.resolve("keep"));
    Files.writeString(keep.resolve("precious"), "x");
    Path dir = Files.createDirectories(tmp.resolve("dir/a/b"));
    Files.writeString(dir.resolve("f"), "y");
    Files.createSymbolicLink(tmp.resolve("dir/link"), keep);

    TestFiles.deleteTree(tmp.resolve("dir"));
    TestFiles.deleteTree(tmp.resolve("absent"));

    assertThat(tmp.resolve("dir")).doesNotExist();
    assertThat(keep.resolve("precious")).hasContent("x");
  }
}
