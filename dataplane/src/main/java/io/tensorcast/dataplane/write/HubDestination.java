package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Saves to a Hugging Face Hub repository ({@code hf://org/repo[/dir]}) with the Hub's upload
 * protocol as the {@code huggingface_hub} client speaks it ({@code create_commit}): a {@code
 * preupload} call tells which files go to LFS; LFS files go through the git-lfs batch API ({@code
 * /{repo}.git/info/lfs/objects/batch}, transfers {@code basic} and {@code multipart}: the chunk
 * URLs the Hub hands out, then its completion URL), objects the Hub already has are not sent again
 * (resume); then one commit ({@code /api/models/{repo}/commit/{revision}}, NDJSON) adds every file
 * at once, so the version appears whole or not at all. The repository must exist; the token ({@code
 * HF_TOKEN}) must be allowed to write to it.
 */
final class HubDestination implements VersionSaver.Destination {
  private static final String LFS_JSON = "application/vnd.git-lfs+json";

  private final SaveTarget target;
  private final URI endpoint;
  private final String repo;
  private final String dir;
  private final String token;
  private final HttpClient http =
      HttpClient.newBuilder()
          .connectTimeout(Duration.ofSeconds(10))
          .followRedirects(HttpClient.Redirect.NEVER)
          .build();

  private HubDestination(SaveTarget target, URI endpoint, String repo, String dir, String token) {
    this.target = target;
    this.endpoint = endpoint;
    this.repo = repo;
    this.dir = dir;
    this.token = token;
  }

  /**
   * @throws WriteException 400 {@code NoCredentials} without {@code HF_TOKEN} (or {@code
   *     HUGGING_FACE_HUB_TOKEN}) in the environment
   */
  static HubDestination open(SaveTarget target, Function<String, String> env)
      throws WriteException {
    String token = env.apply("HF_TOKEN");
    if (token == null || token.isBlank()) {
      token = env.apply("HUGGING_FACE_HUB_TOKEN");
    }
    if (token == null || token.isBlank()) {
      throw WriteException.bad(
          "NoCredentials",
          "saving to "
              + target.uri()
              + " needs a Hugging Face token with write access, and the data plane has none: set"
              + " HF_TOKEN in its environment (on Kubernetes: spec.save.credentialsSecretRef);"
              + " nothing was sent");
    }
    URI ep = target.endpoint() != null ? target.endpoint() : URI.create("https://huggingface.co");
    String prefix = target.parsed().prefix();
    return new HubDestination(target, ep, target.parsed().repository(), prefix, token.strip());
  }

  @Override
  public ObjectNode save(
      SealRecord record,
      StoredArtifact stored,
      List<SealRecord.FileEntry> data,
      SealRecord.FileEntry commitFile)
      throws WriteException {
    List<SealRecord.FileEntry> all = new ArrayList<>(data);
    if (commitFile != null) {
      all.add(commitFile);
    }
    ObjectNode result = WriteJson.JSON.createObjectNode();
    ArrayNode files = result.putArray("files");
    long uploaded = 0;
    try {
      Map<String, String> modes = preupload(all, stored);
      List<SealRecord.FileEntry> lfs = new ArrayList<>();
      for (SealRecord.FileEntry f : all) {
        if ("lfs".equals(modes.get(dir + f.path()))) {
          lfs.add(f);
        }
      }
      Map<String, Boolean> sent = lfs.isEmpty() ? Map.of() : uploadLfs(lfs, stored);
      for (SealRecord.FileEntry f : all) {
        ObjectNode r =
            files
                .addObject()
                .put("path", dir + f.path())
                .put("size", f.size())
                .put("sha256", f.sha256());
        boolean isLfs = "lfs".equals(modes.get(dir + f.path()));
        r.put("mode", isLfs ? "lfs" : "regular");
        if (isLfs && !sent.getOrDefault(f.path(), true)) {
          r.put("resumed", true);
        } else {
          uploaded += f.size();
        }
      }
      JsonNode commit = commit(record, all, modes, stored);
      result.put("commitOid", commit.path("commitOid").asText(null));
      result.put("commitUrl", commit.path("commitUrl").asText(null));
    } catch (IOException e) {
      throw new WriteException(
          502,
          "DestinationUnavailable",
          "saving to " + target.uri() + " failed: " + e + "; no commit was made",
          e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WriteException(503, "Interrupted", "save interrupted; no commit was made", e);
    }
    result.put("bytesUploaded", uploaded);
    return result;
  }

  private String rev() {
    return URLEncoder.encode(target.revision(), StandardCharsets.UTF_8);
  }

  /** {@code preupload}: which files the Hub wants through LFS. */
  private Map<String, String> preupload(List<SealRecord.FileEntry> files, StoredArtifact stored)
      throws IOException, InterruptedException, WriteException {
    ObjectNode body = WriteJson.JSON.createObjectNode();
    ArrayNode arr = body.putArray("files");
    for (SealRecord.FileEntry f : files) {
      int n = (int) Math.min(512, f.size());
      ByteBuffer sample = ByteBuffer.allocate(n);
      stored.read(f.path(), 0, sample);
      arr.addObject()
          .put("path", dir + f.path())
          .put("sample", Base64.getEncoder().encodeToString(sample.array()))
          .put("size", f.size());
    }
    JsonNode r =
        send(
            post("/api/models/" + repo + "/preupload/" + rev(), "application/json", body),
            "preupload");
    Map<String, String> modes = new HashMap<>();
    for (JsonNode f : r.path("files")) {
      modes.put(f.path("path").asText(), f.path("uploadMode").asText("regular"));
    }
    return modes;
  }

  /**
   * LFS batch and uploads; returns per path whether its bytes were sent (false: the Hub had them).
   */
  private Map<String, Boolean> uploadLfs(List<SealRecord.FileEntry> lfs, StoredArtifact stored)
      throws IOException, InterruptedException, WriteException {
    ObjectNode body = WriteJson.JSON.createObjectNode();
    body.put("operation", "upload");
    body.putArray("transfers").add("basic").add("multipart");
    body.put("hash_algo", "sha256");
    body.putObject("ref").put("name", target.revision());
    ArrayNode objects = body.putArray("objects");
    Map<String, SealRecord.FileEntry> byOid = new HashMap<>();
    for (SealRecord.FileEntry f : lfs) {
      objects.addObject().put("oid", f.sha256()).put("size", f.size());
      byOid.put(f.sha256(), f);
    }
    HttpRequest.Builder b = post("/" + repo + ".git/info/lfs/objects/batch", LFS_JSON, body);
    b.header("Accept", LFS_JSON);
    JsonNode r = send(b, "LFS batch");
    String transfer = r.path("transfer").asText("basic");
    Map<String, Boolean> sent = new HashMap<>();
    for (JsonNode o : r.path("objects")) {
      SealRecord.FileEntry f = byOid.get(o.path("oid").asText());
      if (f == null) {
        continue;
      }
      if (o.has("error")) {
        throw new WriteException(
            502,
            "DestinationRefused",
            "the Hub refused LFS object of '"
                + f.path()
                + "': "
                + o.path("error").path("message").asText(o.path("error").toString()));
      }
      JsonNode actions = o.get("actions");
      if (actions == null || !actions.has("upload")) {
        sent.put(f.path(), false);
        continue;
      }
      JsonNode upload = actions.get("upload");
      JsonNode header = upload.path("header");
      if ("multipart".equals(transfer) && header.has("chunk_size")) {
        multipart(f, stored, upload);
      } else {
        HttpRequest.Builder put =
            HttpRequest.newBuilder(URI.create(upload.path("href").asText()))
                .timeout(Duration.ofMinutes(30))
                .PUT(body(stored, f.path(), 0, f.size()));
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> h = it.next();
          put.header(h.getKey(), h.getValue().asText());
        }
        expect2xx(
            http.send(put.build(), HttpResponse.BodyHandlers.ofString()),
            "LFS upload of " + f.path());
      }
      JsonNode verify = actions.get("verify");
      if (verify != null) {
        ObjectNode v =
            WriteJson.JSON.createObjectNode().put("oid", f.sha256()).put("size", f.size());
        HttpRequest.Builder vb =
            HttpRequest.newBuilder(URI.create(verify.path("href").asText()))
                .timeout(Duration.ofMinutes(2))
                .header("Content-Type", LFS_JSON)
                .header("Accept", LFS_JSON)
                .POST(HttpRequest.BodyPublishers.ofByteArray(WriteJson.JSON.writeValueAsBytes(v)));
        for (Iterator<Map.Entry<String, JsonNode>> it = verify.path("header").fields();
            it.hasNext(); ) {
          Map.Entry<String, JsonNode> h = it.next();
          vb.header(h.getKey(), h.getValue().asText());
        }
        expect2xx(
            http.send(vb.build(), HttpResponse.BodyHandlers.ofString()),
            "LFS verify of " + f.path());
      }
      sent.put(f.path(), true);
    }
    return sent;
  }

  /** The multipart LFS transfer: PUT each chunk to its URL, then POST the parts' ETags. */
  private void multipart(SealRecord.FileEntry f, StoredArtifact stored, JsonNode upload)
      throws IOException, InterruptedException, WriteException {
    JsonNode header = upload.path("header");
    long chunk = Long.parseLong(header.path("chunk_size").asText());
    List<String> urls = new ArrayList<>();
    for (int i = 1; header.has(String.format("%05d", i)); i++) {
      urls.add(header.path(String.format("%05d", i)).asText());
    }
    long expectedParts = (f.size() + chunk - 1) / chunk;
    if (urls.size() != expectedParts) {
      throw new WriteException(
          502,
          "DestinationRefused",
          "the Hub gave "
              + urls.size()
              + " part URLs for '"
              + f.path()
              + "' ("
              + f.size()
              + " bytes in chunks of "
              + chunk
              + " take "
              + expectedParts
              + ")");
    }
    ObjectNode done = WriteJson.JSON.createObjectNode().put("oid", f.sha256());
    ArrayNode parts = done.putArray("parts");
    for (int i = 0; i < urls.size(); i++) {
      long off = i * chunk;
      long len = Math.min(chunk, f.size() - off);
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(urls.get(i)))
                  .timeout(Duration.ofMinutes(30))
                  .PUT(body(stored, f.path(), off, len))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      expect2xx(r, "LFS part " + (i + 1) + " of " + f.path());
      String etag = r.headers().firstValue("ETag").orElse(null);
      if (etag == null) {
        throw new WriteException(
            502, "DestinationRefused", "LFS part " + (i + 1) + " of " + f.path() + ": no ETag");
      }
      parts.addObject().put("partNumber", i + 1).put("etag", etag);
    }
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(upload.path("href").asText()))
            .timeout(Duration.ofMinutes(2))
            .header("Content-Type", LFS_JSON)
            .header("Accept", LFS_JSON)
            .POST(HttpRequest.BodyPublishers.ofByteArray(WriteJson.JSON.writeValueAsBytes(done)));
    expect2xx(
        http.send(b.build(), HttpResponse.BodyHandlers.ofString()),
        "LFS completion of " + f.path());
  }

  /** The commit: every file at once, LFS files by their object id, the others inline. */
  private JsonNode commit(
      SealRecord record,
      List<SealRecord.FileEntry> files,
      Map<String, String> modes,
      StoredArtifact stored)
      throws IOException, InterruptedException, WriteException {
    ByteArrayOutputStream nd = new ByteArrayOutputStream();
    ObjectNode header = WriteJson.JSON.createObjectNode();
    header.put("key", "header");
    header
        .putObject("value")
        .put("summary", "tensorcast: save version " + record.name())
        .put(
            "description",
            "Saved by Tensorcast from the page-locked store (" + record.kind() + ")");
    line(nd, header);
    for (SealRecord.FileEntry f : files) {
      ObjectNode op = WriteJson.JSON.createObjectNode();
      if ("lfs".equals(modes.get(dir + f.path()))) {
        op.put("key", "lfsFile");
        op.putObject("value")
            .put("path", dir + f.path())
            .put("algo", "sha256")
            .put("oid", f.sha256())
            .put("size", f.size());
      } else {
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(f.size()));
        stored.read(f.path(), 0, b);
        op.put("key", "file");
        op.putObject("value")
            .put("content", Base64.getEncoder().encodeToString(b.array()))
            .put("path", dir + f.path())
            .put("encoding", "base64");
      }
      line(nd, op);
    }
    HttpRequest.Builder b =
        HttpRequest.newBuilder(endpoint.resolve("/api/models/" + repo + "/commit/" + rev()))
            .timeout(Duration.ofMinutes(5))
            .header("Authorization", "Bearer " + token)
            .header("Content-Type", "application/x-ndjson")
            .POST(HttpRequest.BodyPublishers.ofByteArray(nd.toByteArray()));
    return send(b, "commit");
  }

  private static void line(ByteArrayOutputStream out, JsonNode n) throws IOException {
    out.write(WriteJson.JSON.writeValueAsBytes(n));
    out.write('\n');
  }

  private HttpRequest.Builder post(String path, String contentType, JsonNode body)
      throws IOException {
    return HttpRequest.newBuilder(endpoint.resolve(path))
        .timeout(Duration.ofMinutes(2))
        .header("Authorization", "Bearer " + token)
        .header("Content-Type", contentType)
        .POST(HttpRequest.BodyPublishers.ofByteArray(WriteJson.JSON.writeValueAsBytes(body)));
  }

  private JsonNode send(HttpRequest.Builder b, String what)
      throws IOException, InterruptedException, WriteException {
    HttpResponse<byte[]> r = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    if (r.statusCode() / 100 != 2) {
      String code = r.headers().firstValue("X-Error-Code").orElse(null);
      String msg =
          r.headers()
              .firstValue("X-Error-Message")
              .orElse(new String(r.body(), StandardCharsets.UTF_8));
      String reason;
      int status;
      if (r.statusCode() == 401) {
        reason = "AccessDenied";
        status = 403;
        msg = "the token was refused (HTTP 401): " + msg;
      } else if (r.statusCode() == 403) {
        reason = "AccessDenied";
        status = 403;
        msg = "the token may not write to " + repo + " (HTTP 403): " + msg;
      } else if ("RepoNotFound".equals(code) || r.statusCode() == 404) {
        reason = "RepositoryNotFound";
        status = 404;
        msg =
            "repository "
                + repo
                + " or revision "
                + target.revision()
                + " not found (create it first): "
                + msg;
      } else {
        reason = r.statusCode() >= 500 ? "DestinationUnavailable" : "DestinationRefused";
        status = 502;
      }
      throw new WriteException(
          status,
          reason,
          "saving to " + target.uri() + ": " + what + ": " + msg + "; no commit was made");
    }
    return r.body().length == 0
        ? WriteJson.JSON.createObjectNode()
        : WriteJson.JSON.readTree(r.body());
  }

  private void expect2xx(HttpResponse<String> r, String what) throws WriteException {
    if (r.statusCode() / 100 != 2) {
      throw new WriteException(
          502,
          r.statusCode() >= 500 ? "DestinationUnavailable" : "DestinationRefused",
          "saving to "
              + target.uri()
              + ": "
              + what
              + " answered HTTP "
              + r.statusCode()
              + ": "
              + r.body()
              + "; no commit was made");
    }
  }

  private static HttpRequest.BodyPublisher body(
      StoredArtifact stored, String path, long offset, long length) {
    return HttpRequest.BodyPublishers.fromPublisher(
        HttpRequest.BodyPublishers.ofInputStream(
            () -> VersionSaver.stream(stored, path, offset, length)),
        length);
  }

  @Override
  public void close() {}
}
