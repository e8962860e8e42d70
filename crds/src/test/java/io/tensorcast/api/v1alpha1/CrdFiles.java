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

  /** The variant without CEL rules, for Kubernetes before 1.25. */
  static final String CRD_FILE_BELOW_CEL =
      ModelArtifact.CRD_NAME
          + "-v1"
          + io.tensorcast.api.TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX
          + ".yml";

  /** The TensorShardSet CRD's file name. */
  static final String TSS_CRD_FILE = TensorShardSet.CRD_NAME + "-v1.yml";

  /** The TensorShardSet CRD without CEL rules, for Kubernetes before 1.25. */
  static final String TSS_CRD_FILE_BELOW_CEL =
      TensorShardSet.CRD_NAME
          + "-v1"
          + io.tensorcast.api.TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX
          + ".yml";

  /** Every generated file, each committed under crds/generated/ and the chart's files/crds/. */
  static final java.util.List<String> ALL =
      java.util.List.of(CRD_FILE, CRD_FILE_BELOW_CEL, TSS_CRD_FILE, TSS_CRD_FILE_BELOW_CEL);

  private CrdFiles() {}

  /** The CRD CrdGeneration wrote at process-classes. */
  static Path generated() {
    return generated(CRD_FILE);
  }

  /** The generated file {@code name} (one of {@link #ALL}). */
  static Path generated(String name) {
    Path path =
        Path.of(System.getProperty("tensorcast.crd.generated", "target/classes/META-INF/fabric8"))
            .resolve(name);
    if (!Files.isRegularFile(path)) {
      fail(
          "Generated CRD "
              + path.toAbsolutePath()
              + " is missing: it is written by CrdGeneration (exec-maven-plugin) at process-classes."
              + " Run the tests through Maven: mvn -pl crds test");
    }
    return path;
  }

  /** The committed copy of {@code name} under crds/generated/. */
  static Path committed(String name) {
    return Path.of(System.getProperty("tensorcast.crd.committed", "generated")).resolve(name);
  }

  /**
   * The Helm chart's copy of {@code name} under charts/tensorcast/files/crds/ (the chart's
   * templates/crds.yaml renders it, picking the variant by the cluster's version).
   */
  static Path chart(String name) {
    return Path.of(System.getProperty("tensorcast.crd.chart", "../charts/tensorcast/files/crds"))
        .resolve(name);
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
