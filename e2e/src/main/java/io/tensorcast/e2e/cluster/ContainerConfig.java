package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvFromSource;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.EnvVarSource;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.ResourceRequirements;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Resolves a container's environment, command and args the way the kubelet does, then maps paths
 * under volume mounts to host directories ({@link MountTable}).
 *
 * <p>Order, as in the kubelet ({@code kubelet_pods.go}, {@code makeEnvironmentVariables}): {@code
 * envFrom} sources in order, then {@code env} entries in order (a later entry replaces an earlier
 * one); literal {@code env} values get {@code $(VAR)} expansion against what is defined so far plus
 * the injected service variables; values from {@code valueFrom} are not expanded. {@code command}
 * and {@code args} are expanded against the final environment. Expansion follows Kubernetes' {@code
 * expansion.Expand}: {@code $(NAME)} is replaced when NAME is defined and kept verbatim otherwise,
 * {@code $$} yields a literal {@code $}.
 */
final class ContainerConfig {

  /** The resolved view of one container. */
  record Resolved(
      List<String> command, List<String> args, Map<String, String> env, Path workingDir) {}

  /** Facts about the node and pod that the downward API exposes. */
  record PodContext(String podIp, String hostIp, Map<String, String> nodeAllocatable) {}

  private static final Pattern LABEL_REF =
      Pattern.compile("metadata\\.(labels|annotations)\\['(.+)'\\]");
  private static final Pattern ENV_NAME = Pattern.compile("[-._a-zA-Z][-._a-zA-Z0-9]*");

  private ContainerConfig() {}

  /**
   * Resolves {@code container} of {@code pod}.
   *
   * @param baseEnv environment every process starts with (host basics, kubelet-injected service
   *     variables); {@code env}/{@code envFrom} override it
   * @param serviceEnv variables visible to {@code $(VAR)} expansion in literal values although not
   *     (yet) defined by the container (the kubelet's service variables)
   * @param defaultWorkingDir used when the spec has no {@code workingDir} or it is not under a
   *     mount
   * @throws ContainerStartException {@code CreateContainerConfigError} naming the container, the
   *     variable and the missing Secret/ConfigMap/key or unsupported field
   */
  static Resolved resolve(
      Pod pod,
      Container container,
      PodContext ctx,
      MountTable mounts,
      ObjectLookup lookup,
      Map<String, String> baseEnv,
      Map<String, String> serviceEnv,
      Path defaultWorkingDir)
      throws ContainerStartException {
    String ns = pod.getMetadata().getNamespace();
    Map<String, String> env = new LinkedHashMap<>();
    for (EnvFromSource from : nullSafe(container.getEnvFrom())) {
      String prefix = from.getPrefix() == null ? "" : from.getPrefix();
      Map<String, byte[]> data;
      if (from.getConfigMapRef() != null) {
        String name = from.getConfigMapRef().getName();
        data = lookup.configMap(ns, name);
        if (data == null) {
          if (Boolean.TRUE.equals(from.getConfigMapRef().getOptional())) {
            continue;
          }
          throw configError(container, "envFrom: configmap \"" + name + "\" not found");
        }
      } else if (from.getSecretRef() != null) {
        String name = from.getSecretRef().getName();
        data = lookup.secret(ns, name);
        if (data == null) {
          if (Boolean.TRUE.equals(from.getSecretRef().getOptional())) {
            continue;
          }
          throw configError(container, "envFrom: secret \"" + name + "\" not found");
        }
      } else {
        continue;
      }
      for (Map.Entry<String, byte[]> e : data.entrySet()) {
        String key = prefix + e.getKey();
        if (ENV_NAME.matcher(key).matches()) {
          env.put(key, new String(e.getValue(), StandardCharsets.UTF_8));
        }
      }
    }
    for (EnvVar var : nullSafe(container.getEnv())) {
      String value;
      if (var.getValueFrom() == null) {
        Map<String, String> scope = new LinkedHashMap<>(serviceEnv);
        scope.putAll(env);
        value = expand(var.getValue() == null ? "" : var.getValue(), scope::get);
      } else {
        value = valueFrom(pod, container, var.getName(), var.getValueFrom(), ctx, lookup);
        if (value == null) {
          continue; // optional reference that is absent: the variable is not set
        }
      }
      env.put(var.getName(), value);
    }
    env.replaceAll((k, v) -> mounts.rewrite(v));

    Map<String, String> full = new LinkedHashMap<>(baseEnv);
    full.putAll(serviceEnv);
    full.putAll(env);
    Function<String, String> lookupVar = full::get;
    List<String> command =
        mounts.rewriteAll(
            nullSafe(container.getCommand()).stream().map(s -> expand(s, lookupVar)).toList());
    List<String> args =
        mounts.rewriteAll(
            nullSafe(container.getArgs()).stream().map(s -> expand(s, lookupVar)).toList());
    Path workingDir = defaultWorkingDir;
    if (container.getWorkingDir() != null && !container.getWorkingDir().isEmpty()) {
      Path mapped = mounts.hostPath(container.getWorkingDir());
      if (mapped != null) {
        workingDir = mapped;
      }
    }
    return new Resolved(command, args, full, workingDir);
  }

