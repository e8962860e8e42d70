package io.tensorcast.e2e.cluster;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The volume mounts of one container, as host directories. There is no mount namespace: a process
 * sees the host filesystem, so the kubelet rewrites every environment value, command element and
 * argument that names a path under a {@code mountPath} to the host directory behind it.
 *
 * <p>Rewriting rule: a value is rewritten when it equals a {@code mountPath} or starts with {@code
 * mountPath + "/"} (the longest such mount wins), or when it has the form {@code -…=VALUE} / {@code
 * --name=VALUE} and VALUE satisfies the same rule (then only VALUE is rewritten). Anything else is
 * passed through unchanged, including paths embedded inside longer strings.
 */
final class MountTable {

  /** One mount: a {@code mountPath} in the container and the host path that backs it. */
  record Mount(String mountPath, Path hostPath, boolean readOnly) {}

  private final List<Mount> mounts;

  MountTable(List<Mount> mounts) {
    List<Mount> sorted = new ArrayList<>();
    for (Mount m : mounts) {
      sorted.add(new Mount(trimSlash(m.mountPath()), m.hostPath(), m.readOnly()));
    }
    // Longest mountPath first, so nested mounts win over their parents.
    sorted.sort(Comparator.comparingInt((Mount m) -> m.mountPath().length()).reversed());
    this.mounts = List.copyOf(sorted);
  }

  static MountTable empty() {
    return new MountTable(List.of());
  }

  List<Mount> mounts() {
    return mounts;
  }

  private static String trimSlash(String p) {
    return p.length() > 1 && p.endsWith("/") ? p.substring(0, p.length() - 1) : p;
  }

  /** The host path for a container path under a mount, or {@code null} when none covers it. */
  Path hostPath(String containerPath) {
    for (Mount m : mounts) {
      String mp = m.mountPath();
      if (containerPath.equals(mp)) {
        return m.hostPath();
      }
      String prefix = mp.equals("/") ? "/" : mp + "/";
      if (containerPath.startsWith(prefix)) {
        String rest = containerPath.substring(prefix.length());
        return rest.isEmpty() ? m.hostPath() : m.hostPath().resolve(rest);
      }
    }
    return null;
  }

  /** Applies the rewriting rule in the class Javadoc to one value. */
  String rewrite(String value) {
    if (value == null || value.isEmpty() || mounts.isEmpty()) {
      return value;
    }
    if (value.startsWith("/")) {
      Path host = hostPath(value);
      return host == null ? value : host.toString();
    }
    int eq = value.indexOf('=');
    if (value.startsWith("-") && eq > 0 && eq + 1 < value.length() && value.charAt(eq + 1) == '/') {
      Path host = hostPath(value.substring(eq + 1));
      if (host != null) {
        return value.substring(0, eq + 1) + host;
      }
    }
    return value;
  }

  List<String> rewriteAll(List<String> values) {
    List<String> out = new ArrayList<>(values.size());
    for (String v : values) {
      out.add(rewrite(v));
    }
    return out;
  }
}
