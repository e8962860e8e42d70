package io.tensorcast.e2e.operator;

import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.e2e.cluster.LocalClusterExtension;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.testing.S3MockServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What every operator E2E test on the shared cluster sets up and tears down, so that a test class
 * states only what differs: the {@link OperatorEnvironment} (shared cluster, CRDs, S3-compatible
 * server, the operator), a namespace of its own per test ({@link LocalClusterExtension}) holding
 * the S3 credentials Secret {@value #CREDENTIALS}, and the test's simulated nodes ({@link #nodes},
 * to be labelled {@value #GROUP_LABEL}{@code =<namespace>} so that artifacts pin to them).
 *
 * <p>After each test (after the subclass's own {@code @AfterEach}): the namespace's pods that the
 * operator did not create are deleted (writers, consumers), then its TensorShardSets and
 * ModelArtifacts; the teardown waits up to 60 s for the operator's cleanup to leave no
 * ModelArtifact and no pod, then closes what the test registered with {@link #closeAfterPods} and
 * removes the nodes. A failed test's artifacts are dumped ({@link ArtifactDumpOnFailure}).
 */
@ExtendWith({LocalClusterExtension.class, ArtifactDumpOnFailure.class})
abstract class OperatorTestBase {
  /** Node label that pins a test's artifacts to its own nodes (value: the test's namespace). */
  static final String GROUP_LABEL = "tensorcast.io/e2e-group";

  /** Name of the S3 credentials Secret in every test's namespace. */
  static final String CREDENTIALS = "s3-credentials";

  protected OperatorEnvironment env;
  protected KubernetesClient client;
  protected String ns;
  protected final List<SimulatedNode> nodes = new ArrayList<>();
  private final List<AutoCloseable> closeAfterPods = new ArrayList<>();

  @BeforeEach
  void setUpOperatorTest(TestNamespace namespace) {
    env = OperatorEnvironment.get();
    client = env.client();
    ns = namespace.name();
    client
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName(CREDENTIALS)
                .withNamespace(ns)
                .endMetadata()
                .withStringData(
                    Map.of(
                        CredentialsSecretRef.DEFAULT_ACCESS_KEY_ID_KEY, S3MockServer.ACCESS_KEY,
                        CredentialsSecretRef.DEFAULT_SECRET_ACCESS_KEY_KEY,
                            S3MockServer.SECRET_KEY))
                .build())
        .create();
  }

  @AfterEach
  void tearDownOperatorTest() throws Exception {
    try {
      client
          .pods()
          .inNamespace(ns)
          .withoutLabel(
              TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR)
          .delete();
      client.resources(TensorShardSet.class).inNamespace(ns).delete();
      client.resources(ModelArtifact.class).inNamespace(ns).delete();
      await()
          .atMost(Duration.ofSeconds(60))
          .until(
              () ->
                  client.resources(ModelArtifact.class).inNamespace(ns).list().getItems().isEmpty()
                      && client.pods().inNamespace(ns).list().getItems().isEmpty());
    } finally {
      try {
        for (AutoCloseable c : closeAfterPods) {
          c.close();
        }
      } finally {
        nodes.forEach(SimulatedNode::remove);
      }
    }
  }

  /** Closes {@code c} after the test, once its pods are gone and before its nodes are removed. */
  void closeAfterPods(AutoCloseable c) {
    closeAfterPods.add(c);
  }
}
