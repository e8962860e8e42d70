package io.tensorcast.operator.validation;

import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.VersionsSpec;
import io.tensorcast.api.v1alpha1.WritersSpec;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The rules of a written ModelArtifact ({@code spec.source.writers}) and of {@code spec.save} /
 * {@code spec.versions}, which only a written artifact may have:
 *
 * <ul>
 *   <li>exactly one of {@code source.uri} and {@code source.writers}; with writers, none of the
 *       fields that describe a uri source ({@code endpoint}, {@code region}, ...);
 *   <li>{@code writers.podSelector}: at least one label, valid label names and values;
 *   <li>{@code memory.limit} is required: it is the size of one version, and what the pods ask
 *       memory for ({@code limit × (retain + 1)});
 *   <li>a {@code KVCache} needs {@code save} (its snapshots are saved and loaded back by key); an
 *       {@code RLCheckpoint} needs {@code versions.retain >= 2} (a reader keeps step N-1 until N is
 *       complete);
 *   <li>{@code save.uri} as a source uri; credentials for s3://, oss:// and hf://; {@code
 *       keyMetadata} a plain name; its endpoint by the same {@link EndpointRules} as a source's.
 * </ul>
 */
final class WrittenRules {
  private static final Pattern URI = Pattern.compile(SourceSpec.URI_PATTERN);
  private static final Pattern LABEL_NAME =
      Pattern.compile(
          "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
              + "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$");
  private static final Pattern LABEL_VALUE =
      Pattern.compile("^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$");

  private WrittenRules() {}

  /** Whether the source is written (then the uri rules do not apply). */
  static boolean written(SourceSpec source) {
    return source != null && source.getWriters() != null;
  }

  static void check(ModelArtifactSpec spec, SourcePolicy policy, List<Violation> out) {
    SourceSpec source = spec.getSource();
    WritersSpec writers = source.getWriters();
    if (writers == null) {
      if (spec.getSave() != null) {
        out.add(
            new Violation(
                "spec.save",
                "applies to a written artifact (spec.source.writers); an artifact loaded from"
                    + " spec.source.uri is saved already"));
      }
      if (spec.getVersions() != null) {
        out.add(
            new Violation("spec.versions", "applies to a written artifact (spec.source.writers)"));
      }
      return;
    }
    if (source.getUri() != null) {
      out.add(
          new Violation(
              "spec.source",
              "gives both uri and writers; an artifact is either loaded from a uri or written by"
                  + " pods, give one"));
    }
    Map<String, Object> uriFields = new LinkedHashMap<>();
    uriFields.put("endpoint", source.getEndpoint());
    uriFields.put("region", source.getRegion());
    uriFields.put("revision", source.getRevision());
    uriFields.put("credentialsSecretRef", source.getCredentialsSecretRef());
    uriFields.put("insecureEndpoint", source.getInsecureEndpoint());
    uriFields.put("pathStyle", source.getPathStyle());
    for (Map.Entry<String, Object> f : uriFields.entrySet()) {
      if (f.getValue() != null) {
        out.add(
            new Violation(
                "spec.source." + f.getKey(),
                "describes a uri source; a written artifact (writers) has none (its"
                    + " destination is spec.save)"));
      }
    }
    if ((source.getInclude() != null && !source.getInclude().isEmpty())
        || (source.getExclude() != null && !source.getExclude().isEmpty())) {
      out.add(
          new Violation(
              "spec.source.include/exclude", "filter a uri source; a written artifact has none"));
    }
    Map<String, String> selector = writers.getPodSelector();
    if (selector == null || selector.isEmpty()) {
      out.add(
          new Violation(
              "spec.source.writers.podSelector",
              "needs at least one label: it selects the pods that write (an empty selector"
                  + " would make every pod of the namespace a writer)"));
    } else {
      selector.forEach(
          (k, v) -> {
            if (k == null || !LABEL_NAME.matcher(k).matches()) {
              out.add(
                  new Violation(
                      "spec.source.writers.podSelector", "'" + k + "' is not a label name"));
            }
            if (v == null || !LABEL_VALUE.matcher(v).matches()) {
              out.add(
                  new Violation(
                      "spec.source.writers.podSelector[" + k + "]",
                      "'" + v + "' is not a label value"));
            }
          });
    }
    if (spec.getMemory() == null || spec.getMemory().getLimit() == null) {
      out.add(
          new Violation(
              "spec.memory.limit",
              "is required for a written artifact: it is the size of one version, and each node"
                  + " asks memory for limit × (retain + 1) versions"));
    }
    int retain =
        spec.getVersions() == null || spec.getVersions().getRetain() == null
            ? VersionsSpec.DEFAULT_RETAIN
            : spec.getVersions().getRetain();
    if (retain < 1 || retain > 16) {
      out.add(new Violation("spec.versions.retain", retain + " is outside 1..16"));
    }
    if (spec.getKind() == ArtifactKind.RLCheckpoint && retain < 2) {
      out.add(
          new Violation(
              "spec.versions.retain",
              "is "
                  + retain
                  + " but an RLCheckpoint needs at least 2: a reader keeps step N-1 until step N"
                  + " is complete on it, so its consumers never see a gap"));
    }
    if (spec.getKind() == ArtifactKind.KVCache && spec.getSave() == null) {
      out.add(
          new Violation(
              "spec.save",
              "is required for a written KVCache: its snapshots are saved under their key and"
                  + " loaded back by key with a ModelArtifact whose uri is the saved location"));
    }
    SaveSpec save = spec.getSave();
    if (save != null) {
      String uri = save.getUri();
      if (uri == null || !URI.matcher(uri).matches()) {
        out.add(
            new Violation(
                "spec.save.uri",
                "'"
                    + uri
                    + "' is not one of s3://bucket/prefix/, oss://bucket/prefix/,"
                    + " hf://org/repo[/subdir] or file:///absolute/path"));
      } else if (!uri.startsWith("file://") && save.getCredentialsSecretRef() == null) {
        out.add(
            new Violation(
                "spec.save.credentialsSecretRef",
                "is required to save to "
                    + uri
                    + ": the data plane uses no ambient credentials (no instance role)"));
      }
      if (save.getKeyMetadata() != null
          && !save.getKeyMetadata().matches("[A-Za-z0-9][A-Za-z0-9._-]{0,127}")) {
        out.add(
            new Violation(
                "spec.save.keyMetadata", "'" + save.getKeyMetadata() + "' is not a plain name"));
      }
      if (uri != null && URI.matcher(uri).matches()) {
        SourceSpec asSource = new SourceSpec();
        asSource.setUri(uri);
        asSource.setEndpoint(save.getEndpoint());
        asSource.setInsecureEndpoint(save.getInsecureEndpoint());
        List<Violation> endpoint = new java.util.ArrayList<>();
        EndpointRules.check(asSource, policy, endpoint);
        for (Violation v : endpoint) {
          out.add(new Violation(v.field().replace("spec.source", "spec.save"), v.rule()));
        }
      }
    }
  }
}
