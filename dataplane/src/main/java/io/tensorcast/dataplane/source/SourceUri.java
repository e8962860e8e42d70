package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Where an artifact lives: the {@code spec.source.uri} of a ModelArtifact, parsed and checked.
 *
 * <p>Accepted forms (the unified artifact IO design's source list):
 *
 * <ul>
 *   <li>{@code file:///abs/dir} (or {@code file:/abs/dir}), or a plain path {@code /abs/dir} or
 *       {@code rel/dir} (resolved against the working directory): a directory on the node.
 *   <li>{@code s3://bucket/prefix/}: every object whose key starts with the prefix. The prefix is
 *       taken literally (no percent-decoding) and always treated as a directory: {@code
 *       s3://b/models/llama} lists {@code models/llama/...}, never {@code models/llama-2/...}. An
 *       empty prefix means the whole bucket.
 *   <li>{@code oss://bucket/prefix/}: same shape as S3; Alibaba Cloud OSS through its S3-compatible
 *       API (see {@link Sources}).
 *   <li>{@code hf://org/repo[/subdir]}: a Hugging Face Hub model repository (see {@link HfSource});
 *       the revision is a separate field.
 * </ul>
 *
 * <p>Bucket names follow the S3 rule (3–63 characters of lowercase letters, digits, {@code .},
 * {@code -}, starting and ending with a letter or digit; {@code _} tolerated for S3-compatible
 * stores). Prefixes and sub-directories obey {@link SourcePaths}. Query strings and fragments are
 * refused.
 */
public final class SourceUri {

  /** The kind of source a URI names. */
  public enum Scheme {
    FILE("file"),
    S3("s3"),
    OSS("oss"),
    HF("hf");

    private final String prefix;

    Scheme(String prefix) {
      this.prefix = prefix;
    }

    /** The URI scheme as written, e.g. {@code s3}. */
    public String text() {
      return prefix;
    }
  }

  private static final Pattern SCHEME = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]*):");
  private static final Pattern BUCKET = Pattern.compile("[a-z0-9](?:[a-z0-9._-]{1,61})[a-z0-9]");
  private static final Pattern HF_NAME =
      Pattern.compile("[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?");

  private final Scheme scheme;
  private final String bucket;
  private final String prefix;
  private final Path localPath;

  private SourceUri(Scheme scheme, String bucket, String prefix, Path localPath) {
    this.scheme = scheme;
    this.bucket = bucket;
    this.prefix = prefix;
    this.localPath = localPath;
  }

  /**
   * Parses and checks a source URI.
   *
   * @throws SourceException reason {@code InvalidSourceUri} (not retryable) naming the URI and the
   *     rule broken
   */
  public static SourceUri parse(String uri) throws SourceException {
    if (uri == null || uri.isBlank()) {
      throw invalid(
          String.valueOf(uri), "is empty; give file:///dir, s3://bucket/prefix/ or hf://org/repo");
    }
    if (!uri.strip().equals(uri)) {
      throw invalid(uri, "has leading or trailing whitespace");
    }
    var schemeMatch = SCHEME.matcher(uri);
    if (!schemeMatch.find()) {
      return ofPlainPath(uri);
    }
    String schemeText = schemeMatch.group(1).toLowerCase(Locale.ROOT);
    String rest = uri.substring(schemeMatch.end());
    return switch (schemeText) {
      case "file" -> ofFileUri(uri);
      case "s3" -> ofBucket(Scheme.S3, uri, rest);
      case "oss" -> ofBucket(Scheme.OSS, uri, rest);
      case "hf" -> ofHub(uri, rest);
      default ->
          throw invalid(
              uri,
              "has the scheme '"
                  + schemeText
                  + "'; supported are file://, s3://, oss:// and hf:// (or a plain path)");
    };
  }

  /** A local directory, made absolute and normalised. */
  public static SourceUri ofLocal(Path dir) {
    return new SourceUri(Scheme.FILE, "", "", dir.toAbsolutePath().normalize());
  }

  private static SourceUri ofPlainPath(String uri) throws SourceException {
    try {
      return ofLocal(Path.of(uri));
    } catch (InvalidPathException e) {
      throw invalid(uri, "is not a valid local path: " + e.getReason());
    }
  }

  private static SourceUri ofFileUri(String uri) throws SourceException {
    URI parsed;
    try {
      parsed = new URI(uri);
    } catch (URISyntaxException e) {
      throw invalid(uri, "is not a valid file URI: " + e.getMessage());
    }
    if (parsed.isOpaque()) {
      throw invalid(uri, "is a relative file URI; write file:///absolute/dir or a plain path");
    }
    String authority = parsed.getRawAuthority();
    if (authority != null && !authority.isEmpty() && !authority.equals("localhost")) {
      throw invalid(
          uri,
          "names the host '"
              + authority
              + "'; a file source is a directory on the node itself: write file:///abs/dir"
              + " (three slashes)");
    }
    if (parsed.getRawQuery() != null || parsed.getRawFragment() != null) {
      throw invalid(uri, "has a query or fragment; a file URI is only a path");
    }
    String path = parsed.getPath();
    if (path == null || path.isEmpty()) {
      throw invalid(uri, "has no path; write file:///abs/dir");
    }
    try {
      return ofLocal(Path.of(path));
    } catch (InvalidPathException e) {
      throw invalid(uri, "is not a valid local path: " + e.getReason());
    }
  }

  private static SourceUri ofBucket(Scheme scheme, String uri, String rest) throws SourceException {
    String example = scheme.text() + "://bucket/prefix/";
    if (!rest.startsWith("//")) {
      throw invalid(uri, "must start with " + scheme.text() + ":// (write " + example + ")");
    }
    rest = rest.substring(2);
    if (rest.indexOf('?') >= 0 || rest.indexOf('#') >= 0) {
      throw invalid(
          uri,
          "has '?' or '#'; "
              + scheme.text()
              + " URIs are bucket and prefix only (endpoint and region are separate fields)");
    }
    int slash = rest.indexOf('/');
    String bucket = slash < 0 ? rest : rest.substring(0, slash);
    String prefix = slash < 0 ? "" : rest.substring(slash + 1);
    if (bucket.isEmpty()) {
      throw invalid(uri, "has no bucket name (write " + example + ")");
    }
    if (!BUCKET.matcher(bucket).matches() || bucket.contains("..")) {
      throw invalid(
          uri,
          "has the bucket name '"
              + bucket
              + "'; bucket names are 3-63 characters of lowercase letters, digits, '.', '-'"
              + " (and '_'), starting and ending with a letter or digit");
    }
    return new SourceUri(scheme, bucket, directoryPrefix(uri, prefix, "prefix"), null);
  }

  private static SourceUri ofHub(String uri, String rest) throws SourceException {
    if (!rest.startsWith("//")) {
      throw invalid(uri, "must start with hf:// (write hf://org/repo or hf://org/repo/subdir)");
    }
    rest = rest.substring(2);
    if (rest.indexOf('?') >= 0 || rest.indexOf('#') >= 0) {
      throw invalid(uri, "has '?' or '#'; give the revision in spec.source.revision");
    }
    String[] parts = rest.split("/", 3);
    if (parts.length < 2 || parts[0].isEmpty() || parts[1].isEmpty()) {
      throw invalid(uri, "must name a repository as hf://org/repo[/subdir]");
    }
    for (String name : new String[] {parts[0], parts[1]}) {
      if (!HF_NAME.matcher(name).matches() || name.contains("..") || name.contains("--")) {
        throw invalid(
            uri,
            "has the repository name part '"
                + name
                + "'; Hub names are 1-96 characters of letters, digits, '.', '_', '-', starting"
                + " and ending with a letter or digit, without '--' or '..' (give a revision in"
                + " spec.source.revision, not with '@')");
      }
    }
    String subdir = parts.length == 3 ? parts[2] : "";
    return new SourceUri(
        Scheme.HF, parts[0] + "/" + parts[1], directoryPrefix(uri, subdir, "sub-directory"), null);
  }

  /** Checks a prefix and returns it with one trailing '/', or "" for none. */
  private static String directoryPrefix(String uri, String prefix, String what)
      throws SourceException {
    if (prefix.isEmpty()) {
      return "";
    }
    String body = prefix.endsWith("/") ? prefix.substring(0, prefix.length() - 1) : prefix;
    Optional<String> problem = SourcePaths.problem(body);
    if (problem.isPresent()) {
      throw invalid(uri, "has the " + what + " '" + prefix + "', which " + problem.get());
    }
    return body + "/";
  }

  private static SourceException invalid(String uri, String rule) {
    return new SourceException(
        Reason.InvalidSourceUri, "source URI '" + SourcePaths.printable(uri) + "' " + rule, false);
  }

  /** The kind of source. */
  public Scheme scheme() {
    return scheme;
  }

  /**
   * The bucket name of an {@code s3://} or {@code oss://} URI.
   *
   * @throws IllegalStateException for other schemes
   */
  public String bucket() {
    require(scheme == Scheme.S3 || scheme == Scheme.OSS, "bucket");
    return bucket;
  }

  /**
   * The repository id {@code org/repo} of an {@code hf://} URI.
   *
   * @throws IllegalStateException for other schemes
   */
  public String repository() {
    require(scheme == Scheme.HF, "repository");
    return bucket;
  }

  /**
   * The key prefix ({@code s3://}, {@code oss://}) or sub-directory ({@code hf://}): empty, or
   * ending with exactly one {@code /}.
   *
   * @throws IllegalStateException for {@code file} URIs
   */
  public String prefix() {
    require(scheme != Scheme.FILE, "prefix");
    return prefix;
  }

  /**
   * The absolute, normalised directory of a {@code file} URI or plain path.
   *
   * @throws IllegalStateException for other schemes
   */
  public Path localPath() {
    require(scheme == Scheme.FILE, "localPath");
    return localPath;
  }

  private void require(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException(what + " is not defined for " + this);
    }
  }

  /** The canonical form, e.g. {@code s3://bucket/prefix/} or {@code file:///models/llama}. */
  @Override
  public String toString() {
    return switch (scheme) {
      case FILE -> localPath.toUri().toString();
      case S3, OSS, HF -> scheme.text() + "://" + bucket + "/" + prefix;
    };
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof SourceUri other
        && scheme == other.scheme
        && bucket.equals(other.bucket)
        && prefix.equals(other.prefix)
        && Objects.equals(localPath, other.localPath);
  }

  @Override
  public int hashCode() {
    return Objects.hash(scheme, bucket, prefix, localPath);
  }
}
