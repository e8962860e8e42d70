package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * JUnit 5 extension over {@link SharedCluster}: the control plane is started once per JVM (and
 * stopped at JVM exit); each test method gets its own namespace, deleted afterwards. On a failed
 * test, the namespace's pods (YAML) and the tail of each pod's log are printed.
 *
 * <p>Test methods may declare parameters of type {@link SharedCluster}, {@link KubernetesClient} or
 * {@link TestNamespace}.
 *
 * <p>If the control-plane binaries are missing the tests fail with the instructions from {@link
 * LocalControlPlane#binDir()}; with system property {@code tensorcast.k8s.skipIfMissing=true} they
 * are skipped instead.
 */
public final class LocalClusterExtension
    implements BeforeEachCallback, AfterEachCallback, ParameterResolver {

  /** The namespace of the current test. */
  public record TestNamespace(String name) {}

  private static final ExtensionContext.Namespace STORE =
      ExtensionContext.Namespace.create(LocalClusterExtension.class);

  @Override
  public void beforeEach(ExtensionContext context) {
    SharedCluster cluster = cluster();
    String ns = cluster.createNamespace(context.getRequiredTestMethod().getName());
    context.getStore(STORE).put("ns", new TestNamespace(ns));
  }

  private static SharedCluster cluster() {
    if (Boolean.getBoolean("tensorcast.k8s.skipIfMissing")) {
      try {
        LocalControlPlane.binDir();
      } catch (IllegalStateException e) {
        org.junit.jupiter.api.Assumptions.abort(e.getMessage());
      }
    }
    return SharedCluster.get();
  }

  @Override
  public void afterEach(ExtensionContext context) {
    TestNamespace ns = context.getStore(STORE).get("ns", TestNamespace.class);
    if (ns == null) {
      return;
    }
    SharedCluster cluster = SharedCluster.get();
    if (context.getExecutionException().isPresent()) {
      dump(cluster, ns.name());
    }
    cluster.deleteNamespace(ns.name());
  }

  private static void dump(SharedCluster cluster, String ns) {
    KubernetesClient client = cluster.client();
    StringBuilder out = new StringBuilder("==== namespace " + ns + " after a failed test ====\n");
    for (Pod pod : client.pods().inNamespace(ns).list().getItems()) {
      out.append(client.getKubernetesSerialization().asYaml(pod)).append('\n');
      String name = pod.getMetadata().getName();
      out.append("---- log ")
          .append(cluster.kubelet().podLog(ns, name))
          .append(" ----\n")
          .append(ManagedProcess.tail(cluster.kubelet().podLog(ns, name), 40))
          .append('\n');
    }
    System.out.println(out);
  }

  @Override
  public boolean supportsParameter(ParameterContext p, ExtensionContext e) {
    Class<?> t = p.getParameter().getType();
    return t == SharedCluster.class || t == KubernetesClient.class || t == TestNamespace.class;
  }

  @Override
  public Object resolveParameter(ParameterContext p, ExtensionContext e) {
    Class<?> t = p.getParameter().getType();
    if (t == TestNamespace.class) {
      return e.getStore(STORE).get("ns", TestNamespace.class);
    }
    SharedCluster cluster = SharedCluster.get();
    return t == SharedCluster.class ? cluster : cluster.client();
  }
}
