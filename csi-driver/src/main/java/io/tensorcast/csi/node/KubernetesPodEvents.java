package io.tensorcast.csi.node;

import io.fabric8.kubernetes.api.model.EventBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.tensorcast.api.ConsumerVolumes;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes core/v1 Events on consumer pods (RBAC: {@code create} on {@code events}) from one
 * background thread with a bounded queue: a slow API server delays events, never mounts; events
 * beyond the queue are dropped with a log line.
 */
public final class KubernetesPodEvents implements PodEvents, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(KubernetesPodEvents.class);

  private final KubernetesClient client;
  private final String nodeName;
  private final ExecutorService writer =
      new ThreadPoolExecutor(
          1,
          1,
          0,
          TimeUnit.SECONDS,
          new ArrayBlockingQueue<>(256),
          r -> {
            Thread t = new Thread(r, "csi-events");
            t.setDaemon(true);
            return t;
          });

  public KubernetesPodEvents(KubernetesClient client, String nodeName) {
    this.client = client;
    this.nodeName = nodeName;
  }

  @Override
  public void normal(String namespace, String name, String uid, String reason, String message) {
    try {
      writer.execute(() -> write(namespace, name, uid, reason, message));
    } catch (RejectedExecutionException e) {
      LOG.warn("event queue full; dropped {} event for pod {}/{}", reason, namespace, name);
    }
  }

  private void write(String namespace, String name, String uid, String reason, String message) {
    String now = Instant.now().truncatedTo(ChronoUnit.SECONDS).toString();
    try {
      client
          .v1()
          .events()
          .inNamespace(namespace)
          .resource(
              new EventBuilder()
                  .withNewMetadata()
                  .withGenerateName(name + ".")
                  .withNamespace(namespace)
                  .endMetadata()
                  .withNewInvolvedObject()
                  .withApiVersion("v1")
                  .withKind("Pod")
                  .withNamespace(namespace)
                  .withName(name)
                  .withUid(uid)
                  .endInvolvedObject()
                  .withType("Normal")
                  .withReason(reason)
                  .withMessage(message)
                  .withNewSource()
                  .withComponent(ConsumerVolumes.DRIVER)
                  .withHost(nodeName)
                  .endSource()
                  .withFirstTimestamp(now)
                  .withLastTimestamp(now)
                  .withCount(1)
                  .build())
          .create();
    } catch (KubernetesClientException e) {
      LOG.warn("cannot record {} event on pod {}/{}: {}", reason, namespace, name, e.getMessage());
    }
  }

  @Override
  public void close() {
    writer.shutdown();
    try {
      writer.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
