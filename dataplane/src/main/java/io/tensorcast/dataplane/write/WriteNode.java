package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.consumer.DefaultTensorReadPlanner;
import io.tensorcast.dataplane.consumer.TensorEndpoint;
import io.tensorcast.dataplane.http.BodyStreaming;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.p2p.OriginSwarm;
import io.tensorcast.dataplane.p2p.PeerHandshake;
import io.tensorcast.dataplane.p2p.PeerSecret;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A node's data plane for an artifact that is written rather than loaded: on a writer node it
 * serves the put API ({@link WriteServer}); on every node it follows the artifact's writers, and as
 * soon as a version is sealed by all of them, fetches what it keeps of it ({@link
 * WriteNodeSettings.Want}) peer to peer ({@link OriginSwarm}: the writers are the origins and the
 * authorities for every piece's hash) while it goes on serving the version it has: a version
 * replaces the one before only once it is complete on this node. It serves the newest complete
 * version to consumers ({@code /v1/tensors}, every read target; a node keeping only some ranks
 * answers what needs other ranks with 409) and saves complete versions to object storage ({@link
 * VersionSaver}).
 *
 * <p>Control endpoint routes besides {@code /healthz}, {@code /readyz}, {@code /status}, {@code
 * /metrics}, {@code /v1/tensors} and {@code PUT /v1/peers}: {@code GET /v1/writes} (versions sealed
 * here), {@code GET /v1/writes/{v}} (a seal record: what readers fetch to plan), {@code GET
 * /v1/versions} (the versions this node keeps, their state and saves), {@code POST
 * /v1/versions/{v}/save} (start a save; 202). The reads need the read or admin token, a save the
 * admin token ({@link ControlAuth}).
 *
 * <p>Trust: a node asks a writer's control endpoint for its seal records with the read token and
 * uses a record only when its {@value #RECORD_TAG_HEADER} verifies with the artifact's peer secret
 * for that writer's id ({@link PeerHandshake#recordTag}); the record's piece hashes are then the
 * only hashes a piece of the version is checked against, and the version's swarm admits only
 * members that prove the same secret.
 */
public final class WriteNode implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(WriteNode.class);

  /**
   * The header of a seal record's answer that carries its tag ({@link PeerHandshake#recordTag}),
   * lowercase hex.
   */
  public static final String RECORD_TAG_HEADER = "X-Tensorcast-Record-Tag";

  private final WriteNodeSettings settings;
  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ExecutorService saves =
      Executors.newFixedThreadPool(
          2,
          r -> {
            Thread t = new Thread(r, "save");
            t.setDaemon(true);
            return t;
          });
  private final String self;
  private PinnedStore store;
  private WriteService service;
  private WriteServer writeServer;
  private ControlServer control;
  private Thread follower;
  private volatile boolean stopping;
  private final AtomicReference<Membership> membership = new AtomicReference<>();

  // ---- guarded by this
  private final Map<String, VersionUnion> known = new LinkedHashMap<>();
  private final Map<String, String> refused = new HashMap<>();
  private final Map<String, SealRecord> fetched = new HashMap<>();
  private final Map<String, LocalVersion> local = new LinkedHashMap<>();
  private final Map<String, SaveState> saveStates = new HashMap<>();
  private volatile LocalVersion current;
  private LocalVersion target;
  private String pollProblem;

  /** A version as this node keeps it. */
  private static final class LocalVersion {
    final VersionUnion union;
    StoredArtifact stored;
    boolean ownPart;
    boolean fullCopy;
    ShardShare share;
    OriginSwarm swarm;
    String state = "Fetching";
    String reason;
    String message;
    Instant readyAt;
    Instant startedAt = Instant.now();

    LocalVersion(VersionUnion union) {
      this.union = union;
    }

    String name() {
      return union.record().name();
    }
  }

  /** A save of a version: in progress, done or failed. */
  private record SaveState(
      String uri, String state, String reason, String message, ObjectNode result) {}

  private WriteNode(WriteNodeSettings settings) {
    this.settings = settings;
    this.self = settings.peer().peerId();
  }

  /**
   * Opens the store, starts the put API (writers), the control endpoint and the follower.
   *
   * @throws StoreException when the store cannot be opened
   * @throws IOException when the writes directory or the put API's socket cannot be made
   */
  public static WriteNode start(WriteNodeSettings settings)
      throws StoreException, IOException, InterruptedException {
    WriteNode n = new WriteNode(settings);
    boolean ok = false;
    try {
      n.open();
      ok = true;
      return n;
    } finally {
      if (!ok) {
        n.close();
      }
    }
  }

  private void open() throws StoreException, IOException, InterruptedException {
    store =
        settings.budgetBytes() > 0
            ? new PinnedStore(settings.storeRoot(), settings.budgetBytes(), settings.lockPolicy())
            : PinnedStore.open(settings.storeRoot(), settings.lockPolicy());
    // A data plane of a written artifact keeps only versions it fetched or sealed in this run.
    for (String id : List.copyOf(store.artifacts().keySet())) {
      store.unload(id);
    }
    if (settings.writer()) {
      service =
          new WriteService(
              store,
              new WriteService.Settings(
                  self,
                  settings.peer().pieceSize(),
                  settings.reservationTimeout(),
                  settings.maxVersions(),
                  settings.kind()));
      writeServer =
          WriteServer.start(
              service,
              new ControlToken(settings.writeTokenFile()),
              service.writesDirectory().resolve("write.sock"),
              settings.writeTcp(),
              (v, req) -> save(v.name(), req));
    }
    TensorEndpoint tensors =
        new TensorEndpoint(
            settings.artifactId(),
            () -> status().phase(),
            () -> {
              LocalVersion c = current;
              return c == null ? Optional.empty() : Optional.ofNullable(c.stored);
            },
            new DefaultTensorReadPlanner(true));
    control =
        ControlServer.start(
            settings.listen(),
            this::status,
            registry,
            settings.controlAuth(),
            tensors,
            body -> {
              Membership m = Membership.parseJson(body);
              Membership before = membership.getAndSet(m);
              OriginSwarm s = currentSwarm();
              if (s != null) {
                s.applyMembership(m);
              }
              return before == null || !before.epoch().equals(m.epoch());
            },
            BodyStreaming.DEFAULTS,
            new Routes());
    if (settings.peer().staticPeers() != null) {
      membership.set(settings.peer().staticPeers());
    }
    follower = new Thread(this::follow, "follow-" + settings.artifactId());
    follower.setDaemon(true);
    follower.start();
  }

  private synchronized OriginSwarm currentSwarm() {
    return target == null ? null : target.swarm;
  }

  /** The put API (null on a reader node). */
  public WriteServer writeServer() {
    return writeServer;
  }

  /** The control endpoint's address. */
  public java.net.InetSocketAddress address() {
    return control.address();
  }

  public PinnedStore store() {
    return store;
  }

  // ------------------------------------------------------------------ following the writers

  private void follow() {
    while (!stopping) {
      try {
        poll();
        synchronized (this) {
          pollProblem = null;
        }
      } catch (IOException | RuntimeException e) {
        boolean changed;
        synchronized (this) {
          changed = !e.toString().equals(pollProblem);
          pollProblem = e.toString();
        }
        if (changed) {
          log.info("{}: asking the writers failed: {}", settings.artifactId(), e.toString());
        }
      } catch (InterruptedException e) {
        return;
      }
      try {
        advance();
      } catch (RuntimeException e) {
        log.warn("{}: advancing versions failed", settings.artifactId(), e);
      }
      OriginSwarm s = currentSwarm();
      try {
        if (s != null && !s.complete()) {
          s.awaitComplete(settings.followInterval());
        } else {
          Thread.sleep(settings.followInterval().toMillis());
        }
      } catch (InterruptedException e) {
        if (stopping) {
          return;
        }
      }
    }
  }

  /** Asks every writer which versions it sealed; records versions sealed by all of them. */
  private void poll() throws IOException, InterruptedException {
    Map<String, Map<String, SealRecord>> byVersion = new TreeMap<>();
    for (Map.Entry<String, String> w : settings.writers().entrySet()) {
      String id = w.getKey();
      if (id.equals(self) && service != null) {
        for (WritableVersion v : service.sealed()) {
          byVersion.computeIfAbsent(v.name(), k -> new TreeMap<>()).put(id, v.sealRecord());
        }
        continue;
      }
      String address = w.getValue();
      if (address == null || address.isEmpty()) {
        // Named without an address: its control endpoint is its member address's host at the
        // control port (what the operator can name before the pods have addresses).
        Membership m = membership.get();
        Membership.Member member = null;
        for (Membership.Member x : m == null ? List.<Membership.Member>of() : m.members()) {
          if (x.id().equals(id)) {
            member = x;
          }
        }
        if (member == null) {
          throw new IOException(
              "writer " + id + " is not in the peer membership yet (no address to ask it at)");
        }
        address = member.address().getHostString() + ":" + settings.writerControlPort();
      }
      JsonNode list = getJson(address, "/v1/writes");
      for (JsonNode v : list.path("versions")) {
        String name = v.path("name").asText();
        String key = id + "/" + name + "/" + v.path("digest").asText();
        SealRecord r;
        synchronized (this) {
          r = fetched.get(key);
        }
        if (r == null) {
          r = fetchRecord(id, address, name);
          if (!r.writer().equals(id) || !r.name().equals(name)) {
            throw new IOException(
                "writer "
                    + id
                    + " answered for version "
                    + name
                    + " with the seal record of writer "
                    + r.writer()
                    + ", version "
                    + r.name());
          }
          synchronized (this) {
            fetched.put(key, r);
          }
        }
        byVersion.computeIfAbsent(name, k -> new TreeMap<>()).put(id, r);
      }
    }
    List<VersionUnion> fresh = new ArrayList<>();
    synchronized (this) {
      for (Map.Entry<String, Map<String, SealRecord>> e : byVersion.entrySet()) {
        String name = e.getKey();
        if (known.containsKey(name)
            || refused.containsKey(name)
            || !e.getValue().keySet().equals(settings.writers().keySet())) {
          continue;
        }
        try {
          fresh.add(VersionUnion.merge(e.getValue()));
        } catch (WriteException x) {
          refused.put(name, x.reason() + ": " + x.getMessage());
          log.warn("{}: version {} is refused: {}", settings.artifactId(), name, x.getMessage());
        }
      }
      fresh.sort(
          (a, b) ->
              String.valueOf(a.record().sealedAt())
                  .compareTo(String.valueOf(b.record().sealedAt())));
      for (VersionUnion u : fresh) {
        known.put(u.record().name(), u);
        log.info(
            "{}: version {} is sealed by every writer ({} files, {} bytes)",
            settings.artifactId(),
            u.record().name(),
            u.record().files().size(),
            u.record().totalBytes());
      }
    }
  }

  private JsonNode getJson(String hostPort, String path) throws IOException, InterruptedException {
    return WriteJson.JSON.readTree(get(hostPort, path).body());
  }

  /**
   * Fetches writer {@code writerId}'s seal record of {@code version} and checks its tag ({@link
   * PeerHandshake#recordTag}): a record not tagged with the artifact's peer secret for that writer
   * is refused, whoever answered at the writer's address.
   */
  private SealRecord fetchRecord(String writerId, String hostPort, String version)
      throws IOException, InterruptedException {
    HttpResponse<byte[]> r = get(hostPort, "/v1/writes/" + version);
    String tag = r.headers().firstValue(RECORD_TAG_HEADER).orElse("");
    byte[] presented;
    try {
      presented = HexFormat.of().parseHex(tag);
    } catch (IllegalArgumentException e) {
      presented = new byte[0];
    }
    PeerSecret secret = settings.peer().secret();
    if (!PeerHandshake.verify(
        PeerHandshake.recordTag(secret.key(), writerId, r.body()), presented)) {
      secret.recheckNow();
      throw new IOException(
          "the seal record of version "
              + version
              + " from writer "
              + writerId
              + " at "
              + hostPort
              + (tag.isEmpty() ? " has no " : " has a wrong ")
              + RECORD_TAG_HEADER
              + " (not tagged with the artifact's peer secret, fingerprint "
              + secret.fingerprint()
              + "); not used");
    }
    return SealRecord.parse(r.body());
  }

  private HttpResponse<byte[]> get(String hostPort, String path)
      throws IOException, InterruptedException {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://" + hostPort + path))
            .timeout(Duration.ofSeconds(10))
            .header("Authorization", "Bearer " + settings.controlAuth().read().value())
            .GET();
    HttpResponse<byte[]> r = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    if (r.statusCode() != 200) {
      throw new IOException(
          "GET http://"
              + hostPort
              + path
              + " answered "
              + r.statusCode()
              + ": "
              + new String(r.body(), StandardCharsets.UTF_8));
    }
    return r;
  }

  /** Starts on the newest known version, finishes a complete one, drops what is not retained. */
  private void advance() {
    VersionUnion newest;
    LocalVersion t;
    synchronized (this) {
      newest = known.isEmpty() ? null : List.copyOf(known.values()).get(known.size() - 1);
      t = target;
    }
    if (t != null && t.state.equals("Fetching") && t.swarm != null) {
      if (t.swarm.complete()) {
        finish(t);
      } else if (t.swarm.failure() != null) {
        fail(t, "FetchFailed", t.swarm.failure());
      }
    }
    if (newest != null && (t == null || !t.name().equals(newest.record().name()))) {
      switchTo(newest);
    }
    prune();
  }

  private void switchTo(VersionUnion union) {
    String name = union.record().name();
    LocalVersion old;
    synchronized (this) {
      old = target;
    }
    if (old != null) {
      if (old.swarm != null) {
        old.swarm.close();
        old.swarm = null;
      }
      if (old.state.equals("Fetching")) {
        // A newer version is complete at the writers: this one is dropped half-fetched.
        fail(old, "Superseded", "version " + union.record().name() + " replaces it");
      }
    }
    LocalVersion lv = new LocalVersion(union);
    synchronized (this) {
      local.put(name, lv); // replaces an entry a save made before the follower saw the version
      target = lv;
    }
    try {
      start(lv);
    } catch (WriteException | StoreException | RuntimeException | InterruptedException e) {
      String reason =
          e instanceof WriteException we
              ? we.reason()
              : e instanceof StoreException se ? se.reason().name() : "FetchFailed";
      fail(lv, reason, e.getMessage());
    }
  }

  private void start(LocalVersion lv) throws WriteException, StoreException, InterruptedException {
    SealRecord u = lv.union.record();
    PieceMap map = u.pieceMap();
    BitSet present = new BitSet(map.size());
    BitSet wanted = new BitSet(map.size());
    java.nio.file.Path files;
    OriginSwarm.PieceSink sink;
    boolean relays;
    Optional<StoredArtifact> part =
        service == null ? Optional.empty() : service.sealedArtifact(lv.name());
    if (part.isPresent()) {
      StoredArtifact p = part.get();
      Set<String> mine = new HashSet<>();
      p.files().forEach(f -> mine.add(f.path()));
      for (PieceMap.Piece pc : map.pieces()) {
        if (mine.contains(pc.path())) {
          present.set(pc.index());
        }
      }
      lv.stored = p;
      lv.ownPart = true;
      lv.fullCopy = mine.containsAll(u.files().stream().map(SealRecord.FileEntry::path).toList());
      files = p.directory();
      sink = (piece, bytes) -> false;
      relays = false;
    } else {
      switch (settings.want().mode()) {
        case ALL -> {
          StoredArtifact s = store.allocate(lv.name(), u.storeFiles());
          lv.stored = s;
          lv.fullCopy = true;
          wanted.set(0, map.size());
          files = s.directory();
          sink =
              (piece, bytes) -> {
                s.write(piece.path(), piece.offset(), bytes);
                return true;
              };
          relays = true;
        }
        case RANKS -> {
          ShardShare share = ShardShare.plan(u, settings.want().tpSize(), settings.want().ranks());
          StoredArtifact s = store.allocate(lv.name(), share.files());
          share.writeHeads(s);
          lv.stored = s;
          lv.share = share;
          wanted = share.wanted();
          files = s.directory();
          sink =
              (piece, bytes) -> {
                share.cut(piece, bytes, s);
                return false;
              };
          relays = false;
        }
        default -> {
          files = store.root();
          sink = (piece, bytes) -> false;
          relays = false;
        }
      }
    }
    byte[][] expected = u.pieceHashes();
    OriginSwarm swarm =
        new OriginSwarm(
            lv.name(),
            map,
            expected,
            u.digest(),
            settings.writers().keySet(),
            new OriginSwarm.Holdings(files, present, wanted, relays),
            sink,
            settings.peer(),
            registry,
            settings.artifactId());
    lv.swarm = swarm;
    swarm.start();
    Membership m = membership.get();
    if (m != null) {
      swarm.applyMembership(m);
    }
    if (swarm.complete()) {
      finish(lv);
    }
  }

  /** Every wanted piece is in: verify and mark the files complete, then serve this version. */
  private void finish(LocalVersion lv) {
    try {
      if (!lv.ownPart && lv.stored != null) {
        for (StoreFile f : lv.stored.files()) {
          String expected = null;
          if (lv.share == null) {
            expected = lv.union.record().file(f.path()).sha256();
          }
          lv.stored.markComplete(f.path(), expected);
        }
      }
    } catch (StoreException e) {
      fail(
          lv,
          e.reason() == Reason.ChecksumMismatch ? "DigestMismatch" : e.reason().name(),
          e.getMessage());
      return;
    }
    synchronized (this) {
      lv.state = "Ready";
      lv.readyAt = Instant.now();
      lv.message = null;
      if (lv.stored != null) {
        current = lv;
      }
    }
    log.info(
        "{}: version {} is ready here ({}) after {} ms",
        settings.artifactId(),
        lv.name(),
        lv.ownPart ? "own part" : lv.share != null ? "tp " + settings.want() : "full copy",
        Duration.between(lv.startedAt, lv.readyAt).toMillis());
  }

  private void fail(LocalVersion lv, String reason, String message) {
    synchronized (this) {
      lv.state = "Failed";
      lv.reason = reason;
      lv.message = message;
    }
    log.warn("{}: version {}: {}: {}", settings.artifactId(), lv.name(), reason, message);
    if (lv.swarm != null) {
      lv.swarm.close();
      lv.swarm = null;
    }
    if (!lv.ownPart && lv.stored != null && lv != current) {
      try {
        store.unload(lv.name());
      } catch (StoreException e) {
        log.warn("unload of {} failed: {}", lv.name(), e.getMessage());
      }
      lv.stored = null;
    }
  }

  /** Keeps the newest {@code retain} ready versions (and the one being fetched); frees the rest. */
  private void prune() {
    List<LocalVersion> drop = new ArrayList<>();
    synchronized (this) {
      List<LocalVersion> ready = new ArrayList<>();
      for (LocalVersion v : local.values()) {
        if (v.state.equals("Ready")) {
          ready.add(v);
        } else if (v.state.equals("Failed") && v != target) {
          drop.add(v);
        }
      }
      for (int i = 0; i < ready.size() - settings.retain(); i++) {
        LocalVersion v = ready.get(i);
        SaveState sv = saveStates.get(v.name());
        if (v != current && v != target && (sv == null || !sv.state().equals("Saving"))) {
          drop.add(v);
        }
      }
      for (LocalVersion v : drop) {
        local.remove(v.name());
      }
    }
    for (LocalVersion v : drop) {
      try {
        if (v.ownPart && service != null) {
          service.drop(v.name());
        } else if (v.stored != null) {
          store.unload(v.name());
        }
        log.info(
            "{}: version {} released (older than the {} retained)",
            settings.artifactId(),
            v.name(),
            settings.retain());
      } catch (WriteException | StoreException e) {
        log.warn(
            "{}: releasing version {} failed: {}", settings.artifactId(), v.name(), e.getMessage());
      }
    }
  }

  // ------------------------------------------------------------------ saving

  /**
   * Starts saving a version this node holds complete (a full copy, or all of a version one writer
   * wrote) to {@code request.uri}; returns at once with the save's state.
   *
   * @throws WriteException 404 {@code NoSuchVersion}, 409 {@code NotComplete} (this node holds only
   *     a part: save from a node with a full copy), {@code SaveInProgress}, 400 for a bad target
   *     and 403 {@code NoCredentials} when the destination needs credentials the data plane lacks
   *     (checked before anything is sent)
   */
  ObjectNode save(String name, ObjectNode request) throws WriteException {
    SealRecord record = null;
    StoredArtifact stored = null;
    Optional<StoredArtifact> sealedHere =
        service == null ? Optional.empty() : service.sealedArtifact(name);
    if (sealedHere.isPresent()) {
      // A writer that sealed every file of the version saves its own part, right after the seal.
      SealRecord own = service.version(name).sealRecord();
      VersionUnion u;
      synchronized (this) {
        u = known.get(name);
      }
      if (settings.writers().keySet().equals(Set.of(self))
          || (u != null && u.record().files().size() == own.files().size())) {
        record = u != null ? u.record() : own;
        stored = sealedHere.get();
      }
    }
    if (record == null) {
      LocalVersion lv;
      synchronized (this) {
        lv = local.get(name);
      }
      if (lv == null) {
        throw new WriteException(
            404, "NoSuchVersion", "this node holds no version " + name + " (yet)");
      }
      if (!lv.state.equals("Ready") || !lv.fullCopy || lv.stored == null) {
        throw WriteException.conflict(
            "NotComplete",
            "version "
                + name
                + " is "
                + lv.state
                + " on this node"
                + (lv.fullCopy
                    ? ""
                    : ", which holds only part of it ("
                        + (lv.ownPart ? "its own rank files" : "tp ranks " + settings.want())
                        + ")")
                + "; save from a node that holds it complete (--want all, or the single writer)");
      }
      record = lv.union.record();
      stored = lv.stored;
    }
    SaveTarget target = SaveTarget.parse(request);
    VersionSaver saver = VersionSaver.prepare(target, settings.env());
    SealRecord savedRecord = record;
    StoredArtifact savedCopy = stored;
    synchronized (this) {
      SaveState before = saveStates.get(name);
      if (before != null && before.state().equals("Saving")) {
        saver.close();
        throw WriteException.conflict(
            "SaveInProgress",
            "version " + name + " is being saved to " + before.uri() + " already");
      }
      saveStates.put(name, new SaveState(target.uri(), "Saving", null, null, null));
    }
    saves.execute(
        () -> {
          SaveState done;
          try {
            ObjectNode result = saver.save(savedRecord, savedCopy);
            done = new SaveState(target.uri(), "Saved", null, null, result);
          } catch (WriteException e) {
            log.warn(
                "save of {} to {} failed: {}: {}", name, target.uri(), e.reason(), e.getMessage());
            done = new SaveState(target.uri(), "Failed", e.reason(), e.getMessage(), null);
          } catch (RuntimeException e) {
            log.warn("save of {} to {} failed", name, target.uri(), e);
            done = new SaveState(target.uri(), "Failed", "InternalError", e.toString(), null);
          } finally {
            saver.close();
          }
          synchronized (WriteNode.this) {
            saveStates.put(name, done);
          }
        });
    ObjectNode o = WriteJson.JSON.createObjectNode();
    o.put("version", name);
    o.put("uri", target.uri());
    o.put("state", "Saving");
    return o;
  }

  // ------------------------------------------------------------------ status and routes

  /** What {@code GET /status} answers. */
  public DataPlaneStatus status() {
    LocalVersion c;
    LocalVersion t;
    String problem;
    synchronized (this) {
      c = current;
      t = target;
      problem = pollProblem;
    }
    DataPlaneStatus.Phase phase =
        c != null
            ? DataPlaneStatus.Phase.Ready
            : t != null && t.state.equals("Fetching")
                ? DataPlaneStatus.Phase.Loading
                : DataPlaneStatus.Phase.Pending;
    LocalVersion shown = c != null ? c : t;
    String message;
    if (t != null && t != c && t.state.equals("Fetching") && t.swarm != null) {
      long[] p = t.swarm.progress();
      message = "fetching version " + t.name() + " (" + p[0] + " of " + p[1] + " bytes)";
    } else if (t != null && t.state.equals("Failed")) {
      message = "version " + t.name() + ": " + t.reason + ": " + t.message;
    } else if (c == null) {
      message =
          problem != null
              ? "asking the writers: " + problem
              : "no version sealed by every writer yet";
    } else {
      message = null;
    }
    long total = shown == null || shown.stored == null ? 0 : shown.stored.bytesAllocated();
    long loaded =
        shown == null
            ? 0
            : shown == c ? total : shown.swarm == null ? 0 : shown.swarm.progress()[0];
    int files = shown == null || shown.stored == null ? 0 : shown.stored.files().size();
    OriginSwarm s = t == null ? null : t.swarm;
    Membership m = membership.get();
    return DataPlaneStatus.builder(settings.artifactId(), phase)
        .reason(c == null && t != null && t.state.equals("Failed") ? t.reason : null)
        .message(message)
        .source("writers:" + String.join(",", new java.util.TreeSet<>(settings.writers().keySet())))
        .resolvedRevision(c == null ? null : c.name())
        .files(files)
        .filesComplete(c == null ? 0 : files)
        .bytesTotal(total)
        .bytesLoaded(loaded)
        .storeDirectory(
            shown == null || shown.stored == null ? null : shown.stored.directory().toString())
        .readyTime(c == null || c.readyAt == null ? null : c.readyAt.toString())
        .fileStatuses(List.of())
        .peerEpoch(m == null ? null : m.epoch())
        .peers(s == null ? 0 : s.connectedPeers())
        .build();
  }

  private ObjectNode versionsJson() {
    ObjectNode o = WriteJson.JSON.createObjectNode();
    synchronized (this) {
      o.put("current", current == null ? null : current.name());
      o.put("want", settings.want().toString());
      ArrayNode arr = o.putArray("versions");
      for (LocalVersion v : local.values()) {
        ObjectNode j = arr.addObject();
        j.put("name", v.name());
        j.put("state", v.state);
        if (v.reason != null) {
          j.put("reason", v.reason);
          j.put("message", v.message);
        }
        j.put(
            "keeps",
            v.ownPart
                ? "own"
                : v.share != null ? settings.want().toString() : v.fullCopy ? "all" : "none");
        j.put("complete", v.fullCopy);
        ObjectNode meta = j.putObject("metadata");
        v.union.record().metadata().forEach(meta::put);
        j.put("bytes", v.stored == null ? 0 : v.stored.bytesAllocated());
        if (v.swarm != null) {
          long[] p = v.swarm.progress();
          j.put("bytesFetched", p[0]);
          j.put("bytesWanted", p[1]);
        }
        j.put("startedAt", v.startedAt.toString());
        if (v.readyAt != null) {
          j.put("readyAt", v.readyAt.toString());
        }
        SaveState save = saveStates.get(v.name());
        if (save != null) {
          ObjectNode sv = j.putObject("save");
          sv.put("uri", save.uri());
          sv.put("state", save.state());
          if (save.reason() != null) {
            sv.put("reason", save.reason());
            sv.put("message", save.message());
          }
          if (save.result() != null) {
            sv.set("result", save.result());
          }
        }
      }
      for (Map.Entry<String, SaveState> e : saveStates.entrySet()) {
        if (!local.containsKey(e.getKey())) {
          ObjectNode j = arr.addObject().put("name", e.getKey()).put("state", "Sealed");
          ObjectNode sv = j.putObject("save");
          sv.put("uri", e.getValue().uri()).put("state", e.getValue().state());
          if (e.getValue().reason() != null) {
            sv.put("reason", e.getValue().reason()).put("message", e.getValue().message());
          }
          if (e.getValue().result() != null) {
            sv.set("result", e.getValue().result());
          }
        }
      }
      ObjectNode ref = o.putObject("refused");
      refused.forEach(ref::put);
    }
    return o;
  }

  /** The control endpoint's routes of written versions. */
  private final class Routes implements ControlServer.ExtraRoutes {
    /** Reads of seal records and versions with the read token; a save with the admin token. */
    @Override
    public ControlAuth.Scope scope(HttpMethod method, String path) {
      if (!path.equals("/v1/writes")
          && !path.startsWith("/v1/writes/")
          && !path.equals("/v1/versions")
          && !path.startsWith("/v1/versions/")) {
        return null;
      }
      return HttpMethod.GET.equals(method) || HttpMethod.HEAD.equals(method)
          ? ControlAuth.Scope.READ
          : ControlAuth.Scope.ADMIN;
    }

    @Override
    public FullHttpResponse answer(FullHttpRequest req) {
      String path = new QueryStringDecoder(req.uri()).path();
      try {
        if (req.method().equals(HttpMethod.GET) && path.equals("/v1/writes")) {
          ObjectNode o = WriteJson.JSON.createObjectNode();
          o.put("writer", self);
          ArrayNode arr = o.putArray("versions");
          if (service != null) {
            for (WritableVersion v : service.sealed()) {
              SealRecord r = v.sealRecord();
              arr.addObject()
                  .put("name", v.name())
                  .put("sealedAt", r.sealedAt())
                  .put("digest", java.util.HexFormat.of().formatHex(r.digest()));
            }
          }
          return json(200, o);
        }
        if (req.method().equals(HttpMethod.GET) && path.startsWith("/v1/writes/")) {
          String name = path.substring("/v1/writes/".length());
          if (service == null) {
            throw new WriteException(404, "NoSuchVersion", "this node writes no versions");
          }
          SealRecord r = service.version(name).sealRecord();
          if (r == null) {
            throw WriteException.conflict("NotSealed", "version " + name + " is not sealed yet");
          }
          byte[] body = r.toJson();
          FullHttpResponse resp = bytes(200, body);
          resp.headers()
              .set(
                  RECORD_TAG_HEADER,
                  HexFormat.of()
                      .formatHex(
                          PeerHandshake.recordTag(settings.peer().secret().key(), self, body)));
          return resp;
        }
        if (req.method().equals(HttpMethod.GET) && path.equals("/v1/versions")) {
          return json(200, versionsJson());
        }
        if (req.method().equals(HttpMethod.POST)
            && path.startsWith("/v1/versions/")
            && path.endsWith("/save")) {
          String name = path.substring("/v1/versions/".length(), path.length() - "/save".length());
          byte[] body = new byte[req.content().readableBytes()];
          req.content().getBytes(req.content().readerIndex(), body);
          return json(202, save(name, WriteJson.object(body, "save")));
        }
        throw new WriteException(404, "NotFound", "no route " + req.method() + " " + path);
      } catch (WriteException e) {
        return json(e.status(), WriteJson.error(e, null));
      } catch (RuntimeException e) {
        return json(
            500, WriteJson.error(new WriteException(500, "InternalError", e.toString(), e), null));
      }
    }
  }

  private static FullHttpResponse json(int status, JsonNode body) {
    byte[] bytes;
    try {
      bytes = WriteJson.JSON.writeValueAsBytes(body);
    } catch (IOException e) {
      bytes = "{}".getBytes(StandardCharsets.UTF_8);
    }
    return bytes(status, bytes);
  }

  private static FullHttpResponse bytes(int status, byte[] bytes) {
    FullHttpResponse r =
        new DefaultFullHttpResponse(
            HttpVersion.HTTP_1_1,
            HttpResponseStatus.valueOf(status),
            Unpooled.wrappedBuffer(bytes));
    r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
    r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, bytes.length);
    return r;
  }

  // ------------------------------------------------------------------ shutdown

  /** Stops following and serving; frees every version and the store. Idempotent. */
  @Override
  public void close() {
    stopping = true;
    if (follower != null) {
      follower.interrupt();
      try {
        follower.join(20_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    List<LocalVersion> all;
    synchronized (this) {
      all = List.copyOf(local.values());
    }
    for (LocalVersion v : all) {
      if (v.swarm != null) {
        v.swarm.close();
      }
    }
    saves.shutdownNow();
    if (writeServer != null) {
      writeServer.close();
    }
    if (control != null) {
      control.close();
    }
    if (service != null) {
      service.close();
    }
    if (store != null) {
      for (String id : List.copyOf(store.artifacts().keySet())) {
        try {
          store.unload(id);
        } catch (StoreException e) {
          log.warn("unload of {} failed: {}", id, e.getMessage());
        }
      }
      store.close();
    }
    registry.close();
  }

  /** Reads the metrics of this node (tests, benchmarks). */
  public String scrape() {
    return registry.scrape();
  }
}