  private static String valueFrom(
      Pod pod,
      Container container,
      String varName,
      EnvVarSource src,
      PodContext ctx,
      ObjectLookup lookup)
      throws ContainerStartException {
    String ns = pod.getMetadata().getNamespace();
    if (src.getFieldRef() != null) {
      String path = src.getFieldRef().getFieldPath();
      String v =
          switch (path == null ? "" : path) {
            case "metadata.name" -> pod.getMetadata().getName();
            case "metadata.namespace" -> ns;
            case "metadata.uid" -> pod.getMetadata().getUid();
            case "spec.nodeName" -> pod.getSpec().getNodeName();
            case "spec.serviceAccountName" -> pod.getSpec().getServiceAccountName();
            case "status.podIP", "status.podIPs" -> ctx.podIp();
            case "status.hostIP" -> ctx.hostIp();
            default -> labelOrAnnotation(pod, path);
          };
      if (v == null && !LABEL_REF.matcher(path == null ? "" : path).matches()) {
        throw configError(
            container,
            "env "
                + varName
                + ": fieldRef.fieldPath \""
                + path
                + "\" is not supported (supported: metadata.name, metadata.namespace,"
                + " metadata.uid, metadata.labels['k'], metadata.annotations['k'], spec.nodeName,"
                + " spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP)");
      }
      return v == null ? "" : v;
    }
    if (src.getSecretKeyRef() != null) {
      var ref = src.getSecretKeyRef();
      boolean optional = Boolean.TRUE.equals(ref.getOptional());
      Map<String, byte[]> data = lookup.secret(ns, ref.getName());
      if (data == null) {
        if (optional) {
          return null;
        }
        throw configError(
            container, "env " + varName + ": secret \"" + ref.getName() + "\" not found");
      }
      byte[] value = data.get(ref.getKey());
      if (value == null) {
        if (optional) {
          return null;
        }
        throw configError(
            container,
            "env "
                + varName
                + ": couldn't find key "
                + ref.getKey()
                + " in Secret "
                + ns
                + "/"
                + ref.getName());
      }
      return new String(value, StandardCharsets.UTF_8);
    }
    if (src.getConfigMapKeyRef() != null) {
      var ref = src.getConfigMapKeyRef();
      boolean optional = Boolean.TRUE.equals(ref.getOptional());
      Map<String, byte[]> data = lookup.configMap(ns, ref.getName());
      if (data == null) {
        if (optional) {
          return null;
        }
        throw configError(
            container, "env " + varName + ": configmap \"" + ref.getName() + "\" not found");
      }
      byte[] value = data.get(ref.getKey());
      if (value == null) {
        if (optional) {
          return null;
        }
        throw configError(
            container,
            "env "
                + varName
                + ": couldn't find key "
                + ref.getKey()
                + " in ConfigMap "
                + ns
                + "/"
                + ref.getName());
      }
      return new String(value, StandardCharsets.UTF_8);
    }
    if (src.getResourceFieldRef() != null) {
      return resourceField(container, varName, src, ctx);
    }
    throw configError(container, "env " + varName + ": valueFrom has no supported source");
  }

