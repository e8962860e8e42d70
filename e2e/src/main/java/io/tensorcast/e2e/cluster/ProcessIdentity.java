package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.SecurityContext;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Who a container's process runs as, from the pod's and the container's {@code securityContext}, as
 * a kubelet and container runtime would set it: user, group, supplementary groups ({@code fsGroup}
 * and {@code supplementalGroups}), capabilities, and {@code no_new_privs}. A process is started
 * through util-linux {@code setpriv} with these (the harness runs as root).
 *
 * <p>Rules (Kubernetes core/v1 semantics; container settings win over the pod's):
 *
 * <ul>
 *   <li>No security setting at all (or {@code privileged: true}): the process runs as the harness
 *       user, as before.
 *   <li>User {@code runAsUser}, else 0: the simulated images declare no {@code USER}; group {@code
 *       runAsGroup}, else 0. {@code runAsNonRoot: true} with user 0 does not start: {@code
 *       CreateContainerConfigError} "container has runAsNonRoot and image will run as root", as the
 *       kubelet reports.
 *   <li>Capabilities: the container runtime's default set (containerd's: AUDIT_WRITE, CHOWN,
 *       DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, NET_RAW, SETFCAP, SETGID,
 *       SETPCAP, SETUID, SYS_CHROOT), minus {@code drop} ({@code ALL} drops all), plus {@code add}.
 *       They bound the process; a root process has them. A non-root process gets the added
 *       capabilities as ambient ones, so that they are in effect: containerd does not do that today
 *       (Kubernetes has no ambient capabilities), which the project's security notes describe.
 *   <li>{@code allowPrivilegeEscalation: false}: {@code no_new_privs}.
 * </ul>
 *
 * @param uid user id
 * @param gid primary group id
 * @param groups supplementary groups
 * @param capabilities capability names without the {@code CAP_} prefix, upper case
 * @param noNewPrivs whether {@code no_new_privs} is set
 */
public record ProcessIdentity(
    long uid, long gid, List<Long> groups, Set<String> capabilities, boolean noNewPrivs) {

  /** containerd's default capabilities of a container. */
  static final Set<String> RUNTIME_DEFAULT =
      Set.of(
          "AUDIT_WRITE",
          "CHOWN",
          "DAC_OVERRIDE",
          "FOWNER",
          "FSETID",
          "KILL",
          "MKNOD",
          "NET_BIND_SERVICE",
          "NET_RAW",
          "SETFCAP",
          "SETGID",
          "SETPCAP",
          "SETUID",
          "SYS_CHROOT");

  public ProcessIdentity {
    groups = List.copyOf(groups);
    capabilities = Set.copyOf(capabilities);
  }

  /**
   * The identity of {@code container} of {@code pod}, or empty to run as the harness user.
   *
   * @throws ContainerStartException {@code CreateContainerConfigError} when {@code runAsNonRoot}
   *     contradicts the user
   */
  public static Optional<ProcessIdentity> of(Pod pod, Container container)
      throws ContainerStartException {
    PodSecurityContext p = pod.getSpec().getSecurityContext();
    SecurityContext c = container.getSecurityContext();
    if (c != null && Boolean.TRUE.equals(c.getPrivileged())) {
      return Optional.empty();
    }
    Long uid = first(c == null ? null : c.getRunAsUser(), p == null ? null : p.getRunAsUser());
    Long gid = first(c == null ? null : c.getRunAsGroup(), p == null ? null : p.getRunAsGroup());
    Boolean nonRoot =
        first(c == null ? null : c.getRunAsNonRoot(), p == null ? null : p.getRunAsNonRoot());
    List<Long> groups = new ArrayList<>();
    if (p != null && p.getFsGroup() != null) {
      groups.add(p.getFsGroup());
    }
    if (p != null && p.getSupplementalGroups() != null) {
      p.getSupplementalGroups().stream().filter(g -> !groups.contains(g)).forEach(groups::add);
    }
    Capabilities caps = c == null ? null : c.getCapabilities();
    boolean noNewPrivs = c != null && Boolean.FALSE.equals(c.getAllowPrivilegeEscalation());
    if (uid == null
        && gid == null
        && nonRoot == null
        && groups.isEmpty()
        && caps == null
        && !noNewPrivs) {
      return Optional.empty();
    }
    long user = uid == null ? 0 : uid;
    if (Boolean.TRUE.equals(nonRoot) && user == 0) {
      throw new ContainerStartException(
          "CreateContainerConfigError",
          "container has runAsNonRoot and image will run as root (pod: \""
              + pod.getMetadata().getName()
              + "_"
              + pod.getMetadata().getNamespace()
              + "\", container: "
              + container.getName()
              + ")");
    }
    Set<String> set = new TreeSet<>(RUNTIME_DEFAULT);
    if (caps != null) {
      for (String d : caps.getDrop() == null ? List.<String>of() : caps.getDrop()) {
        if (name(d).equals("ALL")) {
          set.clear();
        } else {
          set.remove(name(d));
        }
      }
      for (String a : caps.getAdd() == null ? List.<String>of() : caps.getAdd()) {
        set.add(name(a));
      }
    }
    if (user != 0) {
      // A non-root process keeps only what was added explicitly (as ambient capabilities).
      Set<String> added = new TreeSet<>();
      if (caps != null && caps.getAdd() != null) {
        caps.getAdd().forEach(a -> added.add(name(a)));
      }
      set.retainAll(added);
    }
    return Optional.of(new ProcessIdentity(user, gid == null ? 0 : gid, groups, set, noNewPrivs));
  }

  private static String name(String cap) {
    String n = cap.toUpperCase(Locale.ROOT);
    return n.startsWith("CAP_") ? n.substring(4) : n;
  }

  @SafeVarargs
  private static <T> T first(T... values) {
    for (T v : values) {
      if (v != null) {
        return v;
      }
    }
    return null;
  }

  /** The {@code setpriv} command that runs a program with this identity (the program follows). */
  public List<String> setpriv() {
    List<String> a = new ArrayList<>();
    a.add("setpriv");
    a.add("--reuid=" + uid);
    a.add("--regid=" + gid);
    if (groups.isEmpty()) {
      a.add("--clear-groups");
    } else {
      a.add("--groups=" + String.join(",", groups.stream().map(String::valueOf).toList()));
    }
    String caps =
        capabilities.stream()
            .sorted()
            .map(c -> ",+" + c.toLowerCase(Locale.ROOT))
            .reduce("", String::concat);
    a.add("--bounding-set=-all" + caps);
    a.add("--inh-caps=-all" + (uid == 0 ? "" : caps));
    if (uid != 0) {
      a.add("--ambient-caps=-all" + caps);
    }
    if (noNewPrivs) {
      a.add("--no-new-privs");
    }
    a.add("--");
    return a;
  }
}
