package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The committed CRDs ({@code crds/generated/} and the Helm chart's {@code
 * charts/tensorcast/files/crds/}, each file with and without CEL rules) must be byte-for-byte the
 * ones generated from the Java model, so that the chart and reviewers see what the API server gets.
 * With {@code -Dtensorcast.crd.update=true} the test rewrites the committed copies instead of
 * failing.
 */
class CrdDriftTest {

  static final String REFRESH = "mvn -B -pl crds test -Dtensorcast.crd.update=true";

  @Test
  void committedCrdEqualsGeneratedCrd() throws IOException {
    for (String name : CrdFiles.ALL) {
      assertCopyEqualsGenerated(name, CrdFiles.committed(name));
    }
  }

  @Test
  void chartCrdEqualsGeneratedCrd() throws IOException {
    for (String name : CrdFiles.ALL) {
      assertCopyEqualsGenerated(name, CrdFiles.chart(name));
    }
  }

  private static void assertCopyEqualsGenerated(String name, Path committed) throws IOException {
    Path generated = CrdFiles.generated(name);
    byte[] fresh = Files.readAllBytes(generated);

    if (Boolean.getBoolean("tensorcast.crd.update")) {
      Files.createDirectories(committed.getParent());
      Files.write(committed, fresh);
      System.out.println("Rewrote " + committed.toAbsolutePath() + " from " + generated);
    }

    if (!Files.isRegularFile(committed)) {
      fail(
          "Committed CRD "
              + committed.toAbsolutePath()
              + " is missing. Create it with: "
              + REFRESH);
    }
    byte[] old = Files.readAllBytes(committed);
    if (!Arrays.equals(fresh, old)) {
      fail(
          committed.toAbsolutePath()
              + " differs from the CRD generated from the Java model ("
              + generated
              + "), "
              + firstDifference(old, fresh)
              + ". It is generated; never edit it by hand. Refresh it with: "
              + REFRESH);
    }
    assertThat(old).isEqualTo(fresh);
  }

  private static String firstDifference(byte[] old, byte[] fresh) {
    List<String> a = new String(old, StandardCharsets.UTF_8).lines().toList();
    List<String> b = new String(fresh, StandardCharsets.UTF_8).lines().toList();
    for (int i = 0; i < Math.max(a.size(), b.size()); i++) {
      String x = i < a.size() ? a.get(i) : "<end of file>";
      String y = i < b.size() ? b.get(i) : "<end of file>";
      if (!x.equals(y)) {
        return "first at line " + (i + 1) + ": committed [" + x + "] vs generated [" + y + "]";
      }
    }
    return "they differ only in line endings";
  }
}
