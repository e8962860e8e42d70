package io.tensorcast.testing;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A local stand-in for the Hugging Face Hub, speaking the Hub's download and upload protocol as
 * listed below: two real HTTP servers, the Hub on 127.0.0.1 and an "LFS CDN" on 127.0.0.2, each on
 * a random port.
 *
 * <p>Hub routes:
 *
 * <ul>
 *   <li>{@code GET /api/models/{org}/{repo}/revision/{rev}} — {@code id}, {@code sha}, {@code
 *       private}, {@code gated}, {@code siblings} ({@code rfilename}); the revision is one
 *       URL-encoded segment ({@code refs%2Fpr%2F1}) and may be a branch, tag, PR ref or a commit
 *       sha.
 *   <li>{@code GET /api/models/{org}/{repo}/tree/{rev}[/{path}][?recursive=true][&cursor=N]} —
 *       entries {@code {type, oid, size, path[, lfs:{oid,size,pointerSize}]}}, {@link #pageSize}
 *       entries per page, the next page in {@code Link: <…>; rel="next"}.
 *   <li>{@code HEAD|GET /{org}/{repo}/resolve/{rev}/{path}} — {@code X-Repo-Commit}, {@code ETag};
 *       LFS files ({@code *.safetensors}) answer 302 to the CDN with {@code X-Linked-Etag} (the
 *       sha256) and {@code X-Linked-Size}; git files (everything else) answer with the bytes
 *       ({@code Range} honoured, ETag = the git blob sha1).
 *   <li>Errors carry {@code X-Error-Code} ({@code RepoNotFound}, {@code RevisionNotFound}, {@code
 *       EntryNotFound}, {@code GatedRepo}) and {@code X-Error-Message}. A private repository
 *       answers 401 {@code RepoNotFound} without its token, as the Hub does; a gated one 403 {@code
 *       GatedRepo}. A renamed repository answers 307 with a relative {@code Location}.
 * </ul>
 *
 * <p>CDN route: {@code GET /lfs/{sha256}?…} with {@code Range}; like a presigned object-store URL
 * it refuses requests that carry an {@code Authorization} header (400).
 *
 * <p>Upload routes, as the {@code huggingface_hub} client's {@code create_commit} uses them (a
 * repository written to needs a write token: {@link Repo#writableWithToken}; without a token 401,
 * with another one 403):
 *
 * <ul>
 *   <li>{@code POST /api/models/{org}/{repo}/preupload/{rev}} {@code {"files": [{"path", "sample",
 *       "size"}]}} → {@code {"files": [{"path", "uploadMode": "lfs"|"regular", "shouldIgnore":
 *       false}]}}: {@code *.safetensors} and files over 10 MB go to LFS.
 *   <li>{@code POST /{org}/{repo}.git/info/lfs/objects/batch} (git-lfs batch API, {@code
 *       application/vnd.git-lfs+json}, {@code operation: upload}): an object the store has gets no
 *       {@code actions}; others an {@code upload} action: {@code basic} (one presigned {@code PUT}
 *       on the CDN) up to {@link #multipart}'s threshold, else {@code multipart} ({@code
 *       header.chunk_size} and one presigned URL per chunk, {@code "00001"}…, then the {@code href}
 *       completion URL, {@code POST {"oid", "parts": [{"partNumber", "etag"}]}} without
 *       Authorization); plus a {@code verify} action.
 *   <li>CDN {@code PUT /upload/{sha256}[/{part}]?sig=…}: stores the bytes (refuses {@code
 *       Authorization}); a completed multipart object or a basic one must hash to its oid (else
 *       400).
 *   <li>{@code POST /api/models/{org}/{repo}/commit/{rev}} ({@code application/x-ndjson}: a {@code
 *       header}, then {@code file} (base64 content) and {@code lfsFile} (oid, size) lines): one new
 *       commit on top of the revision with every file, or 400/404 and nothing.
 * </ul>
 *
 * <p>Faults ({@link Fault}): N answers of a status with {@code Retry-After}; N bodies cut after K
 * bytes (the connection is dropped); a wrong advertised sha256 for a file (tree {@code lfs.oid} and
 * {@code X-Linked-Etag} both); a wrong {@code X-Linked-Etag} only. Every request is recorded with
 * its {@code Authorization} and {@code Range} headers. No {@code X-Xet-*} header is ever sent.
 */
