package io.tensorcast.operator.events;

import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.EventBuilder;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.tensorcast.operator.events.StatusEvents.StatusEvent;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.time.temporal.ChronoUnit;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes core/v1 Events about a Tensorcast object ({@code kubectl describe} and {@code kubectl get
 * events} show them), deduplicated the way the kubelet's recorder does: the same (object, type,
 * reason, message) is one Event whose {@code count} and {@code lastTimestamp} grow, not a new
 * object. The Event's name is {@code <object name>.<16 hex digits of SHA-256 over uid, type, reason
 * and message>}; a create answered 409 reads that Event and patches {@code count + 1}.
 *
 * <p>RBAC: {@code create}, {@code get} and {@code patch} on {@code events} in the object's
 * namespace. A refused or failed write is logged and never fails a reconcile.
 */
public final class EventRecorder {
  private static final Logger log = LoggerFactory.getLogger(EventRecorder.class);

  /** {@code source.component} and {@code reportingComponent} of the operator's events. */
  public static final String COMPONENT = "tensorcast-operator";

  /** Longest message written; longer ones are cut (the API server's events API caps at 1 KiB). */
  static final int MAX_MESSAGE = 1024;

  private final Clock clock;

  public EventRecorder(Clock clock) {
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  /** Records {@code event} about {@code object} (namespaced, with uid). */
  public void record(KubernetesClient client, HasMetadata object, StatusEvent event) {
    String ns = object.getMetadata().getNamespace();
    String name = name(object, event);
    String now = clock.instant().truncatedTo(ChronoUnit.SECONDS).toString();
    String message = cut(event.message() == null ? "" : event.message());
    try {
      client
          .v1()
          .events()
          .inNamespace(ns)
          .resource(
              new EventBuilder()
                  .withNewMetadata()
                  .withName(name)
                  .withNamespace(ns)
                  .endMetadata()
                  .withNewInvolvedObject()
                  .withApiVersion(object.getApiVersion())
                  .withKind(object.getKind())
                  .withNamespace(ns)
                  .withName(object.getMetadata().getName())
                  .withUid(object.getMetadata().getUid())
                  .endInvolvedObject()
                  .withType(event.type())
                  .withReason(event.reason())
                  .withMessage(message)
                  .withNewSource()
                  .withComponent(COMPONENT)
                  .endSource()
                  .withReportingComponent(COMPONENT)
                  .withReportingInstance(COMPONENT)
                  .withFirstTimestamp(now)
                  .withLastTimestamp(now)
                  .withCount(1)
                  .build())
          .create();
    } catch (KubernetesClientException e) {
      if (e.getCode() == 409) {
        again(client, ns, name, now);
      } else {
        log.warn(
            "cannot record {} event on {} {}/{}: {}",
            event.reason(),
            object.getKind(),
            ns,
            object.getMetadata().getName(),
            e.getMessage());
      }
    }
  }

  /** The same event once more: count + 1, lastTimestamp now. */
  private static void again(KubernetesClient client, String ns, String name, String now) {
    try {
      Event existing = client.v1().events().inNamespace(ns).withName(name).get();
      int count = existing == null || existing.getCount() == null ? 1 : existing.getCount();
      client
          .v1()
          .events()
          .inNamespace(ns)
          .withName(name)
          .patch(
              PatchContext.of(PatchType.JSON_MERGE),
              client
                  .getKubernetesSerialization()
                  .asJson(Map.of("count", count + 1, "lastTimestamp", now)));
    } catch (KubernetesClientException e) {
      log.warn("cannot count event {}/{} again: {}", ns, name, e.getMessage());
    }
  }

  /** The event's name: the object's name (cut to 200) and a digest of what the event says. */
  static String name(HasMetadata object, StatusEvent event) {
    String base = object.getMetadata().getName();
    if (base.length() > 200) {
      base = base.substring(0, 200);
    }
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (String part :
          new String[] {
            object.getKind(),
            object.getMetadata().getUid(),
            event.type(),
            event.reason(),
            event.message()
          }) {
        sha.update(String.valueOf(part).getBytes(StandardCharsets.UTF_8));
        sha.update((byte) 0);
      }
      return base + "." + HexFormat.of().formatHex(sha.digest(), 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String cut(String message) {
    return message.length() <= MAX_MESSAGE ? message : message.substring(0, MAX_MESSAGE - 1) + "…";
  }
}
