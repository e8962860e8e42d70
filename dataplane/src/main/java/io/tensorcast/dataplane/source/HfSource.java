package io.tensorcast.dataplane.source;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.Reason;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodyHandler;
import java.net.http.HttpResponse.BodyHandlers;
import java.net.http.HttpResponse.BodySubscribers;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A Hugging Face Hub model repository as an artifact source: {@code hf://org/repo[/subdir]} at a
 * revision (branch, tag, commit sha or {@code refs/pr/N}; default {@code main}).
 *
 * <p>Protocol (the one {@code huggingface_hub} and {@code @huggingface/hub} speak):
 *
 * <ol>
 *   <li><b>Resolve once.</b> {@code GET {endpoint}/api/models/{repo}/revision/{rev}} (the revision
 *       URL-encoded as one path segment, so {@code refs/pr/1} is {@code refs%2Fpr%2F1}) gives the
 *       commit {@code sha}. Everything after uses that sha, never the branch, so a branch that
 *       moves during a load cannot mix two commits. {@link #resolvedRevision()} returns it.
 *   <li><b>List.</b> {@code GET /api/models/{repo}/tree/{sha}[/{subdir}]?recursive=true}, following
 *       {@code Link: <…>; rel="next"} pages on the same origin. Files only; each has a {@code size}
 *       and, when stored in LFS, {@code lfs.oid} — the SHA-256 of the content, which becomes {@link
 *       SourceFile#sha256()} so the loader verifies the bytes. {@link SourceFile#etag()} is the LFS
 *       sha256, or the git blob sha1 for plain git files (which is not a content sha256 and is
 *       never used as one).
 *   <li><b>Read.</b> {@code GET {endpoint}/{repo}/resolve/{sha}/{path}} with {@code Range:
 *       bytes=a-b} (inclusive end, RFC 9110 §14.1.2). Redirects are followed here, at most {@value
 *       #MAX_REDIRECTS}: to another origin (the LFS/CDN host) <em>without</em> the {@code
 *       Authorization} header, on the Hub's own origin (relative redirects: repository renames)
 *       with it. The Hub's answer must carry the pinned commit in {@code X-Repo-Commit} (when it
 *       sends the header), the listed size in {@code X-Linked-Size} and the listed identity in
 *       {@code X-Linked-Etag} (LFS) or {@code ETag} (git files); the final answer must be 206 with
 *       {@code Content-Range: bytes a-b/size} as asked (200 only when the range is the whole file)
 *       and a matching {@code Content-Length}. Anything else is a {@link SourceException}.
 * </ol>
 *
 * <p>Endpoint: {@link SourceOptions#endpoint()}, else the environment's {@code HF_ENDPOINT}, else
 * {@code https://huggingface.co}; checked by {@link EndpointPolicy} (a token goes to plain http
 * only with {@link SourceOptions#allowInsecureEndpoint()}; no link-local or metadata host, also not
 * as a redirect target). Token: {@link SourceOptions#token()}, else {@code HF_TOKEN}, else none
 * (public repositories only). Metadata calls (revision, tree pages) are tried {@link
 * SourceOptions#listMaxAttempts()} times with exponential back-off honouring {@code Retry-After} (a
 * throttled one not at all without {@link SourceOptions#throttledRetriesInPlace()}); ranged reads
 * are made once — {@code ParallelRangeReader} retries and resumes them.
 *
 * <p>Errors: {@code X-Error-Code} {@code RepoNotFound}, {@code RevisionNotFound}, {@code
 * EntryNotFound}, {@code GatedRepo} become reasons of the same name; HTTP 401 is {@code
 * Unauthorized} (the message says to set a token); other 403 {@code AccessDenied}; 416 or a
 * different size/identity {@code ObjectChanged}; 429 {@code Throttled} and 5xx {@code
 * SourceUnavailable}, both retryable with the server's {@code Retry-After}.
 */
public final class HfSource implements ArtifactSource {
  /** The public Hub. */
  public static final URI DEFAULT_ENDPOINT = URI.create("https://huggingface.co");

  /** Most redirects followed for one request. */
  public static final int MAX_REDIRECTS = 5;

  private static final int MAX_PAGES = 100_000;

  /** Hub API calls: from 200 ms; a {@code Retry-After} up to 60 s is waited for in place. */
  private static final Backoff BACKOFF =
      new Backoff(Duration.ofMillis(200), Duration.ofSeconds(60));

  private static final Pattern SHA1 = Pattern.compile("[0-9a-f]{40}");
  private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");
  private static final Pattern CONTENT_RANGE = Pattern.compile("bytes (\\d+)-(\\d+)/(\\d+|\\*)");
  private static final Pattern LINK_NEXT =
      Pattern.compile("<([^>]*)>\\s*;\\s*rel\\s*=\\s*\"?next\"?", Pattern.CASE_INSENSITIVE);

  /**
   * Closes response bodies that stay silent longer than the read timeout: the JDK client has no
   * socket read timeout of its own, and a stalled server would otherwise hang a reader forever.
   */
  private static final ScheduledExecutorService WATCHDOG =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "tensorcast-hf-read-timeout");
            t.setDaemon(true);
            return t;
          });

  private static final ObjectMapper JSON =
      new ObjectMapper().enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

  private final String repo;
  private final String subdir;
  private final String revision;
  private final URI endpoint;
  private final String base;
  private final String token;
  private final PathFilter filter;
  private final HttpClient http;
  private final Duration requestTimeout;
  private final Duration readTimeout;
  private final int listMaxAttempts;
  private final boolean throttledRetriesInPlace;
  private final String description;
  private volatile String commit;

  private HfSource(SourceUri uri, SourceOptions options, Function<String, String> env) {
    this.repo = uri.repository();
    this.subdir = uri.prefix();
    this.revision = options.revision().orElse("main");
    this.endpoint = endpoint(options, env);
    String e = endpoint.toString();
    this.base = e.endsWith("/") ? e.substring(0, e.length() - 1) : e;
    String envToken = env.apply("HF_TOKEN");
    this.token =
        options.token().orElse(envToken == null || envToken.isBlank() ? null : envToken.strip());
    this.filter = options.filter();
    this.requestTimeout = options.requestTimeout();
    this.readTimeout = options.readTimeout();
    this.listMaxAttempts = options.listMaxAttempts();
    this.throttledRetriesInPlace = options.throttledRetriesInPlace();
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .followRedirects(HttpClient.Redirect.NEVER)
            .connectTimeout(options.connectTimeout())
            .build();
    this.description = uri + " (revision " + revision + ")";
  }

  /**
   * Creates the source with the process environment ({@code HF_ENDPOINT}, {@code HF_TOKEN}); no
   * request is made until {@link #list()}.
   *
   * @param uri an {@code hf://} URI
   */
  public static HfSource open(SourceUri uri, SourceOptions options) throws SourceException {
    return open(uri, options, System::getenv);
  }

  /** As {@link #open(SourceUri, SourceOptions)} with {@code env} in place of the environment. */
  static HfSource open(SourceUri uri, SourceOptions options, Function<String, String> env)
      throws SourceException {
    if (uri.scheme() != SourceUri.Scheme.HF) {
      throw new IllegalArgumentException("not an hf:// URI: " + uri);
    }
    HfSource source;
    try {
      source = new HfSource(uri, options, env);
    } catch (IllegalArgumentException e) {
      throw new SourceException(Reason.InvalidSourceOptions, e.getMessage(), false, e);
    }
    EndpointPolicy.check(
        source.endpoint, source.token != null, options.allowInsecureEndpoint(), "Hub endpoint");
    return source;
  }

  private static URI endpoint(SourceOptions options, Function<String, String> env) {
    if (options.endpoint().isPresent()) {
      return options.endpoint().get();
    }
    String fromEnv = env.apply("HF_ENDPOINT");
    if (fromEnv == null || fromEnv.isBlank()) {
      return DEFAULT_ENDPOINT;
    }
    URI uri;
    try {
      uri = URI.create(fromEnv.strip());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "HF_ENDPOINT '" + fromEnv + "' is not a URL: " + e.getMessage(), e);
    }
    if (uri.getScheme() == null
        || !(uri.getScheme().equals("http") || uri.getScheme().equals("https"))
        || uri.getHost() == null
        || uri.getRawQuery() != null) {
      throw new IllegalArgumentException(
          "HF_ENDPOINT '" + fromEnv + "' must be an http:// or https:// URL with a host");
    }
    return uri;
  }

  /**
   * LFS files: their SHA-256 ({@code lfs.oid}); plain git files ({@code config.json}, tokenizers,
   * code): their git blob id, the SHA-1 of {@code "blob <size>\0"} and the content, which the tree
   * listing gives as {@code oid} and the Hub's answer as {@code ETag}.
   */
  @Override
  public PublishedDigest publishedDigest(SourceFile file) {
    if (file.sha256().isPresent()) {
      return PublishedDigest.hex(
          PublishedDigest.Algorithm.SHA256, file.sha256().get(), "sha256 (Hub LFS oid)");
    }
    if (SHA1.matcher(file.etag()).matches()) {
      return PublishedDigest.hex(
          PublishedDigest.Algorithm.GIT_BLOB_SHA1, file.etag(), "git blob sha1 (Hub oid)");
    }
    return PublishedDigest.none("the Hub's listing gave no oid for " + file.path());
  }

  /** The Hub endpoint requests go to. */
  public URI endpoint() {
    return endpoint;
  }

  /** The revision as asked ({@code main} when none was given). */
  public String revision() {
    return revision;
  }

  /** The commit sha the revision resolved to, once {@link #list()} (or a read) resolved it. */
  @Override
  public Optional<String> resolvedRevision() {
    return Optional.ofNullable(commit);
  }

  /** Resolves the revision to a commit sha once; later calls return the same sha. */
  private synchronized String commit() throws SourceException {
    if (commit == null) {
      String what = "resolving revision '" + revision + "' of " + repo;
      JsonNode info =
          getJson(base + "/api/models/" + repo + "/revision/" + encodeSegment(revision), what);
      JsonNode sha = info.get("sha");
      if (sha == null || !sha.isTextual() || !SHA1.matcher(sha.asText()).matches()) {
        throw new SourceException(
            Reason.InvalidResponse,
            what + ": the answer has no 40-hex 'sha' field (got " + abbreviate(sha) + ")",
            false);
      }
      commit = sha.asText();
    }
    return commit;
  }

  @Override
  public List<SourceFile> list() throws SourceException {
    String sha = commit();
    String pathPart =
        subdir.isEmpty() ? "" : "/" + encodeSegment(subdir.substring(0, subdir.length() - 1));
    String next = base + "/api/models/" + repo + "/tree/" + sha + pathPart + "?recursive=true";
    List<SourceFile> files = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    Set<String> pages = new HashSet<>();
    while (next != null) {
      if (!pages.add(next) || pages.size() > MAX_PAGES) {
        throw new SourceException(
            Reason.InvalidResponse,
            "listing " + description + ": the tree pagination repeats or never ends at " + next,
            false);
      }
      String what = "listing " + description + " at commit " + sha;
      Json page = getJsonWithHeaders(next, what);
      if (!page.body.isArray()) {
        throw new SourceException(
            Reason.InvalidResponse, what + ": a tree page is not a JSON array", false);
      }
      for (JsonNode entry : page.body) {
        SourceFile f = entry(entry, what);
        if (f != null && filter.accepts(f.path())) {
          if (!seen.add(f.path())) {
            throw new SourceException(
                Reason.InvalidResponse, what + ": the tree lists '" + f.path() + "' twice", false);
          }
          files.add(f);
        }
      }
      next = nextLink(page.headers, page.uri, what);
    }
    files.sort(Comparator.comparing(SourceFile::path));
    return List.copyOf(files);
  }

  /** One tree entry as a file, or null for directories. */
  private SourceFile entry(JsonNode entry, String what) throws SourceException {
    JsonNode type = entry.get("type");
    JsonNode path = entry.get("path");
    if (type == null || !type.isTextual() || path == null || !path.isTextual()) {
      throw new SourceException(
          Reason.InvalidResponse,
          what + ": a tree entry lacks 'type' or 'path': " + abbreviate(entry),
          false);
    }
    if (!type.asText().equals("file")) {
      return null; // "directory" (and any future kind) is not a file to load
    }
    String full = path.asText();
    if (!full.startsWith(subdir)) {
      throw new SourceException(
          Reason.InvalidResponse,
          what + ": the tree lists '" + SourcePaths.printable(full) + "' outside " + subdir,
          false);
    }
    String relative = full.substring(subdir.length());
    SourcePaths.requireSafe(relative, description);
    JsonNode size = entry.get("size");
    if (size == null || !size.canConvertToLong() || !size.isIntegralNumber() || size.asLong() < 0) {
      throw new SourceException(
          Reason.InvalidResponse,
          what + ": '" + relative + "' has no valid 'size' (got " + abbreviate(size) + ")",
          false);
    }
    long bytes = size.asLong();
    JsonNode lfs = entry.get("lfs");
    if (lfs != null && !lfs.isNull()) {
      JsonNode oid = lfs.get("oid");
      if (oid == null || !oid.isTextual() || !SHA256.matcher(oid.asText()).matches()) {
        throw new SourceException(
            Reason.InvalidResponse,
            what
                + ": '"
                + relative
                + "' has an lfs.oid that is not a 64-hex sha256: "
                + abbreviate(oid),
            false);
      }
      JsonNode lfsSize = lfs.get("size");
      if (lfsSize != null && lfsSize.canConvertToLong() && lfsSize.asLong() != bytes) {
        throw new SourceException(
            Reason.InvalidResponse,
            what
                + ": '"
                + relative
                + "' has size "
                + bytes
                + " but lfs.size "
                + lfsSize.asLong()
                + "; the listing contradicts itself",
            false);
      }
      return new SourceFile(relative, bytes, oid.asText(), Optional.of(oid.asText()));
    }
    JsonNode oid = entry.get("oid");
    String blob = oid != null && oid.isTextual() ? oid.asText() : "";
    return new SourceFile(relative, bytes, blob, Optional.empty());
  }

  private String nextLink(HttpHeaders headers, URI current, String what) throws SourceException {
    for (String link : headers.allValues("link")) {
      Matcher m = LINK_NEXT.matcher(link);
      if (m.find()) {
        URI next = current.resolve(m.group(1));
        if (!sameOrigin(next, endpoint)) {
          throw new SourceException(
              Reason.InvalidResponse,
              what
                  + ": the next page is on another host ("
                  + next.getHost()
                  + "); refusing to follow a listing off "
                  + endpoint,
              false);
        }
        return next.toString();
      }
    }
    return null;
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    FileSource.checkRange(file, offset, length);
    if (length == 0) {
      return InputStream.nullInputStream();
    }
    SourcePaths.requireSafe(file.path(), description);
    String sha = commit();
    String where = "hf://" + repo + "/" + subdir + file.path() + " at commit " + sha;
    long last = offset + length - 1;
    String range = "bytes=" + offset + "-" + last;
    String asked = "asked for " + range + " of " + where + " (" + file.size() + " bytes)";
    URI uri =
        URI.create(base + "/" + repo + "/resolve/" + sha + "/" + encodePath(subdir + file.path()));
    Exchange<InputStream> x;
    try {
      x = exchange(uri, range, BodyHandlers.ofInputStream(), asked);
    } catch (IOException e) {
      throw transport(asked, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SourceException(Reason.Interrupted, asked + ": interrupted", false, e);
    }
    HttpResponse<InputStream> response = x.last;
    try {
      checkHubHeaders(x.first, file, sha, asked);
      checkRangeResponse(response, file, offset, length, asked);
    } catch (SourceException e) {
      closeQuietly(response.body());
      throw e;
    }
    return new RangeStream(response.body(), length, readTimeout, where);
  }

  /** Identity checks on the Hub's own answer (before any redirect to the CDN). */
  private static void checkHubHeaders(
      HttpResponse<?> hub, SourceFile file, String sha, String asked) throws SourceException {
    if (hub.statusCode() >= 400) {
      return; // mapped with the final answer
    }
    HttpHeaders h = hub.headers();
    Optional<String> repoCommit = h.firstValue("x-repo-commit");
    if (repoCommit.isPresent() && !repoCommit.get().strip().equals(sha)) {
      throw new SourceException(
          Reason.InvalidResponse,
          asked
              + " but the Hub answered for commit "
              + repoCommit.get().strip()
              + " (X-Repo-Commit) instead of the pinned "
              + sha,
          false);
    }
    Optional<String> linkedSize = h.firstValue("x-linked-size");
    if (linkedSize.isPresent()) {
      long size;
      try {
        size = Long.parseLong(linkedSize.get().strip());
      } catch (NumberFormatException e) {
        throw new SourceException(
            Reason.InvalidResponse,
            asked + " but X-Linked-Size is '" + linkedSize.get() + "'",
            false);
      }
      if (size != file.size()) {
        throw new SourceException(
            Reason.ObjectChanged,
            asked
                + " but X-Linked-Size says "
                + size
                + " bytes; the file is no longer the one listed, resolve the artifact again",
            false);
      }
    }
    Optional<String> linkedEtag = h.firstValue("x-linked-etag");
    Optional<String> etag =
        linkedEtag.isPresent()
            ? linkedEtag
            : (hub.statusCode() >= 300 ? Optional.empty() : h.firstValue("etag"));
    if (etag.isPresent() && !file.etag().isEmpty()) {
      String got = S3Source.unquote(etag.get());
      if (!got.equals(file.etag())) {
        throw new SourceException(
            Reason.ObjectChanged,
            asked
                + " but the Hub gives the file the identity "
                + got
                + " ("
                + (linkedEtag.isPresent() ? "X-Linked-Etag" : "ETag")
                + "), listed "
                + file.etag()
                + "; resolve the artifact again",
            false);
      }
    }
  }

  private void checkRangeResponse(
      HttpResponse<InputStream> response, SourceFile file, long offset, long length, String asked)
      throws SourceException {
    int status = response.statusCode();
    HttpHeaders h = response.headers();
    if (status == 200) {
      if (offset != 0 || length != file.size()) {
        throw new SourceException(
            Reason.RangeNotHonored,
            asked
                + " but "
                + response.uri().getHost()
                + " answered 200 with the whole file; a server or proxy ignores Range headers, so"
                + " these bytes are refused",
            false);
      }
    } else if (status == 206) {
      String contentRange = h.firstValue("content-range").orElse(null);
      Matcher m = contentRange == null ? null : CONTENT_RANGE.matcher(contentRange.strip());
      if (m == null || !m.matches()) {
        throw new SourceException(
            Reason.InvalidResponse,
            asked + " but the 206 answer has Content-Range '" + contentRange + "'",
            false);
      }
      String total = m.group(3);
      if (!total.equals("*") && Long.parseLong(total) != file.size()) {
        throw new SourceException(
            Reason.ObjectChanged,
            asked
                + " but Content-Range '"
                + contentRange
                + "' gives the size "
                + total
                + "; the file is no longer the one listed, resolve the artifact again",
            false);
      }
      if (Long.parseLong(m.group(1)) != offset
          || Long.parseLong(m.group(2)) != offset + length - 1
          || total.equals("*")) {
        throw new SourceException(
            Reason.InvalidResponse,
            asked + " but the server sent Content-Range '" + contentRange + "'",
            false);
      }
    } else {
      throw statusFailure(response, asked);
    }
    OptionalLongHeader contentLength = OptionalLongHeader.of(h, "content-length");
    if (contentLength.present && contentLength.value != length) {
      throw new SourceException(
          Reason.InvalidResponse,
          asked
              + " but the answer has Content-Length "
              + contentLength.raw
              + " instead of "
              + length,
          false);
    }
  }

  /** A parsed numeric header. */
  private record OptionalLongHeader(boolean present, long value, String raw) {
    static OptionalLongHeader of(HttpHeaders h, String name) throws SourceException {
      Optional<String> v = h.firstValue(name);
      if (v.isEmpty()) {
        return new OptionalLongHeader(false, 0, null);
      }
      try {
        return new OptionalLongHeader(true, Long.parseLong(v.get().strip()), v.get());
      } catch (NumberFormatException e) {
        throw new SourceException(Reason.InvalidResponse, name + " is '" + v.get() + "'", false);
      }
    }
  }

  /** The Hub's first answer and the final one after redirects. */
  private record Exchange<T>(HttpResponse<?> first, HttpResponse<T> last) {}

  /**
   * Sends a GET, following up to {@link #MAX_REDIRECTS} redirects: the token goes only to the
   * endpoint's origin.
   */
  private <T> Exchange<T> exchange(URI uri, String range, BodyHandler<T> handler, String what)
      throws IOException, InterruptedException, SourceException {
    HttpResponse<?> first = null;
    URI current = uri;
    for (int hop = 0; ; hop++) {
      HttpRequest.Builder request = HttpRequest.newBuilder(current).GET().timeout(requestTimeout);
      request.header("User-Agent", "tensorcast-dataplane");
      if (range != null) {
        request.header("Range", range);
      }
      if (token != null && sameOrigin(current, endpoint)) {
        request.header("Authorization", "Bearer " + token);
      }
      HttpResponse<T> response = http.send(request.build(), redirectsDiscarded(handler));
      if (first == null) {
        first = response;
      }
      int status = response.statusCode();
      boolean redirect =
          status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
      Optional<String> location = response.headers().firstValue("location");
      if (!redirect || location.isEmpty()) {
        return new Exchange<>(first, response);
      }
      if (hop >= MAX_REDIRECTS) {
        throw new SourceException(
            Reason.InvalidResponse,
            what + ": more than " + MAX_REDIRECTS + " redirects (last to " + location.get() + ")",
            false);
      }
      URI next;
      try {
        next = current.resolve(location.get().strip());
      } catch (IllegalArgumentException e) {
        throw new SourceException(
            Reason.InvalidResponse,
            what + ": redirect to an invalid URL '" + location.get() + "'",
            false);
      }
      if (next.getScheme() == null
          || !(next.getScheme().equals("http") || next.getScheme().equals("https"))) {
        throw new SourceException(
            Reason.InvalidResponse,
            what + ": redirect to a non-HTTP URL '" + location.get() + "'",
            false);
      }
      EndpointPolicy.checkHost(next, what + ": redirect to");
      current = next;
    }
  }

  @SuppressWarnings("unchecked")
  private static <T> BodyHandler<T> redirectsDiscarded(BodyHandler<T> handler) {
    return info -> {
      int s = info.statusCode();
      if ((s >= 300 && s < 400) && info.headers().firstValue("location").isPresent()) {
        return BodySubscribers.replacing((T) null);
      }
      return handler.apply(info);
    };
  }

  private record Json(JsonNode body, HttpHeaders headers, URI uri) {}

  private JsonNode getJson(String url, String what) throws SourceException {
    return getJsonWithHeaders(url, what).body;
  }

  /** A metadata GET with bounded retries; 2xx bodies parsed as JSON (duplicate keys refused). */
  private Json getJsonWithHeaders(String url, String what) throws SourceException {
    URI uri = URI.create(url);
    for (int attempt = 1; ; attempt++) {
      SourceException failure;
      try {
        Exchange<byte[]> x = exchange(uri, null, BodyHandlers.ofByteArray(), what);
        HttpResponse<byte[]> r = x.last;
        if (r.statusCode() == 200) {
          try {
            return new Json(JSON.readTree(r.body()), r.headers(), r.uri());
          } catch (JsonProcessingException e) {
            throw new SourceException(
                Reason.InvalidResponse,
                what
                    + ": the answer of "
                    + r.uri()
                    + " is not valid JSON: "
                    + e.getOriginalMessage(),
                false,
                e);
          } catch (IOException e) {
            throw new SourceException(Reason.InvalidResponse, what + ": " + e, false, e);
          }
        }
        failure = statusFailure(r, what);
      } catch (IOException e) {
        failure = transport(what, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SourceException(Reason.Interrupted, what + ": interrupted", false, e);
      }
      if (!failure.retryable()
          || attempt >= listMaxAttempts
          || (!throttledRetriesInPlace && failure.reason() == Reason.Throttled)) {
        throw failure;
      }
      Duration retryAfter = failure.retryAfter().orElse(null);
      if (!BACKOFF.honours(retryAfter)) {
        throw failure; // the server asked for a longer wait than a listing call may take
      }
      Duration wait = BACKOFF.delay(attempt, retryAfter);
      try {
        Thread.sleep(wait.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SourceException(Reason.Interrupted, what + ": interrupted", false, e);
      }
    }
  }

  private SourceException transport(String what, IOException e) {
    boolean timeout = e instanceof HttpTimeoutException;
    return new SourceException(
        Reason.SourceUnavailable,
        what + ": " + (timeout ? "timed out after " + requestTimeout + ": " : "") + e,
        true,
        null,
        e);
  }

  /** Maps a non-2xx answer to a reason (see the class comment). */
  SourceException statusFailure(HttpResponse<?> r, String what) {
    int status = r.statusCode();
    HttpHeaders h = r.headers();
    String code = h.firstValue("x-error-code").map(String::strip).orElse(null);
    String message = h.firstValue("x-error-message").map(String::strip).orElse(null);
    if (message == null && r.body() instanceof byte[] body && body.length > 0) {
      message = new String(body, 0, Math.min(body.length, 300), StandardCharsets.UTF_8).strip();
    }
    String detail =
        " (HTTP "
            + status
            + (code != null ? " " + code : "")
            + (message != null && !message.isEmpty() ? ": " + message : "")
            + " from "
            + r.uri().getHost()
            + ")";
    Duration retryAfter = retryAfter(h);
    if ("GatedRepo".equals(code)) {
      return new SourceException(
          Reason.GatedRepo,
          what
              + ": the repository is gated"
              + detail
              + "; accept its conditions on the Hub with the account whose token is used"
              + (token == null ? ", and set HF_TOKEN (or the artifact's credentials)" : ""),
          false);
    }
    if (status == 401) {
      return new SourceException(
          Reason.Unauthorized,
          what
              + ": the Hub requires authentication"
              + detail
              + (token == null
                  ? "; no token was sent: set HF_TOKEN (or the artifact's credentialsSecretRef) to"
                      + " a token that can read "
                      + repo
                  : "; the token that was sent is invalid or cannot read " + repo),
          false);
    }
    if ("RepoNotFound".equals(code)) {
      return new SourceException(
          Reason.RepoNotFound,
          what + ": the repository " + repo + " does not exist" + detail,
          false);
    }
    if ("RevisionNotFound".equals(code)) {
      return new SourceException(
          Reason.RevisionNotFound,
          what + ": the revision '" + revision + "' does not exist in " + repo + detail,
          false);
    }
    if ("EntryNotFound".equals(code)) {
      return new SourceException(Reason.EntryNotFound, what + ": no such file" + detail, false);
    }
    if (status == 403) {
      return new SourceException(
          Reason.AccessDenied,
          what + ": access denied" + detail + "; check that the token can read " + repo,
          false);
    }
    if (status == 404) {
      return new SourceException(Reason.SourceNotFound, what + ": not found" + detail, false);
    }
    if (status == 412 || status == 416) {
      return new SourceException(
          Reason.ObjectChanged,
          what + ": the file is no longer the one listed" + detail + "; resolve the artifact again",
          false);
    }
    if (status == 429) {
      return new SourceException(
          Reason.Throttled, what + ": rate limited by the Hub" + detail, true, retryAfter, null);
    }
    if (status >= 500 || status == 408) {
      return new SourceException(
          Reason.SourceUnavailable, what + ": the server failed" + detail, true, retryAfter, null);
    }
    if (status >= 300 && status < 400) {
      return new SourceException(
          Reason.InvalidResponse, what + ": a redirect without a Location header" + detail, false);
    }
    return new SourceException(Reason.SourceRequestRejected, what + ": rejected" + detail, false);
  }

  /** {@code Retry-After} as delta-seconds or an HTTP-date ({@link Backoff#parseRetryAfter}). */
  static Duration retryAfter(HttpHeaders h) {
    return h.firstValue("retry-after").flatMap(Backoff::parseRetryAfter).orElse(null);
  }

  static boolean sameOrigin(URI a, URI b) {
    return Objects.equals(lower(a.getScheme()), lower(b.getScheme()))
        && Objects.equals(lower(a.getHost()), lower(b.getHost()))
        && port(a) == port(b);
  }

  private static String lower(String s) {
    return s == null ? null : s.toLowerCase(Locale.ROOT);
  }

  private static int port(URI u) {
    if (u.getPort() >= 0) {
      return u.getPort();
    }
    return "https".equalsIgnoreCase(u.getScheme()) ? 443 : 80;
  }

  /** Percent-encodes one path segment, {@code /} included (RFC 3986 unreserved kept). */
  static String encodeSegment(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8)
        .replace("+", "%20")
        .replace("%7E", "~")
        .replace("*", "%2A");
  }

  /** Percent-encodes each segment of a '/'-separated path. */
  static String encodePath(String path) {
    StringBuilder out = new StringBuilder();
    for (String segment : path.split("/", -1)) {
      if (out.length() > 0) {
        out.append('/');
      }
      out.append(encodeSegment(segment));
    }
    return out.toString();
  }

  private static String abbreviate(Object o) {
    String s = String.valueOf(o);
    return s.length() > 200 ? s.substring(0, 200) + "…" : s;
  }

  private static void closeQuietly(InputStream in) {
    try {
      in.close();
    } catch (IOException ignored) {
      // refused anyway; the refusal is what matters
    }
  }

  @Override
  public PathFilter filter() {
    return filter;
  }

  @Override
  public String describe() {
    return description;
  }

  @Override
  public void close() {
    // HttpClient (Java 17) has no close; its connections end with the client.
  }

  /**
   * A response body capped at the range's length; closing early drops the connection. A read that
   * gets no byte within the read timeout closes the body and fails with an {@link IOException}, so
   * the reader resumes instead of waiting forever.
   */
  private static final class RangeStream extends RangeInputStream {
    private final InputStream in;
    private final Duration readTimeout;
    private final String where;
    private volatile boolean timedOut;

    RangeStream(InputStream in, long length, Duration readTimeout, String where) {
      super(length);
      this.in = in;
      this.readTimeout = readTimeout;
      this.where = where;
    }

    @Override
    protected int readBody(byte[] b, int off, int len) throws IOException {
      ScheduledFuture<?> watchdog =
          WATCHDOG.schedule(this::expire, readTimeout.toMillis(), TimeUnit.MILLISECONDS);
      int n;
      try {
        n = in.read(b, off, len);
      } catch (IOException e) {
        throw timedOut ? timeout(e) : e;
      } finally {
        watchdog.cancel(false);
      }
      if (timedOut) {
        throw timeout(null);
      }
      return n;
    }

    private void expire() {
      timedOut = true;
      closeQuietly(in);
    }

    private IOException timeout(IOException cause) {
      return new IOException(
          "no bytes of " + where + " for " + readTimeout + " (read timeout); connection closed",
          cause);
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }
}