public final class HubStandIn implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern RANGE = Pattern.compile("bytes=(\\d*)-(\\d*)");

  /** Which listener a fault or record belongs to. */
  public enum Target {
    /** {@code /api/...} on the Hub. */
    API,
    /** The git-lfs batch, completion and verify routes on the Hub. */
    LFS,
    /** {@code /{repo}/resolve/...} on the Hub. */
    RESOLVE,
    /** The LFS CDN host. */
    CDN
  }

  /** One request as received. */
  public record Request(
      Target target,
      String method,
      String path,
      Optional<String> authorization,
      Optional<String> range) {}

  /** Thrown out of a handler to drop the connection mid-body. */
  private static final class CutConnection extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CutConnection() {
      super("body cut on purpose", null, false, false);
    }
  }

  private record Failure(int status, Duration retryAfter, AtomicInteger remaining) {}

  private record Cut(long afterBytes, AtomicInteger remaining, Duration stall) {}

  /** A file's content and identities. */
  private record Blob(byte[] bytes, String sha256, String gitSha1, boolean lfs) {}

  /** One commit: path → blob. */
  private record Commit(String sha, Map<String, Blob> files) {}

  /** A repository: refs and commits. */
  public final class Repo {
    private final String id;
    private final Map<String, String> refs = new ConcurrentHashMap<>();
    private final Map<String, Commit> commits = new ConcurrentHashMap<>();
    private volatile String token;
    private volatile String writeToken;
    private volatile boolean gated;

    private Repo(String id) {
      this.id = id;
    }

    /**
     * Adds a commit holding these files (repo path → local file, read now) and points {@code main}
     * at it. {@code *.safetensors} are stored as LFS files, the rest as git blobs.
     *
     * @return the commit sha (40 hex)
     */
    public String commit(Map<String, Path> files) {
      Map<String, Blob> blobs = new TreeMap<>();
      MessageDigest md = sha1();
      for (Map.Entry<String, Path> e : new TreeMap<>(files).entrySet()) {
        byte[] bytes;
        try {
          bytes = Files.readAllBytes(e.getValue());
        } catch (IOException ex) {
          throw new UncheckedIOException(ex);
        }
        Blob blob = blob(bytes, e.getKey().endsWith(".safetensors"));
        blobs.put(e.getKey(), blob);
        md.update((e.getKey() + "\0" + blob.gitSha1 + "\n").getBytes(StandardCharsets.UTF_8));
      }
      md.update((id + "\0" + commits.size()).getBytes(StandardCharsets.UTF_8));
      String sha = HexFormat.of().formatHex(md.digest());
      commits.put(sha, new Commit(sha, blobs));
      refs.put("main", sha);
      return sha;
    }

    /** Points a branch, tag or ref ({@code refs/pr/1}) at a commit. */
    public Repo ref(String name, String sha) {
      if (!commits.containsKey(sha)) {
        throw new IllegalArgumentException("no commit " + sha + " in " + id);
      }
      refs.put(name, sha);
      return this;
    }

    /** Makes the repository private: only requests with {@code Bearer token} see it. */
    public Repo privateWithToken(String token) {
      this.token = token;
      return this;
    }

    /** Lets requests with {@code Bearer token} commit to the repository (and only them). */
    public Repo writableWithToken(String token) {
      this.writeToken = token;
      return this;
    }

    /** The bytes of {@code path} at revision {@code rev} (a ref or commit), or null. */
    public byte[] file(String rev, String path) {
      String sha = refs.getOrDefault(rev, rev);
      Commit c = commits.get(sha);
      Blob b = c == null ? null : c.files.get(path);
      return b == null ? null : b.bytes.clone();
    }

    /** The paths at revision {@code rev}. */
    public Set<String> files(String rev) {
      Commit c = commits.get(refs.getOrDefault(rev, rev));
      return c == null ? Set.of() : Set.copyOf(c.files.keySet());
    }

    /** Number of commits. */
    public int commits() {
      return commits.size();
    }

    /** Makes the repository gated: every file read answers 403 GatedRepo. */
    public Repo gated() {
      this.gated = true;
      return this;
    }

    /** The sha256 of a file of a commit, as the bytes give it. */
    public String sha256(String sha, String path) {
      return commits.get(sha).files.get(path).sha256;
    }
  }

  private final HttpServer hub;
  private final HttpServer cdn;
  private final ExecutorService executor =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "hub-stand-in");
            t.setDaemon(true);
            return t;
          });
  private final Map<String, Repo> repos = new ConcurrentHashMap<>();
  private final Map<String, String> renamed = new ConcurrentHashMap<>();
  private final Map<String, byte[]> lfsStore = new ConcurrentHashMap<>();
  private final Set<String> wrongOid = ConcurrentHashMap.newKeySet();
  private final Set<String> wrongGitOid = ConcurrentHashMap.newKeySet();
  private final Set<String> wrongLinkedEtag = ConcurrentHashMap.newKeySet();
  private final Map<Target, Failure> failures = new ConcurrentHashMap<>();
  private final Map<Target, Cut> cuts = new ConcurrentHashMap<>();
  private final List<Request> requests = new CopyOnWriteArrayList<>();
  private final AtomicLong bodyBytes = new AtomicLong();
  private final AtomicLong uploadedBytes = new AtomicLong();
  private final Map<String, Map<Integer, byte[]>> parts = new ConcurrentHashMap<>();
  private final String signature =
      Long.toHexString(java.util.concurrent.ThreadLocalRandom.current().nextLong());
  private volatile long multipartThreshold = 16L << 20;
  private volatile long chunkSize = 8L << 20;
  private volatile int pageSize = 3;

  private HubStandIn() throws IOException {
    hub = HttpServer.create(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), 64);
    cdn = HttpServer.create(new InetSocketAddress(InetAddress.getByName("127.0.0.2"), 0), 64);
    hub.createContext("/", this::handleHub);
    cdn.createContext("/", this::handleCdn);
    hub.setExecutor(executor);
    cdn.setExecutor(executor);
    hub.start();
    cdn.start();
  }

  /** Starts both listeners. */
  public static HubStandIn start() throws IOException {
    return new HubStandIn();
  }

  /** {@code http://127.0.0.1:<port>}: the Hub endpoint. */
  public URI endpoint() {
    return URI.create("http://127.0.0.1:" + hub.getAddress().getPort());
  }

  /** {@code http://127.0.0.2:<port>}: the LFS CDN. */
  public URI cdnEndpoint() {
    return URI.create("http://127.0.0.2:" + cdn.getAddress().getPort());
  }

  /** Creates (or returns) a repository {@code org/name}. */
  public Repo repo(String id) {
    return repos.computeIfAbsent(id, Repo::new);
  }

  /** Renames a repository: requests to the old id are redirected (307, relative Location). */
  public void rename(String from, String to) {
    Repo r = repos.remove(from);
    if (r == null) {
      throw new IllegalArgumentException("no repo " + from);
    }
    repos.put(to, r);
    renamed.put(from, to);
  }

  /**
   * LFS uploads larger than {@code threshold} bytes use the multipart transfer with chunks of
   * {@code chunk} bytes (defaults 16 MiB and 8 MiB).
   */
  public HubStandIn multipart(long threshold, long chunk) {
    this.multipartThreshold = threshold;
    this.chunkSize = chunk;
    return this;
  }

  /** Bytes received by the CDN's upload route (basic and multipart), so far. */
  public long uploadedBytes() {
    return uploadedBytes.get();
  }

  /** Entries per tree page (default 3, so listings paginate). */
  public HubStandIn pageSize(int n) {
    this.pageSize = n;
    return this;
  }

  /** Fault: the next {@code count} requests to {@code target} answer {@code status}. */
  public HubStandIn fail(Target target, int status, int count, Duration retryAfter) {
    failures.put(target, new Failure(status, retryAfter, new AtomicInteger(count)));
    return this;
  }

  /**
   * Fault: the next {@code count} bodies from {@code target} longer than {@code bytes} stop after
   * {@code bytes} bytes and the connection is dropped.
   */
  public HubStandIn cutBodyAfter(Target target, long bytes, int count) {
    cuts.put(target, new Cut(bytes, new AtomicInteger(count), null));
    return this;
  }

  /**
   * Fault: the next {@code count} bodies from {@code target} longer than {@code bytes} send {@code
   * bytes} bytes, then nothing for {@code stall}, then the connection is dropped.
   */
  public HubStandIn stallBodyAfter(Target target, long bytes, int count, Duration stall) {
    cuts.put(target, new Cut(bytes, new AtomicInteger(count), stall));
    return this;
  }

  /**
   * Fault: the tree's {@code lfs.oid} and {@code X-Linked-Etag} of this path are a wrong sha256.
   */
  public HubStandIn advertiseWrongSha256(String path) {
    wrongOid.add(path);
    return this;
  }

  /**
   * Fault: the tree's {@code oid} and the {@code ETag} of this plain git file are the git blob id
   * of other content (consistently, so reads pass and only the content check can tell).
   */
  public HubStandIn advertiseWrongGitOid(String path) {
    wrongGitOid.add(path);
    return this;
  }

  /** Fault: only {@code X-Linked-Etag} of this path is wrong (the tree is right). */
  public HubStandIn wrongLinkedEtag(String path) {
    wrongLinkedEtag.add(path);
    return this;
  }

  /** Every request received, in order. */
  public List<Request> requests() {
    return List.copyOf(requests);
  }

  /** The requests to one listener. */
  public List<Request> requests(Target target) {
    return requests.stream().filter(r -> r.target == target).toList();
  }

  /** Clears faults and the request record. */
  public HubStandIn reset() {
    failures.clear();
    cuts.clear();
    wrongOid.clear();
    wrongGitOid.clear();
    wrongLinkedEtag.clear();
    requests.clear();
    return this;
  }

  @Override
  public void close() {
    hub.stop(0);
    cdn.stop(0);
    executor.shutdownNow();
  }

  // ---- handlers ----

  private void handleHub(HttpExchange x) throws IOException {
    try (x) {
      String raw = x.getRequestURI().getRawPath();
      Target target =
          raw.contains(".git/info/lfs/")
              ? Target.LFS
              : raw.startsWith("/api/") ? Target.API : Target.RESOLVE;
      record(x, target);
      if (injectFailure(x, target)) {
        return;
      }
      if (target == Target.LFS) {
        lfs(x, raw);
      } else if (target == Target.API
          && raw.matches("/api/models/[^/]+/[^/]+/(preupload|commit)/.*")) {
        upload(x, raw);
      } else if (target == Target.API) {
        api(x, raw);
      } else {
        resolve(x, raw);
      }
    } catch (CutConnection cut) {
      throw cut;
    } catch (RuntimeException e) {
      error(x, 500, null, "stand-in failure: " + e);
    }
  }

  private void handleCdn(HttpExchange x) throws IOException {
    try (x) {
      record(x, Target.CDN);
      if (injectFailure(x, Target.CDN)) {
        return;
      }
      if (x.getRequestHeaders().getFirst("Authorization") != null) {
        // A presigned object-store URL refuses a second auth mechanism.
        error(x, 400, null, "Only one auth mechanism allowed; the Authorization header is refused");
        return;
      }
      String raw = x.getRequestURI().getRawPath();
      if (raw.startsWith("/upload/") && x.getRequestMethod().equals("PUT")) {
        cdnUpload(x, raw);
        return;
      }
      if (!raw.startsWith("/lfs/")) {
        error(x, 404, null, "no such object");
        return;
      }
      byte[] bytes = lfsStore.get(raw.substring("/lfs/".length()));
      if (bytes == null) {
        error(x, 404, null, "no such object");
        return;
      }
      String sha = raw.substring("/lfs/".length());
      x.getResponseHeaders().set("ETag", '"' + sha + '"');
      sendBytes(x, bytes, Target.CDN);
    }
  }

  private void record(HttpExchange x, Target target) {
    Headers h = x.getRequestHeaders();
    requests.add(
        new Request(
            target,
            x.getRequestMethod(),
            x.getRequestURI().toString(),
            Optional.ofNullable(h.getFirst("Authorization")),
            Optional.ofNullable(h.getFirst("Range"))));
  }

  private boolean injectFailure(HttpExchange x, Target target) throws IOException {
    Failure f = failures.get(target);
    if (f != null && f.remaining.getAndDecrement() > 0) {
      if (f.retryAfter != null) {
        x.getResponseHeaders().set("Retry-After", Long.toString(f.retryAfter.toSeconds()));
      }
      error(x, f.status, null, "injected failure " + f.status);
      return true;
    }
    return false;
  }

  /** Splits {@code /…/{org}/{repo}/rest} after a route prefix; resolves renames and access. */
  private record Located(Repo repo, String repoId, String rest) {}

  private Located locate(HttpExchange x, String afterPrefix, String routePrefix, String verb)
      throws IOException {
    String[] parts = afterPrefix.split("/", 4);
    if (parts.length < 3 || !parts[2].equals(verb)) {
      error(x, 404, null, "unknown route");
      return null;
    }
    String id = decode(parts[0]) + "/" + decode(parts[1]);
    String rest = parts.length == 4 ? parts[3] : "";
    if (renamed.containsKey(id)) {
      String to = renamed.get(id);
      String query = x.getRequestURI().getRawQuery();
      x.getResponseHeaders()
          .set(
              "Location",
              routePrefix + to + "/" + verb + "/" + rest + (query != null ? "?" + query : ""));
      x.sendResponseHeaders(307, -1);
      return null;
    }
    Repo repo = repos.get(id);
    String auth = x.getRequestHeaders().getFirst("Authorization");
    if (repo == null || (repo.token != null && !("Bearer " + repo.token).equals(auth))) {
      // The Hub answers 401 without a token, 404 with one, for a missing repository and for a
      // private one the caller cannot read alike.
      error(
          x,
          auth == null ? 401 : 404,
          "RepoNotFound",
          "Repository Not Found for url: "
              + x.getRequestURI()
              + ". Please make sure you specified the correct `repo_id` and `repo_type`. If you"
              + " are trying to access a private or gated repo, make sure you are authenticated.");
      return null;
    }
    return new Located(repo, id, rest);
  }

  private Commit commitOf(HttpExchange x, Repo repo, String revision) throws IOException {
    String sha = repo.refs.get(revision);
    if (sha == null && repo.commits.containsKey(revision)) {
      sha = revision;
    }
    if (sha == null) {
      error(x, 404, "RevisionNotFound", "Invalid rev id: " + revision);
      return null;
    }
    return repo.commits.get(sha);
  }

  private void api(HttpExchange x, String raw) throws IOException {
    if (!raw.startsWith("/api/models/")) {
      error(x, 404, null, "unknown route");
      return;
    }
    String after = raw.substring("/api/models/".length());
    String verb = after.split("/", 4).length >= 3 ? after.split("/", 4)[2] : "";
    if (!verb.equals("revision") && !verb.equals("tree")) {
      error(x, 404, null, "unknown route");
      return;
    }
    Located loc = locate(x, after, "/api/models/", verb);
    if (loc == null) {
      return;
    }
    int slash = loc.rest.indexOf('/');
    String revRaw = slash < 0 ? loc.rest : loc.rest.substring(0, slash);
    String revision = decode(revRaw);
    Commit commit = commitOf(x, loc.repo, revision);
    if (commit == null) {
      return;
    }
    if (verb.equals("revision")) {
      ObjectNode info = JSON.createObjectNode();
      info.put("_id", loc.repoId.replace('/', '_'));
      info.put("id", loc.repoId);
      info.put("modelId", loc.repoId);
      info.put("sha", commit.sha);
      info.put("private", loc.repo.token != null);
      if (loc.repo.gated) {
        info.put("gated", "auto");
      } else {
        info.put("gated", false);
      }
      ArrayNode siblings = info.putArray("siblings");
      commit.files.keySet().forEach(p -> siblings.addObject().put("rfilename", p));
      sendJson(x, info, null);
      return;
    }
    String dir = slash < 0 ? "" : decode(loc.rest.substring(slash + 1));
    if (dir.endsWith("/")) {
      dir = dir.substring(0, dir.length() - 1);
    }
    Map<String, String> query = query(x.getRequestURI().getRawQuery());
    boolean recursive = "true".equals(query.get("recursive"));
    List<ObjectNode> entries = treeEntries(commit, dir, recursive);
    if (entries == null) {
      error(x, 404, "EntryNotFound", dir + " does not exist on \"" + revision + "\"");
      return;
    }
    int cursor = Integer.parseInt(query.getOrDefault("cursor", "0"));
    int end = Math.min(entries.size(), cursor + pageSize);
    ArrayNode page = JSON.createArrayNode();
    entries.subList(cursor, end).forEach(page::add);
    String link = null;
    if (end < entries.size()) {
      link =
          "<"
              + endpoint()
              + raw
              + "?recursive="
              + recursive
              + "&expand=false&cursor="
              + end
              + ">; rel=\"next\"";
    }
    sendJson(x, page, link);
  }

  private List<ObjectNode> treeEntries(Commit commit, String dir, boolean recursive) {
    String prefix = dir.isEmpty() ? "" : dir + "/";
    Map<String, ObjectNode> out = new TreeMap<>();
    boolean found = dir.isEmpty();
    for (Map.Entry<String, Blob> e : commit.files.entrySet()) {
      String path = e.getKey();
      if (!path.startsWith(prefix)) {
        continue;
      }
      found = true;
      String rel = path.substring(prefix.length());
      String[] segs = rel.split("/");
      // directories on the way
      StringBuilder d = new StringBuilder(prefix);
      for (int i = 0; i < segs.length - 1; i++) {
        d.append(segs[i]);
        if (recursive || i == 0) {
          String dp = d.toString();
          ObjectNode dn = JSON.createObjectNode();
          dn.put("type", "directory");
          dn.put("oid", gitSha1(dp.getBytes(StandardCharsets.UTF_8)));
          dn.put("size", 0);
          dn.put("path", dp);
          out.putIfAbsent(dp, dn);
        }
        d.append('/');
      }
      if (!recursive && segs.length > 1) {
        continue;
      }
      Blob b = e.getValue();
      ObjectNode n = JSON.createObjectNode();
      n.put("type", "file");
      n.put("oid", advertisedGitSha1(path, b));
      n.put("size", b.bytes.length);
      n.put("path", path);
      if (b.lfs) {
        ObjectNode lfs = n.putObject("lfs");
        lfs.put("oid", advertisedSha256(path, b));
        lfs.put("size", b.bytes.length);
        lfs.put("pointerSize", pointer(b).length);
      }
      out.put(path, n);
    }
    return found ? new ArrayList<>(out.values()) : null;
  }

  private String advertisedGitSha1(String path, Blob b) {
    return wrongGitOid.contains(path) && !b.lfs
        ? gitSha1(("not the content of " + path).getBytes(StandardCharsets.UTF_8))
        : b.gitSha1;
  }

  private String advertisedSha256(String path, Blob b) {
    if (!wrongOid.contains(path)) {
      return b.sha256;
    }
    return sha256Hex(("not the content of " + path).getBytes(StandardCharsets.UTF_8));
  }

  private void resolve(HttpExchange x, String raw) throws IOException {
    String after = raw.substring(1);
    Located loc = locate(x, after, "/", "resolve");
    if (loc == null) {
      return;
    }
    int slash = loc.rest.indexOf('/');
    if (slash < 0) {
      error(x, 404, "EntryNotFound", "no file given");
      return;
    }
    String revision = decode(loc.rest.substring(0, slash));
    Commit commit = commitOf(x, loc.repo, revision);
    if (commit == null) {
      return;
    }
    String path = decodePath(loc.rest.substring(slash + 1));
    Blob blob = commit.files.get(path);
    if (blob == null) {
      error(x, 404, "EntryNotFound", path + " does not exist on \"" + revision + "\"");
      return;
    }
    if (loc.repo.gated) {
      error(
          x,
          403,
          "GatedRepo",
          "Access to model "
              + loc.repoId
              + " is restricted and you are not in the authorized list. Visit"
              + " https://huggingface.co/"
              + loc.repoId
              + " to ask for access.");
      return;
    }
    Headers h = x.getResponseHeaders();
    h.set("X-Repo-Commit", commit.sha);
    h.set("Accept-Ranges", "bytes");
    if (blob.lfs) {
      String linked =
          wrongLinkedEtag.contains(path)
              ? sha256Hex(("other " + path).getBytes(StandardCharsets.UTF_8))
              : advertisedSha256(path, blob);
      h.set("X-Linked-Etag", '"' + linked + '"');
      h.set("X-Linked-Size", Integer.toString(blob.bytes.length));
      h.set("ETag", '"' + linked + '"');
      h.set(
          "Location",
          cdnEndpoint()
              + "/lfs/"
              + blob.sha256
              + "?X-Amz-Expires=3600&response-content-disposition="
              + URLEncoder.encode("inline; filename=\"" + path + "\"", StandardCharsets.UTF_8));
      x.sendResponseHeaders(302, -1);
      return;
    }
    h.set("ETag", '"' + advertisedGitSha1(path, blob) + '"');
    h.set("Content-Type", "text/plain; charset=utf-8");
    sendBytes(x, blob.bytes, Target.RESOLVE);
  }

  // ---- uploads ----

  private static final Pattern UPLOAD_ROUTE =
      Pattern.compile("/api/models/([^/]+)/([^/]+)/(preupload|commit)/(.+)");

  /** Resolves the repository of a write route and checks the write token; null when answered. */
  private Repo writable(HttpExchange x, String org, String name) throws IOException {
    String id = decode(org) + "/" + decode(name);
    Repo repo = repos.get(id);
    String auth = x.getRequestHeaders().getFirst("Authorization");
    if (auth == null) {
      error(x, 401, null, "Invalid credentials in Authorization header");
      return null;
    }
    if (repo == null) {
      error(x, 404, "RepoNotFound", "Repository Not Found for url: " + x.getRequestURI() + ".");
      return null;
    }
    if (repo.writeToken == null || !("Bearer " + repo.writeToken).equals(auth)) {
      error(
          x,
          403,
          null,
          "You don't have the rights to create a commit in "
              + id
              + ": the token has no write access to it");
      return null;
    }
    return repo;
  }

  private void upload(HttpExchange x, String raw) throws IOException {
    Matcher m = UPLOAD_ROUTE.matcher(raw);
    if (!m.matches() || !x.getRequestMethod().equals("POST")) {
      error(x, 404, null, "unknown route");
      return;
    }
    Repo repo = writable(x, m.group(1), m.group(2));
    if (repo == null) {
      return;
    }
    String revision = decode(m.group(4));
    byte[] body = x.getRequestBody().readAllBytes();
    if (m.group(3).equals("preupload")) {
      com.fasterxml.jackson.databind.JsonNode req = JSON.readTree(body);
      ObjectNode out = JSON.createObjectNode();
      ArrayNode files = out.putArray("files");
      for (com.fasterxml.jackson.databind.JsonNode f : req.path("files")) {
        String path = f.path("path").asText();
        boolean lfs = path.endsWith(".safetensors") || f.path("size").asLong() > 10_000_000L;
        files
            .addObject()
            .put("path", path)
            .put("uploadMode", lfs ? "lfs" : "regular")
            .put("shouldIgnore", false);
      }
      sendJson(x, out, null);
      return;
    }
    String parent = repo.refs.get(revision);
    if (parent == null) {
      error(x, 404, "RevisionNotFound", "Invalid rev id: " + revision);
      return;
    }
    if (!"application/x-ndjson".equals(x.getRequestHeaders().getFirst("Content-Type"))) {
      error(x, 400, null, "commit payloads are application/x-ndjson");
      return;
    }
    Map<String, Blob> files = new TreeMap<>(repo.commits.get(parent).files);
    boolean header = false;
    for (String line : new String(body, StandardCharsets.UTF_8).split("\n")) {
      if (line.isBlank()) {
        continue;
      }
      com.fasterxml.jackson.databind.JsonNode op = JSON.readTree(line);
      com.fasterxml.jackson.databind.JsonNode v = op.path("value");
      switch (op.path("key").asText()) {
        case "header" -> header = true;
        case "file" -> {
          byte[] content = java.util.Base64.getDecoder().decode(v.path("content").asText());
          files.put(v.path("path").asText(), blob(content, false));
        }
        case "lfsFile" -> {
          byte[] content = lfsStore.get(v.path("oid").asText());
          if (content == null || content.length != v.path("size").asLong()) {
            error(
                x,
                400,
                null,
                "lfsFile "
                    + v.path("path").asText()
                    + ": LFS object "
                    + v.path("oid").asText()
                    + " was not uploaded (or has another size)");
            return;
          }
          files.put(v.path("path").asText(), blob(content, true));
        }
        case "deletedFile" -> files.remove(v.path("path").asText());
        default -> {
          error(x, 400, null, "unknown commit operation " + op.path("key"));
          return;
        }
      }
    }
    if (!header) {
      error(x, 400, null, "the commit payload has no header line");
      return;
    }
    MessageDigest md = sha1();
    for (Map.Entry<String, Blob> e : files.entrySet()) {
      md.update((e.getKey() + "\0" + e.getValue().gitSha1 + "\n").getBytes(StandardCharsets.UTF_8));
    }
    md.update((repo.id + "\0" + repo.commits.size()).getBytes(StandardCharsets.UTF_8));
    String sha = HexFormat.of().formatHex(md.digest());
    repo.commits.put(sha, new Commit(sha, files));
    repo.refs.put(revision, sha);
    ObjectNode out = JSON.createObjectNode();
    out.put("commitUrl", endpoint() + "/" + repo.id + "/commit/" + sha);
    out.put("commitOid", sha);
    out.putNull("pullRequestUrl");
    sendJson(x, out, null);
  }

  private void lfs(HttpExchange x, String raw) throws IOException {
    Matcher m = Pattern.compile("/([^/]+)/([^/]+)\\.git/info/lfs/(.+)").matcher(raw);
    if (!m.matches()) {
      error(x, 404, null, "unknown route");
      return;
    }
    String op = m.group(3);
    byte[] body = x.getRequestBody().readAllBytes();
    if (op.startsWith("complete/")) {
      complete(x, op.substring("complete/".length()), body);
      return;
    }
    Repo repo = writable(x, m.group(1), m.group(2));
    if (repo == null) {
      return;
    }
    if (op.equals("verify")) {
      com.fasterxml.jackson.databind.JsonNode v = JSON.readTree(body);
      byte[] b = lfsStore.get(v.path("oid").asText());
      if (b == null || b.length != v.path("size").asLong()) {
        error(x, 404, null, "object " + v.path("oid").asText() + " not found");
        return;
      }
      sendJson(x, JSON.createObjectNode(), null);
      return;
    }
    if (!op.equals("objects/batch")
        || !"application/vnd.git-lfs+json".equals(x.getRequestHeaders().getFirst("Content-Type"))) {
      error(x, 400, null, "expected a git-lfs batch request (application/vnd.git-lfs+json)");
      return;
    }
    com.fasterxml.jackson.databind.JsonNode req = JSON.readTree(body);
    if (!"upload".equals(req.path("operation").asText())) {
      error(x, 400, null, "only upload batches are served");
      return;
    }
    boolean multipartOk = false;
    for (com.fasterxml.jackson.databind.JsonNode t : req.path("transfers")) {
      multipartOk |= t.asText().equals("multipart");
    }
    ObjectNode out = JSON.createObjectNode();
    boolean anyMultipart = false;
    ArrayNode objects = out.putArray("objects");
    for (com.fasterxml.jackson.databind.JsonNode o : req.path("objects")) {
      String oid = o.path("oid").asText();
      long size = o.path("size").asLong();
      ObjectNode r =
          objects.addObject().put("oid", oid).put("size", size).put("authenticated", true);
      byte[] have = lfsStore.get(oid);
      if (have != null && have.length == size) {
        continue; // the Hub has it: no actions
      }
      ObjectNode actions = r.putObject("actions");
      ObjectNode upload = actions.putObject("upload");
      ObjectNode header = upload.putObject("header");
      if (multipartOk && size > multipartThreshold) {
        anyMultipart = true;
        long n = (size + chunkSize - 1) / chunkSize;
        header.put("chunk_size", Long.toString(chunkSize));
        for (int i = 1; i <= n; i++) {
          header.put(
              String.format("%05d", i),
              cdnEndpoint() + "/upload/" + oid + "/" + i + "?sig=" + signature);
        }
        upload.put(
            "href",
            endpoint()
                + "/"
                + repo.id
                + ".git/info/lfs/complete/"
                + oid
                + "?size="
                + size
                + "&sig="
                + signature);
      } else {
        upload.put(
            "href", cdnEndpoint() + "/upload/" + oid + "?size=" + size + "&sig=" + signature);
      }
      ObjectNode verify = actions.putObject("verify");
      verify.put("href", endpoint() + "/" + repo.id + ".git/info/lfs/verify");
      verify.putObject("header").put("Authorization", "Bearer " + repo.writeToken);
    }
    out.put("transfer", anyMultipart ? "multipart" : "basic");
    byte[] bytes = JSON.writeValueAsBytes(out);
    x.getResponseHeaders().set("Content-Type", "application/vnd.git-lfs+json");
    x.sendResponseHeaders(200, bytes.length);
    x.getResponseBody().write(bytes);
  }

  private void cdnUpload(HttpExchange x, String raw) throws IOException {
    Map<String, String> q = query(x.getRequestURI().getRawQuery());
    if (!signature.equals(q.get("sig"))) {
      error(x, 403, null, "SignatureDoesNotMatch");
      return;
    }
    String[] parts = raw.substring("/upload/".length()).split("/");
    byte[] body = x.getRequestBody().readAllBytes();
    uploadedBytes.addAndGet(body.length);
    String oid = parts[0];
    if (parts.length == 2) {
      int n = Integer.parseInt(parts[1]);
      this.parts.computeIfAbsent(oid, k -> new ConcurrentHashMap<>()).put(n, body);
      x.getResponseHeaders().set("ETag", '"' + sha256Hex(body).substring(0, 32) + '"');
      x.sendResponseHeaders(200, -1);
      return;
    }
    if (!sha256Hex(body).equals(oid)) {
      error(x, 400, null, "BadDigest: the body does not hash to " + oid);
      return;
    }
    lfsStore.put(oid, body);
    x.sendResponseHeaders(200, -1);
  }

  private void complete(HttpExchange x, String oid, byte[] body) throws IOException {
    Map<String, String> q = query(x.getRequestURI().getRawQuery());
    if (!signature.equals(q.get("sig"))) {
      error(x, 403, null, "SignatureDoesNotMatch");
      return;
    }
    if (x.getRequestHeaders().getFirst("Authorization") != null) {
      error(x, 400, null, "Only one auth mechanism allowed; the completion URL is signed");
      return;
    }
    com.fasterxml.jackson.databind.JsonNode req = JSON.readTree(body);
    Map<Integer, byte[]> got = parts.getOrDefault(oid, Map.of());
    java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
    int expected = 1;
    for (com.fasterxml.jackson.databind.JsonNode p : req.path("parts")) {
      int n = p.path("partNumber").asInt();
      byte[] b = got.get(n);
      if (n != expected++
          || b == null
          || !p.path("etag").asText().equals('"' + sha256Hex(b).substring(0, 32) + '"')) {
        error(
            x,
            400,
            null,
            "InvalidPart: part " + n + " of " + oid + " is missing or its ETag differs");
        return;
      }
      all.write(b);
    }
    byte[] bytes = all.toByteArray();
    if (bytes.length != Long.parseLong(q.getOrDefault("size", "-1"))
        || !sha256Hex(bytes).equals(oid)) {
      error(x, 400, null, "the parts do not make object " + oid);
      return;
    }
    lfsStore.put(oid, bytes);
    parts.remove(oid);
    sendJson(x, JSON.createObjectNode(), null);
  }

  // ---- responses ----

  private void sendBytes(HttpExchange x, byte[] bytes, Target target) throws IOException {
    long start = 0;
    long end = bytes.length - 1L;
    int status = 200;
    String range = x.getRequestHeaders().getFirst("Range");
    if (range != null) {
      Matcher m = RANGE.matcher(range.strip());
      if (!m.matches() || (m.group(1).isEmpty() && m.group(2).isEmpty())) {
        error(x, 416, null, "bad range " + range);
        return;
      }
      if (m.group(1).isEmpty()) {
        long n = Long.parseLong(m.group(2));
        start = Math.max(0, bytes.length - n);
      } else {
        start = Long.parseLong(m.group(1));
        if (!m.group(2).isEmpty()) {
          end = Math.min(end, Long.parseLong(m.group(2)));
        }
      }
      if (start >= bytes.length || start > end) {
        x.getResponseHeaders().set("Content-Range", "bytes */" + bytes.length);
        error(x, 416, null, "range not satisfiable");
        return;
      }
      status = 206;
      x.getResponseHeaders()
          .set("Content-Range", "bytes " + start + "-" + end + "/" + bytes.length);
    }
    long length = end - start + 1;
    if (x.getRequestMethod().equals("HEAD")) {
      x.getResponseHeaders().set("Content-Length", Long.toString(length));
      x.sendResponseHeaders(status, -1);
      return;
    }
    x.sendResponseHeaders(status, length == 0 ? -1 : length);
    Cut cut = cuts.get(target);
    long limit = length;
    Duration stall = null;
    if (cut != null && cut.afterBytes < length && cut.remaining.getAndDecrement() > 0) {
      limit = cut.afterBytes;
      stall = cut.stall;
    }
    OutputStream out = x.getResponseBody();
    // In 256 KiB writes: one write of a whole range makes the socket channel copy it into a
    // temporary direct buffer of that size, which each server thread then keeps (64 threads x
    // 32 MiB ranges exhausted the benchmark's memory).
    for (long at = 0; at < limit; at += 256 * 1024) {
      out.write(bytes, (int) (start + at), (int) Math.min(256 * 1024, limit - at));
    }
    out.flush();
    bodyBytes.addAndGet(limit);
    if (stall != null) {
      try {
        Thread.sleep(stall.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    if (limit < length) {
      // An exception out of the handler makes the JDK server close the connection: the client
      // sees a body shorter than its Content-Length.
      throw new CutConnection();
    }
  }

  private void sendJson(HttpExchange x, Object body, String link) throws IOException {
    byte[] bytes = JSON.writeValueAsBytes(body);
    x.getResponseHeaders().set("Content-Type", "application/json; charset=utf-8");
    if (link != null) {
      x.getResponseHeaders().set("Link", link);
    }
    if (x.getRequestMethod().equals("HEAD")) {
      x.sendResponseHeaders(200, -1);
      return;
    }
    x.sendResponseHeaders(200, bytes.length);
    x.getResponseBody().write(bytes);
  }

  private static void error(HttpExchange x, int status, String code, String message)
      throws IOException {
    Headers h = x.getResponseHeaders();
    if (code != null) {
      h.set("X-Error-Code", code);
    }
    h.set("X-Error-Message", message.replaceAll("[\\r\\n]", " "));
    h.set("Content-Type", "application/json; charset=utf-8");
    byte[] body = JSON.writeValueAsBytes(JSON.createObjectNode().put("error", message));
    if (x.getRequestMethod().equals("HEAD")) {
      x.sendResponseHeaders(status, -1);
      return;
    }
    x.sendResponseHeaders(status, body.length);
    x.getResponseBody().write(body);
  }

  // ---- helpers ----

  private Blob blob(byte[] bytes, boolean lfs) {
    String sha256 = sha256Hex(bytes);
    if (lfs) {
      lfsStore.put(sha256, bytes);
    }
    return new Blob(bytes, sha256, gitSha1(lfs ? pointer(sha256, bytes.length) : bytes), lfs);
  }

  private static byte[] pointer(Blob b) {
    return pointer(b.sha256, b.bytes.length);
  }

  /** The git-lfs pointer file (git-lfs spec v1) that git stores in place of an LFS file. */
  private static byte[] pointer(String sha256, long size) {
    return ("version https://git-lfs.github.com/spec/v1\noid sha256:"
            + sha256
            + "\nsize "
            + size
            + "\n")
        .getBytes(StandardCharsets.UTF_8);
  }

  /** Git's blob id: sha1 of {@code "blob <len>\0" + content}. */
  static String gitSha1(byte[] content) {
    MessageDigest md = sha1();
    md.update(("blob " + content.length + "\0").getBytes(StandardCharsets.UTF_8));
    md.update(content);
    return HexFormat.of().formatHex(md.digest());
  }

  /** Lowercase hex SHA-256. */
  public static String sha256Hex(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static MessageDigest sha1() {
    try {
      return MessageDigest.getInstance("SHA-1");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String decode(String s) {
    return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
  }

  private static String decodePath(String raw) {
    StringBuilder out = new StringBuilder();
    for (String seg : raw.split("/", -1)) {
      if (out.length() > 0) {
        out.append('/');
      }
      out.append(decode(seg));
    }
    return out.toString();
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> out = new LinkedHashMap<>();
    if (raw == null) {
      return out;
    }
    for (String kv : raw.split("&")) {
      int eq = kv.indexOf('=');
      if (eq > 0) {
        out.put(decode(kv.substring(0, eq)), decode(kv.substring(eq + 1)));
      }
    }
    return out;
  }
}
