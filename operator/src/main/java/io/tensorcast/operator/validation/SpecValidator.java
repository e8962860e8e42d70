package io.tensorcast.operator.validation;

import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Toleration;
import io.tensorcast.api.PathGlob;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.PlacementSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.operator.desired.ByteSize;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The rules of a ModelArtifact that its CRD schema cannot express on Kubernetes 1.20 (no CEL {@code
 * x-kubernetes-validations} before 1.25), and the schema's own rules once more, for objects stored
 * under an older schema. Pure: no client calls. A spec with any violation gets phase {@code
 * Failed}, {@code Ready=False} reason {@code InvalidSpec} and no pods.
 *
 * <p>Where the rules come from: S3 bucket naming rules (AWS S3 User Guide, "General purpose bucket
 * naming rules"), Hugging Face repo id rules ({@code huggingface_hub.utils.validate_repo_id}),
 * Kubernetes label and quantity syntax (apimachinery {@code validation.IsQualifiedName}, {@code
 * IsValidLabelValue}, {@code resource.ParseQuantity}), toleration rules (core/v1 validation of
 * {@code Toleration}), and the glob grammar the data plane matches with ({@link PathGlob}).
 *
 * <p>Rules of trust, which depend on the operator's {@link SourcePolicy}: a {@code file://} source
 * may not reach into (or contain) the store root, which holds every artifact's copy on a node, and
 * endpoints follow {@link EndpointRules} (https unless declared insecure, never for {@code hf://};
 * no link-local or metadata addresses; the operator's allowlist).
 */
public final class SpecValidator {

  /** Longest artifact name: it is the value of the pods' {@code tensorcast.io/artifact} label. */
  public static final int MAX_NAME_LENGTH = 63;

  private static final Pattern URI = Pattern.compile(SourceSpec.URI_PATTERN);
  private static final Pattern IPV4 = Pattern.compile("^\\d{1,3}(\\.\\d{1,3}){3}$");
  private static final Pattern LABEL_NAME =
      Pattern.compile("^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$");
  private static final Pattern DNS_SUBDOMAIN =
      Pattern.compile("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  private static final Pattern QUANTITY =
      Pattern.compile(
          "^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$");
  private static final Set<String> EFFECTS = Set.of("NoSchedule", "PreferNoSchedule", "NoExecute");

  private SpecValidator() {}

  /**
   * Every rule the artifact breaks under {@link SourcePolicy#DEFAULT}; empty when the spec is
   * valid.
   *
   * @param artifact the object as read from the API server
   */
  public static List<Violation> validate(ModelArtifact artifact) {
    return validate(artifact, SourcePolicy.DEFAULT);
  }

  /**
   * Every rule the artifact breaks, in field order; empty when the spec is valid.
   *
   * @param artifact the object as read from the API server
   * @param policy the operator's store root and endpoint allowlist
   */
  public static List<Violation> validate(ModelArtifact artifact, SourcePolicy policy) {
    List<Violation> out = new ArrayList<>();
    String name = artifact.getMetadata() == null ? null : artifact.getMetadata().getName();
    if (name != null && name.length() > MAX_NAME_LENGTH) {
      out.add(
          new Violation(
              "metadata.name",
              "is "
                  + name.length()
                  + " characters; at most "
                  + MAX_NAME_LENGTH
                  + " (it is the value of the label tensorcast.io/artifact on the data-plane"
                  + " pods)"));
    }
    ModelArtifactSpec spec = artifact.getSpec();
    if (spec == null) {
      out.add(new Violation("spec", "is missing"));
      return out;
    }
    if (WrittenRules.written(spec.getSource())) {
      WrittenRules.check(spec, policy, out);
    } else {
      source(spec.getSource(), policy, out);
      if (spec.getSource() != null) {
        WrittenRules.check(spec, policy, out);
      }
    }
    placement(spec.getPlacement(), out);
    memory(spec.getMemory(), out);
    distribution(spec.getDistribution(), out);
    return out;
  }

  /** One line naming every violation, for a condition message. */
  public static String describe(List<Violation> violations) {
    StringBuilder b = new StringBuilder("invalid spec: ");
    for (int i = 0; i < violations.size(); i++) {
      b.append(i == 0 ? "" : "; ").append(violations.get(i));
    }
    return b.toString();
  }

  private static void source(SourceSpec source, SourcePolicy policy, List<Violation> out) {
    if (source == null) {
      out.add(new Violation("spec.source", "is required"));
      return;
    }
    String uri = source.getUri();
    if (uri == null || uri.isEmpty()) {
      out.add(new Violation("spec.source.uri", "is required (or writers: a written artifact)"));
    } else if (!URI.matcher(uri).matches()) {
      out.add(
          new Violation(
              "spec.source.uri",
              "'"
                  + uri
                  + "' is not one of s3://bucket/prefix/, oss://bucket/prefix/,"
                  + " hf://org/repo[/subdir] or file:///absolute/path (no empty, '.' or '..'"
                  + " segments, no whitespace)"));
    } else if (uri.startsWith("s3://")) {
      s3Bucket(authority(uri, "s3://"), out);
    } else if (uri.startsWith("hf://")) {
      hfRepo(uri, out);
    } else if (uri.startsWith("file://")) {
      fileOutsideStore(uri, policy.storeRoot(), out);
    }
    String revision = source.getRevision();
    if (revision != null
        && (revision.isBlank() || revision.chars().anyMatch(Character::isWhitespace))) {
      out.add(
          new Violation(
              "spec.source.revision",
              "'" + revision + "' must be a branch, tag or commit without white space"));
    }
    if (source.getEndpoint() != null
        && !Pattern.matches(SourceSpec.ENDPOINT_PATTERN, source.getEndpoint())) {
      out.add(
          new Violation(
              "spec.source.endpoint",
              "'"
                  + source.getEndpoint()
                  + "' is not an http(s) URL with a host and no query or fragment"));
    }
    if (source.getRegion() != null
        && !Pattern.matches(SourceSpec.REGION_PATTERN, source.getRegion())) {
      out.add(
          new Violation(
              "spec.source.region",
              "'" + source.getRegion() + "' has characters other than a-z, 0-9 and '-'"));
    }
    EndpointRules.check(source, policy, out);
    globs("spec.source.include", source.getInclude(), out);
    globs("spec.source.exclude", source.getExclude(), out);
  }

  /**
   * A {@code file://} directory must be neither the store root, nor under it (another artifact's
   * copy, possibly of another namespace), nor above it (which would take every copy in). Checked on
   * the path as written; the CRD pattern already refuses {@code .} and {@code ..} segments. A
   * symbolic link elsewhere that points into the store is for the data plane to refuse once it has
   * resolved the path on the node.
   */
  private static void fileOutsideStore(String uri, String storeRoot, List<Violation> out) {
    String path = trimSlashes(uri.substring("file://".length()));
    String root = trimSlashes(storeRoot);
    String rule = null;
    if (path.equals(root)) {
      rule = "is the store root";
    } else if (path.startsWith(root + "/")) {
      rule = "is inside the store root";
    } else if (path.isEmpty() || root.startsWith(path + "/")) {
      rule = "contains the store root";
    }
    if (rule != null) {
      out.add(
          new Violation(
              "spec.source.uri",
              "'"
                  + uri
                  + "' "
                  + rule
                  + " "
                  + storeRoot
                  + ", which holds the copies of every ModelArtifact on a node (of every"
                  + " namespace); a file:// source must be a directory outside it"));
    }
  }

  private static String trimSlashes(String p) {
    String s = p;
    while (s.endsWith("/")) {
      s = s.substring(0, s.length() - 1);
    }
    return s;
  }

  private static String authority(String uri, String scheme) {
    String rest = uri.substring(scheme.length());
    int slash = rest.indexOf('/');
    return slash < 0 ? rest : rest.substring(0, slash);
  }

  private static void s3Bucket(String bucket, List<Violation> out) {
    String rule = null;
    if (bucket.contains("..")) {
      rule = "must not contain two adjacent periods";
    } else if (bucket.contains(".-") || bucket.contains("-.")) {
      rule = "must not have a period next to a hyphen";
    } else if (IPV4.matcher(bucket).matches()) {
      rule = "must not be formatted as an IP address";
    } else if (bucket.startsWith("xn--") || bucket.startsWith("sthree-")) {
      rule = "must not start with the reserved prefixes xn-- or sthree-";
    } else if (bucket.endsWith("-s3alias")
        || bucket.endsWith("--ol-s3")
        || bucket.endsWith(".mrap")
        || bucket.endsWith("--x-s3")) {
      rule = "must not end with the reserved suffixes -s3alias, --ol-s3, .mrap or --x-s3";
    }
    if (rule != null) {
      out.add(
          new Violation(
              "spec.source.uri",
              "S3 bucket name '" + bucket + "' " + rule + " (S3 bucket naming rules)"));
    }
  }

  private static void hfRepo(String uri, List<Violation> out) {
    String[] parts = uri.substring("hf://".length()).split("/");
    for (int i = 0; i < Math.min(2, parts.length); i++) {
      String part = parts[i];
      String what = i == 0 ? "organisation" : "repository";
      if (part.contains("--") || part.contains("..")) {
        out.add(
            new Violation(
                "spec.source.uri",
                "Hugging Face "
                    + what
                    + " name '"
                    + part
                    + "' must not contain '--' or '..' (Hub repo id rules)"));
      } else if (i == 1 && part.endsWith(".git")) {
        out.add(
            new Violation(
                "spec.source.uri",
                "Hugging Face repository name '" + part + "' must not end with '.git'"));
      }
    }
  }

  private static void globs(String field, List<String> globs, List<Violation> out) {
    if (globs == null) {
      return;
    }
    for (int i = 0; i < globs.size(); i++) {
      try {
        PathGlob.compile(globs.get(i));
      } catch (IllegalArgumentException e) {
        out.add(new Violation(field + "[" + i + "]", e.getMessage()));
      }
    }
  }

  private static void placement(PlacementSpec placement, List<Violation> out) {
    if (placement == null) {
      return;
    }
    if (placement.getReplicas() != null && placement.getReplicas() < 1) {
      out.add(
          new Violation(
              "spec.placement.replicas", "is " + placement.getReplicas() + "; at least 1"));
    }
    Map<String, String> selector = placement.getNodeSelector();
    if (selector != null) {
      selector.forEach(
          (k, v) -> {
            labelKey("spec.placement.nodeSelector", k, out);
            if (v != null && !v.isEmpty() && !LABEL_NAME.matcher(v).matches()) {
              out.add(
                  new Violation(
                      "spec.placement.nodeSelector[" + k + "]",
                      "value '"
                          + v
                          + "' is not a label value (at most 63 characters of A-Z a-z 0-9 - _ .,"
                          + " beginning and ending with a letter or digit)"));
            }
          });
    }
    List<Toleration> tolerations = placement.getTolerations();
    if (tolerations != null) {
      for (int i = 0; i < tolerations.size(); i++) {
        toleration("spec.placement.tolerations[" + i + "]", tolerations.get(i), out);
      }
    }
  }

  private static void labelKey(String field, String key, List<Violation> out) {
    String name = key;
    int slash = key.indexOf('/');
    if (slash >= 0) {
      String prefix = key.substring(0, slash);
      name = key.substring(slash + 1);
      if (prefix.isEmpty() || prefix.length() > 253 || !DNS_SUBDOMAIN.matcher(prefix).matches()) {
        out.add(
            new Violation(
                field + "[" + key + "]",
                "key prefix '" + prefix + "' is not a DNS subdomain (RFC 1123, at most 253)"));
        return;
      }
    }
    if (!LABEL_NAME.matcher(name).matches()) {
      out.add(
          new Violation(
              field + "[" + key + "]",
              "key name '"
                  + name
                  + "' is not a label name (1-63 characters of A-Z a-z 0-9 - _ ., beginning and"
                  + " ending with a letter or digit)"));
    }
  }

  private static void toleration(String field, Toleration t, List<Violation> out) {
    String op = t.getOperator();
    boolean exists = "Exists".equals(op);
    if (op != null && !op.isEmpty() && !exists && !"Equal".equals(op)) {
      out.add(new Violation(field + ".operator", "'" + op + "' is not Exists or Equal"));
    }
    if ((t.getKey() == null || t.getKey().isEmpty()) && !exists) {
      out.add(
          new Violation(
              field + ".operator", "must be Exists when key is empty (matches all taints)"));
    }
    if (t.getKey() != null && !t.getKey().isEmpty()) {
      labelKey(field + ".key", t.getKey(), out);
    }
    if (exists && t.getValue() != null && !t.getValue().isEmpty()) {
      out.add(new Violation(field + ".value", "must be empty when operator is Exists"));
    }
    String effect = t.getEffect();
    if (effect != null && !effect.isEmpty() && !EFFECTS.contains(effect)) {
      out.add(
          new Violation(
              field + ".effect",
              "'" + effect + "' is not NoSchedule, PreferNoSchedule or NoExecute"));
    }
    if (t.getTolerationSeconds() != null && !"NoExecute".equals(effect)) {
      out.add(new Violation(field + ".tolerationSeconds", "is allowed only with effect NoExecute"));
    }
  }

  private static void memory(MemorySpec memory, List<Violation> out) {
    if (memory == null || memory.getLimit() == null) {
      return;
    }
    positiveBytes("spec.memory.limit", memory.getLimit(), out);
  }

  private static void distribution(DistributionSpec distribution, List<Violation> out) {
    if (distribution == null) {
      return;
    }
    if (distribution.getPieceSize() != null) {
      String field = "spec.distribution.pieceSize";
      int before = out.size();
      positiveBytes(field, distribution.getPieceSize(), out);
      if (out.size() == before) {
        long bytes = ByteSize.bytes(distribution.getPieceSize());
        if (bytes < DistributionSpec.MIN_PIECE_SIZE || bytes > DistributionSpec.MAX_PIECE_SIZE) {
          out.add(
              new Violation(
                  field,
                  "is "
                      + distribution.getPieceSize()
                      + " ("
                      + bytes
                      + " bytes); must be from 256Ki ("
                      + DistributionSpec.MIN_PIECE_SIZE
                      + ") to 64Mi ("
                      + DistributionSpec.MAX_PIECE_SIZE
                      + ") bytes"));
        }
      }
    }
    if (distribution.getSourceConnections() != null && distribution.getSourceConnections() < 1) {
      out.add(
          new Violation(
              "spec.distribution.sourceConnections",
              "is " + distribution.getSourceConnections() + "; at least 1"));
    }
  }

  /**
   * Whether a quantity is syntactically a Kubernetes quantity, a whole number of bytes, and more
   * than 0 (0 would read as "no limit" downstream).
   */
  private static void positiveBytes(String field, Quantity q, List<Violation> out) {
    String text = q.toString();
    if (!QUANTITY.matcher(text).matches()) {
      out.add(
          new Violation(
              field,
              "'"
                  + text
                  + "' is not a Kubernetes quantity (a number with an optional suffix Ki, Mi, Gi,"
                  + " Ti, Pi, Ei, k, M, G, T, P, E), e.g. 64Mi"));
      return;
    }
    BigDecimal amount;
    try {
      amount = Quantity.getAmountInBytes(q);
    } catch (RuntimeException e) {
      out.add(new Violation(field, "'" + text + "' cannot be read as a number of bytes"));
      return;
    }
    if (amount.signum() <= 0) {
      out.add(new Violation(field, "is " + text + "; must be more than 0 bytes"));
    } else if (amount.stripTrailingZeros().scale() > 0) {
      out.add(new Violation(field, "'" + text + "' is not a whole number of bytes"));
    } else if (amount.toBigInteger().bitLength() > 63) {
      out.add(
          new Violation(field, "'" + text + "' is larger than " + ByteSize.human(Long.MAX_VALUE)));
    }
  }
}
