package io.tensorcast.e2e.operator;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.e2e.cluster.SharedCluster;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

/**
 * On a failed test, prints every ModelArtifact (YAML, all namespaces) before the namespace is
 * deleted; {@code LocalClusterExtension} prints the pods and their logs.
 */
final class ArtifactDumpOnFailure implements TestExecutionExceptionHandler {
  @Override
  public void handleTestExecutionException(ExtensionContext context, Throwable throwable)
      throws Throwable {
    try {
      KubernetesClient client = SharedCluster.get().client();
      StringBuilder out =
          new StringBuilder("==== ModelArtifacts after " + context.getDisplayName() + " ====\n");
      for (ModelArtifact a :
          client.resources(ModelArtifact.class).inAnyNamespace().list().getItems()) {
        out.append(client.getKubernetesSerialization().asYaml(a)).append('\n');
      }
      System.out.println(out);
    } catch (RuntimeException e) {
      throwable.addSuppressed(e);
    }
    throw throwable;
  }
}