  private static String labelOrAnnotation(Pod pod, String path) {
    Matcher m = LABEL_REF.matcher(path == null ? "" : path);
    if (!m.matches()) {
      return null;
    }
    Map<String, String> map =
        m.group(1).equals("labels")
            ? pod.getMetadata().getLabels()
            : pod.getMetadata().getAnnotations();
    String v = map == null ? null : map.get(m.group(2));
    return v == null ? "" : v;
  }

  /**
   * {@code resourceFieldRef}: {@code limits.*} falls back to the node's allocatable when unset and
   * {@code requests.*} to the limit, as the kubelet does; the value is divided by {@code divisor}
   * (default 1) and rounded up.
   */
  private static String resourceField(
      Container container, String varName, EnvVarSource src, PodContext ctx)
      throws ContainerStartException {
    var ref = src.getResourceFieldRef();
    String resource = ref.getResource();
    int dot = resource == null ? -1 : resource.indexOf('.');
    if (dot < 0) {
      throw configError(
          container,
          "env " + varName + ": resourceFieldRef.resource \"" + resource + "\" is not supported");
    }
    String kind = resource.substring(0, dot);
    String name = resource.substring(dot + 1);
    ResourceRequirements rr = container.getResources();
    Quantity q = null;
    if (rr != null) {
      Map<String, Quantity> limits = rr.getLimits();
      Map<String, Quantity> requests = rr.getRequests();
      if (kind.equals("requests") && requests != null) {
        q = requests.get(name);
      }
      if (q == null && limits != null) {
        q = limits.get(name);
      }
    }
    if (q == null && kind.equals("limits") && ctx.nodeAllocatable().containsKey(name)) {
      q = new Quantity(ctx.nodeAllocatable().get(name));
    }
    if (q == null) {
      return kind.equals("requests") ? "0" : "";
    }
    BigDecimal amount = Quantity.getAmountInBytes(q);
    BigDecimal divisor =
        ref.getDivisor() == null ? BigDecimal.ONE : Quantity.getAmountInBytes(ref.getDivisor());
    return amount.divide(divisor, 0, RoundingMode.CEILING).toPlainString();
  }

  /** Kubernetes' {@code expansion.Expand}: {@code $(VAR)} → value, {@code $$} → {@code $}. */
  static String expand(String input, Function<String, String> mapping) {
    StringBuilder out = new StringBuilder(input.length());
    int i = 0;
    while (i < input.length()) {
      char c = input.charAt(i);
      if (c != '$' || i + 1 >= input.length()) {
        out.append(c);
        i++;
        continue;
      }
      char next = input.charAt(i + 1);
      if (next == '$') {
        out.append('$');
        i += 2;
      } else if (next == '(') {
        int close = input.indexOf(')', i + 2);
        if (close < 0) {
          out.append("$(");
          i += 2;
        } else {
          String name = input.substring(i + 2, close);
          String value = mapping.apply(name);
          out.append(value != null ? value : "$(" + name + ")");
          i = close + 1;
        }
      } else {
        out.append('$').append(next);
        i += 2;
      }
    }
    return out.toString();
  }

  private static ContainerStartException configError(Container c, String message) {
    return new ContainerStartException(
        "CreateContainerConfigError", "container " + c.getName() + ": " + message);
  }

  private static <T> List<T> nullSafe(List<T> list) {
    return list == null ? List.of() : list;
  }
}
