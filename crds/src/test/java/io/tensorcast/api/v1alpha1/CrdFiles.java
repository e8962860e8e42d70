package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.fail;

import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where the tests find the generated CRD, its committed copy and the samples. The pom passes the
 * paths as system properties; the fallbacks hold when a test runs from the module directory.
 */
final class CrdFiles {

  static final String CRD_FILE = ModelArtifact.CRD_NAME + "-v1.yml";

  /** The TensorShardSet CRD's file name. */
  static final String TSS_CRD_FILE = TensorShardSet.CRD_NAME + "-v1.yml";

  /** Every generated CRD file. */
  static final java.util.List<String> ALL = java.util.List.of(CRD_FILE, TSS_CRD_FILE);

  private CrdFiles() {}

  /** The CRD the crd-generator-maven-plugin wrote at process-classes. */
  static Path generated() {
    return generated(CRD_FILE);
  }

  /** The generated CRD file {@code file}. */
  static Path generated(String file) {
    Path path =
        Path.of(System.getProperty("tensorcast.crd.generated", "target/classes/META-INF/fabric8"))
            .resolve(file);
    if (!Files.isRegularFile(path)) {
      fail(
          "Generated CRD "
              + path.toAbsolutePath()
              + " is missing: it is written by crd-generator-maven-plugin at process-classes."
              + " Run the tests through Maven: mvn -pl crds test");
    }
    return path;
  }

  /** The committed copy under crds/generated/. */
  static Path committed() {
    return committed(CRD_FILE);
  }

  /** The committed copy of {@code file} under crds/generated/. */
  static Path committed(String file) {
    return Path.of(System.getProperty("tensorcast.crd.committed", "generated")).resolve(file);
  }

  /**
   * The Helm chart's copy under charts/tensorcast/crds/ (Helm installs it before the templates).
   */
  static Path chart() {
    return chart(CRD_FILE);
  }

  /** The Helm chart's copy of {@code file}. */
  static Path chart(String file) {
    return Path.of(System.getProperty("tensorcast.crd.chart", "../charts/tensorcast/crds"))
        .resolve(file);
  }

  /** The repository's samples/ folder. */
  static Path samples() {
    return Path.of(System.getProperty("tensorcast.samples", "../samples"));
  }

  static CustomResourceDefinition generatedCrd() throws IOException {
    return generatedCrd(CRD_FILE);
  }

  /** The generated CRD of {@code file}, parsed. */
  static CustomResourceDefinition generatedCrd(String file) throws IOException {
    try (InputStream in = Files.newInputStream(generated(file))) {
      return Serialization.unmarshal(in, CustomResourceDefinition.class);
    }
  }
}
