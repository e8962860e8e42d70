package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StagedFile;
import io.tensorcast.dataplane.store.StoreException;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.ShardManifest;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One named version being written on this node: the tensors put so far (each the bytes of its last
 * committed put), kept in segments of the page-locked store, and once sealed the immutable artifact
 * in the store under the version's name.
 *
 * <p>Life: {@code Open} (puts, upserts, reservations) → {@link #seal} → {@code Sealed}: the files
 * ({@code model.safetensors}, or {@code manifest.json} + {@code rank_NNNNN.safetensors} for the
 * ranks written here) are complete in the store with a SHA-256 each, every piece is hashed, and
 * nothing changes any more. A put that fails (bad input, the writer gone mid-body) changes nothing;
 * a seal that is refused (writes in flight, an incomplete rank) leaves the version open.
 *
 * <p>Thread-safe. Batches of different ranks and names may stream concurrently; the first committed
 * write of a name wins a put race, the last an upsert race.
 */
public final class WritableVersion {
  private static final Logger log = LoggerFactory.getLogger(WritableVersion.class);

  /** Where a version is in its life. */
  public enum State {
    Open,
    Sealing,
    Sealed,
    Failed
  }

  private final WriteService service;
  private final String name;
  private final String kind;
  private final Map<String, String> metadata;
  private final Path dir;
  private final Instant created;

  private State state = State.Open; // guarded by this
  private String failure; // guarded by this
  private BatchPlan.Layout layout; // guarded by this
  private final Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
  private final TreeMap<Integer, Map<String, Slot>> slots = new TreeMap<>();
  private final Map<Integer, VersionWrite> inFlight = new LinkedHashMap<>();
  private final List<Segment> segments = new ArrayList<>();
  private int nextId = 1;
  private SealRecord sealed;

  /** A name's current bytes: a tensor of a segment. */
  private record Slot(Segment segment, TensorInfo info) {}

  WritableVersion(
      WriteService service, String name, String kind, Map<String, String> metadata, Path dir) {
    this.service = service;
    this.name = name;
    this.kind = kind;
    this.metadata = Map.copyOf(metadata);
    this.dir = dir;
    this.created = Instant.now();
  }

  public String name() {
    return name;
  }

  public String kind() {
    return kind;
  }

  public Map<String, String> metadata() {
    return metadata;
  }

  public synchronized State state() {
    return state;
  }

  /** The seal record once sealed, else null. */
  public synchronized SealRecord sealRecord() {
    return sealed;
  }

  Path directory() {
    return dir;
  }

  // ------------------------------------------------------------------ writing

  /**
   * Starts a batch: checks it against what the version holds, stages its segment in the page-locked
   * store (header written) and returns the handle to fill it through.
   *
   * @param upsert replace names already written (else a written name is {@code TensorExists})
   * @param reservation the writer fills the segment itself (zero-copy)
   * @throws WriteException {@code Sealed}, {@code LayoutConflict}, {@code TensorExists}, the
   *     store's refusals (e.g. 507 {@code InsufficientMemory}); nothing changed
   */
  public VersionWrite begin(BatchPlan plan, boolean upsert, boolean reservation)
      throws WriteException {
    int id;
    synchronized (this) {
      checkOpen("put into");
      checkLayout(plan);
      checkCollisions(plan, upsert, true);
      id = nextId++;
      inFlight.put(id, null); // a seal waits for it from now on
      if (layout == null) {
        layout = plan.layout();
      }
    }
    Segment segment = null;
    try {
      segment = stage(id, plan);
      VersionWrite w = new VersionWrite(this, id, plan, segment, upsert, reservation);
      synchronized (this) {
        inFlight.put(id, w);
      }
      return w;
    } catch (WriteException | RuntimeException e) {
      synchronized (this) {
        inFlight.remove(id);
        notifyAll();
      }
      if (segment != null) {
        segment.file.close();
      }
      throw e;
    }
  }

  private Segment stage(int id, BatchPlan plan) throws WriteException {
    List<TensorDeclaration> decls = new ArrayList<>();
    for (BatchPlan.Planned p : plan.tensors()) {
      decls.add(p.stored());
    }
    Map<String, String> meta = fileMetadata(plan.layout(), plan.rank());
    byte[] headerBytes;
    SafetensorsHeader header;
    try {
      header = SafetensorsWriter.layout(decls, meta);
      headerBytes = SafetensorsWriter.headerBytes(decls, meta);
    } catch (IllegalArgumentException e) {
      throw WriteException.bad("InvalidTensor", "version " + name + ": " + e.getMessage());
    }
    Path file = dir.resolve(String.format("seg-%06d.safetensors", id));
    StagedFile staged;
    try {
      staged = service.store().stage(file, header.fileSize());
    } catch (StoreException e) {
      throw WriteService.storeFailure(name, e);
    }
    staged.write(0, ByteBuffer.wrap(headerBytes));
    return new Segment(id, plan.rank(), staged, header);
  }

  /**
   * Makes a batch part of the version: each of its names now reads the batch's bytes (replacing an
   * upserted name's earlier bytes, whose segment is freed once nothing in it is current).
   *
   * @param expectedSha256 per tensor name, the SHA-256 (hex) its stored bytes must have, or empty;
   *     a reservation's writer can pass them so that the data plane checks what it did not see
   * @throws WriteException {@code TensorExists} (a concurrent put of a name committed first),
   *     {@code LayoutConflict}, {@code DigestMismatch}, {@code NoSuchReservation}; the batch is
   *     then aborted and the version unchanged
   */
  public void commit(VersionWrite w, Map<String, String> expectedSha256) throws WriteException {
    try {
      for (Map.Entry<String, String> e : expectedSha256.entrySet()) {
        VersionWrite.Slot slot =
            w.slots().stream()
                .filter(s -> s.name().equals(e.getKey()))
                .findFirst()
                .orElseThrow(
                    () ->
                        WriteException.bad(
                            "BadRequest",
                            "sha256 given for \""
                                + e.getKey()
                                + "\", which is not a tensor of batch "
                                + w.id()));
        String actual = sha256(w.segment().file, slot.offset(), slot.length());
        if (!actual.equalsIgnoreCase(e.getValue())) {
          throw WriteException.bad(
              "DigestMismatch",
              "version "
                  + name
                  + ": tensor \""
                  + e.getKey()
                  + "\" has sha256 "
                  + actual
                  + " in the store but the writer expected "
                  + e.getValue().toLowerCase()
                  + "; the batch is dropped");
        }
      }
    } catch (WriteException e) {
      abort(w);
      throw e;
    }
    synchronized (this) {
      if (inFlight.get(w.id()) != w) {
        throw new WriteException(
            404,
            "NoSuchReservation",
            "version " + name + ": batch " + w.id() + " is not in flight (committed or dropped)");
      }
      try {
        checkOpen("commit into");
        checkLayout(w.plan());
        checkCollisions(w.plan(), w.upsert(), false);
      } catch (WriteException e) {
        inFlight.remove(w.id());
        notifyAll();
        w.segment().file.close();
        throw e;
      }
      inFlight.remove(w.id());
      Segment s = w.segment();
      segments.add(s);
      Map<String, Slot> rankSlots =
          slots.computeIfAbsent(w.plan().rank(), r -> new LinkedHashMap<>());
      for (BatchPlan.Planned p : w.plan().tensors()) {
        String n = p.put().name();
        Slot before = rankSlots.put(n, new Slot(s, s.header.tensor(n).orElseThrow()));
        entries.put(n, p.entry());
        if (before != null) {
          release(before.segment());
        }
      }
      notifyAll();
    }
  }

  /** Drops a batch that is in flight: its segment is freed; the version is unchanged. */
  public void abort(VersionWrite w) {
    synchronized (this) {
      if (inFlight.get(w.id()) != w) {
        return;
      }
      inFlight.remove(w.id());
      notifyAll();
    }
    w.segment().file.close();
  }

  /** The batch in flight with this id, if any. */
  public synchronized VersionWrite inFlight(int id) {
    return inFlight.get(id);
  }

  private void release(Segment s) {
    s.live--;
    if (s.live == 0) {
      segments.remove(s);
      s.file.close();
    }
  }

  private void checkOpen(String what) throws WriteException {
    if (state == State.Sealed || state == State.Sealing) {
      throw WriteException.conflict(
          "Sealed",
          "cannot "
              + what
              + " version "
              + name
              + ": it is "
              + (state == State.Sealed ? "sealed" : "being sealed")
              + " and sealed versions are immutable; write a new version");
    }
    if (state == State.Failed) {
      throw WriteException.conflict(
          "VersionFailed",
          "cannot " + what + " version " + name + ": it failed (" + failure + "); drop it");
    }
  }

  private void checkLayout(BatchPlan plan) throws WriteException {
    if (layout != null && !layout.equals(plan.layout())) {
      throw WriteException.conflict(
          "LayoutConflict",
          "version "
              + name
              + " is a "
              + layout
              + " but this batch writes a "
              + plan.layout()
              + "; one version has one layout (its first batch sets it)");
    }
  }

  /** Checks names against what is committed (and, when starting, what is in flight). */
  private void checkCollisions(BatchPlan plan, boolean upsert, boolean starting)
      throws WriteException {
    Map<String, Slot> mine = slots.getOrDefault(plan.rank(), Map.of());
    for (BatchPlan.Planned p : plan.tensors()) {
      String n = p.put().name();
      if (!upsert && mine.containsKey(n)) {
        throw WriteException.conflict(
            "TensorExists",
            "version "
                + name
                + ": tensor \""
                + n
                + "\""
                + (plan.layout().shards() ? " of tp rank " + plan.rank() : "")
                + " is written already; put refuses to replace it (its bytes are kept), upsert"
                + " replaces it");
      }
      if (!upsert && starting) {
        for (VersionWrite other : inFlight.values()) {
          if (other != null
              && !other.upsert()
              && other.plan().rank() == plan.rank()
              && other.plan().tensors().stream().anyMatch(t -> t.put().name().equals(n))) {
            throw WriteException.conflict(
                "TensorExists",
                "version "
                    + name
                    + ": tensor \""
                    + n
                    + "\" is being put by batch "
                    + other.id()
                    + " right now; put one name once");
          }
        }
      }
      ShardManifest.Entry e = entries.get(n);
      if (e != null && !e.equals(p.entry())) {
        boolean onlyHere =
            slots.entrySet().stream()
                .filter(r -> r.getValue().containsKey(n))
                .allMatch(r -> r.getKey() == plan.rank());
        if (!(upsert && onlyHere)) {
          throw WriteException.conflict(
              "LayoutConflict",
              "version "
                  + name
                  + ": tensor \""
                  + n
                  + "\" is stored as "
                  + e
                  + " but this batch (tp rank "
                  + plan.rank()
                  + ") declares "
                  + p.entry()
                  + "; every rank holds the same tensor, split the same way");
        }
      }
    }
  }

  // ------------------------------------------------------------------ seal

  /**
   * Seals the version: lays out its files, installs them in the store as the artifact named after
   * the version (moving a segment that is already a whole file, copying otherwise), computes every
   * file's and every piece's SHA-256, and makes it immutable.
   *
   * @throws WriteException 409 {@code Sealed}, {@code WritesInFlight} (naming the batches), {@code
   *     IncompleteRank} (a rank lacks a tensor another rank has), {@code EmptyArtifact}; the
   *     version stays open and unchanged. 5xx on a store failure: the version is then {@code
   *     Failed}.
   */
  public SealRecord seal() throws WriteException {
    List<Segment> segs;
    Map<String, ShardManifest.Entry> ents;
    TreeMap<Integer, Map<String, Slot>> snapshot = new TreeMap<>();
    BatchPlan.Layout lay;
    synchronized (this) {
      if (state == State.Sealed) {
        return sealed;
      }
      checkOpen("seal");
      expireReservations();
      if (!inFlight.isEmpty()) {
        throw WriteException.conflict(
            "WritesInFlight",
            "version "
                + name
                + " has "
                + inFlight.size()
                + " batches in flight ("
                + describeInFlight()
                + "); finish (commit) or drop them before sealing");
      }
      if (entries.isEmpty()) {
        throw WriteException.conflict(
            "EmptyArtifact", "version " + name + " holds no tensors; nothing to seal");
      }
      for (Map.Entry<Integer, Map<String, Slot>> r : slots.entrySet()) {
        for (String n : entries.keySet()) {
          if (!r.getValue().containsKey(n)) {
            throw WriteException.conflict(
                "IncompleteRank",
                "version "
                    + name
                    + ": tp rank "
                    + r.getKey()
                    + " lacks tensor \""
                    + n
                    + "\" that "
                    + (slots.size() > 1 ? "another rank" : "the layout")
                    + " holds; every rank file holds every tensor of the manifest");
          }
        }
        snapshot.put(r.getKey(), new LinkedHashMap<>(r.getValue()));
      }
      state = State.Sealing;
      segs = List.copyOf(segments);
      ents = new LinkedHashMap<>(entries);
      lay = layout;
    }
    Installed installed;
    try {
      installed = install(lay, ents, snapshot);
    } catch (WriteException e) {
      synchronized (this) {
        state = State.Open; // refused before anything moved: every segment is as it was
        notifyAll();
      }
      throw e;
    }
    try {
      SealRecord record = fill(lay, snapshot, installed);
      synchronized (this) {
        sealed = record;
        state = State.Sealed;
        segments.clear();
        notifyAll();
      }
      for (Segment s : segs) {
        s.file.close(); // moved ones are the artifact's now; the rest are freed
      }
      return record;
    } catch (WriteException e) {
      synchronized (this) {
        state = State.Failed;
        failure = e.getMessage();
        notifyAll();
      }
      throw e;
    }
  }

  private String describeInFlight() {
    List<String> out = new ArrayList<>();
    for (Map.Entry<Integer, VersionWrite> e : inFlight.entrySet()) {
      VersionWrite w = e.getValue();
      out.add(
          (w != null && w.reservation() ? "reservation " : "put ")
              + e.getKey()
              + (w == null ? " (starting)" : " of " + w.plan().tensors().size() + " tensors"));
    }
    return String.join(", ", out);
  }

  /** Drops reservations left unfilled for longer than the service's reservation timeout. */
  private void expireReservations() {
    Duration timeout = service.reservationTimeout();
    long now = System.nanoTime();
    for (VersionWrite w : List.copyOf(inFlight.values())) {
      if (w != null && w.reservation() && now - w.startedNanos() > timeout.toNanos()) {
        log.warn(
            "version {}: reservation {} was not committed within {}; dropped",
            name,
            w.id(),
            timeout);
        inFlight.remove(w.id());
        w.segment().file.close();
      }
    }
  }

  /** One file of the sealed version and where its bytes come from. */
  private record Planned(
      String path, long size, Segment moveIn, byte[] content, Composed composed) {}

  /** A rank file assembled from several segments. */
  private record Composed(byte[] header, SafetensorsHeader layout, List<Slot> tensors) {}

  /** The artifact installed in the store and the plan of its files. */
  private record Installed(StoredArtifact stored, List<Planned> files) {}

  private Installed install(
      BatchPlan.Layout lay,
      Map<String, ShardManifest.Entry> ents,
      TreeMap<Integer, Map<String, Slot>> byRank)
      throws WriteException {
    List<Planned> files = new ArrayList<>();
    List<String> keys = new ArrayList<>(ents.keySet());
    if (lay.shards()) {
      ShardManifest manifest =
          new ShardManifest(
              lay.tpSize(), ShardManifest.FORMAT_SAFETENSORS, keys, ents, lay.layoutAxes());
      byte[] json = manifest.toJson();
      files.add(new Planned(ShardManifest.FILE_NAME, json.length, null, json, null));
      for (Map.Entry<Integer, Map<String, Slot>> r : byRank.entrySet()) {
        files.add(
            planFile(ShardManifest.rankFileName(r.getKey()), lay, r.getKey(), keys, r.getValue()));
      }
    } else {
      files.add(planFile(WriteService.PLAIN_FILE, lay, 0, keys, byRank.get(0)));
    }
    files.sort((a, b) -> a.path().compareTo(b.path()));
    List<PinnedStore.InstallFile> install = new ArrayList<>();
    for (Planned p : files) {
      install.add(
          new PinnedStore.InstallFile(
              p.path(), p.size(), p.moveIn() == null ? null : p.moveIn().file));
    }
    try {
      return new Installed(service.store().install(name, install), files);
    } catch (StoreException e) {
      throw WriteService.storeFailure(name, e);
    }
  }

  /** Writes what was not moved in, then hashes; on failure the installed artifact is unloaded. */
  private SealRecord fill(
      BatchPlan.Layout lay, TreeMap<Integer, Map<String, Slot>> byRank, Installed installed)
      throws WriteException {
    StoredArtifact stored = installed.stored();
    List<Planned> files = installed.files();
    try {
      for (Planned p : files) {
        if (p.content() != null) {
          stored.write(p.path(), 0, ByteBuffer.wrap(p.content()));
        } else if (p.composed() != null) {
          Composed c = p.composed();
          stored.write(p.path(), 0, ByteBuffer.wrap(c.header()));
          for (int i = 0; i < c.tensors().size(); i++) {
            Slot s = c.tensors().get(i);
            TensorInfo dst = c.layout().tensors().get(i);
            copy(
                s.segment().file,
                s.segment().dataStart(s.info()),
                stored,
                p.path(),
                c.layout().dataOffset() + dst.begin(),
                s.info().byteLength());
          }
        }
      }
      return hashAndRecord(lay, byRank, stored, files);
    } catch (RuntimeException | WriteException e) {
      try {
        service.store().unload(name);
      } catch (StoreException suppressed) {
        e.addSuppressed(suppressed);
      }
      if (e instanceof WriteException we) {
        throw we;
      }
      throw new WriteException(500, "SealFailed", "version " + name + ": " + e, e);
    }
  }

  private Planned planFile(
      String path,
      BatchPlan.Layout lay,
      int rank,
      List<String> keys,
      Map<String, Slot> slotsOfRank) {
    List<Slot> ordered = new ArrayList<>();
    for (String k : keys) {
      ordered.add(slotsOfRank.get(k));
    }
    Segment first = ordered.get(0).segment();
    boolean whole = first.allLive() && first.header.tensors().size() == ordered.size();
    for (int i = 0; whole && i < ordered.size(); i++) {
      whole =
          ordered.get(i).segment() == first
              && first.header.tensors().get(i).name().equals(ordered.get(i).info().name());
    }
    if (whole) {
      return new Planned(path, first.file.size(), first, null, null);
    }
    List<TensorDeclaration> decls = new ArrayList<>();
    for (Slot s : ordered) {
      decls.add(s.info().declaration());
    }
    Map<String, String> meta = fileMetadata(lay, rank);
    SafetensorsHeader h = SafetensorsWriter.layout(decls, meta);
    byte[] header = SafetensorsWriter.headerBytes(decls, meta);
    return new Planned(path, h.fileSize(), null, null, new Composed(header, h, ordered));
  }

  private static void copy(
      StagedFile from, long fromOffset, StoredArtifact to, String path, long toOffset, long len) {
    long chunk = 1L << 30;
    for (long done = 0; done < len; done += chunk) {
      int n = (int) Math.min(chunk, len - done);
      to.write(path, toOffset + done, from.readOnly(fromOffset + done, n));
    }
  }

  /**
   * Every file's SHA-256 (marked complete in the store) and every piece's, in parallel per file.
   */
  private SealRecord hashAndRecord(
      BatchPlan.Layout lay,
      TreeMap<Integer, Map<String, Slot>> byRank,
      StoredArtifact stored,
      List<Planned> files)
      throws WriteException {
    int pieceSize = service.pieceSize();
    PieceMap map = new PieceMap(stored.files(), pieceSize);
    String[] pieceHex = new String[map.size()];
    Map<String, String> fileSha = new LinkedHashMap<>();
    ExecutorService pool =
        Executors.newFixedThreadPool(
            Math.max(1, Math.min(files.size(), Runtime.getRuntime().availableProcessors())),
            r -> {
              Thread t = new Thread(r, "seal-" + name);
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<String>> futures = new ArrayList<>();
      for (Planned f : files) {
        futures.add(
            pool.submit(
                () -> {
                  MessageDigest one = MessageDigest.getInstance("SHA-256");
                  for (PieceMap.Piece p : map.pieces()) {
                    if (p.path().equals(f.path())) {
                      one.update(stored.readOnly(p.path(), p.offset(), p.length()));
                      pieceHex[p.index()] = HexFormat.of().formatHex(one.digest());
                    }
                  }
                  return stored.markComplete(f.path()); // the file's SHA-256, recorded
                }));
      }
      for (int i = 0; i < files.size(); i++) {
        fileSha.put(files.get(i).path(), futures.get(i).get());
      }
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof StoreException se) {
        throw WriteService.storeFailure(name, se);
      }
      throw new WriteException(500, "SealFailed", "version " + name + ": " + c, c);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WriteException(
          503, "Interrupted", "version " + name + ": interrupted while sealing");
    } finally {
      pool.shutdownNow();
    }
    List<SealRecord.FileEntry> entriesOut = new ArrayList<>();
    for (Planned f : files) {
      String header = null;
      if (f.content() != null) {
        header = Base64.getEncoder().encodeToString(f.content());
      } else if (f.path().endsWith(".safetensors")) {
        byte[] prefix = new byte[SafetensorsHeader.LENGTH_PREFIX_BYTES];
        stored.read(f.path(), 0, ByteBuffer.wrap(prefix));
        long len = ByteBuffer.wrap(prefix).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
        byte[] all = new byte[Math.toIntExact(SafetensorsHeader.LENGTH_PREFIX_BYTES + len)];
        stored.read(f.path(), 0, ByteBuffer.wrap(all));
        header = Base64.getEncoder().encodeToString(all);
      }
      entriesOut.add(new SealRecord.FileEntry(f.path(), f.size(), fileSha.get(f.path()), header));
    }
    return new SealRecord(
            name,
            kind,
            metadata,
            lay.shards() ? SealRecord.SHARDS : SealRecord.PLAIN,
            lay.tpSize(),
            lay.shards() ? List.copyOf(byRank.keySet()) : List.of(),
            entriesOut,
            pieceSize,
            Arrays.asList(pieceHex),
            Instant.now().toString(),
            service.writerId())
        .checked();
  }

  /** The {@code __metadata__} of a file of this version: tp rank and size first for shards. */
  private Map<String, String> fileMetadata(BatchPlan.Layout lay, int rank) {
    Map<String, String> m = new LinkedHashMap<>();
    if (lay.shards()) {
      m.put("tp_rank", Integer.toString(rank));
      m.put("tp_size", Integer.toString(lay.tpSize()));
    }
    new TreeMap<>(metadata).forEach(m::put);
    return m.isEmpty() ? null : m;
  }

  private static String sha256(StagedFile f, long offset, long length) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      long chunk = 1L << 30;
      for (long done = 0; done < length; done += chunk) {
        md.update(f.readOnly(offset + done, (int) Math.min(chunk, length - done)));
      }
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  // ------------------------------------------------------------------ views

  /**
   * What the version holds now.
   *
   * @param name the version
   * @param kind its kind
   * @param state its state
   * @param layout {@code plain}, {@code shards} or null before the first batch
   * @param tpSize tp size of a shard layout
   * @param ranks ranks written here
   * @param tensors names written (per rank once)
   * @param storedBytes bytes in committed segments (or the sealed files)
   * @param inFlight batches in flight
   * @param failure why it failed, or null
   * @param created when it was created
   */
  public record Summary(
      String name,
      String kind,
      State state,
      String layout,
      int tpSize,
      List<Integer> ranks,
      int tensors,
      long storedBytes,
      int inFlight,
      String failure,
      String created) {}

  public synchronized Summary summary() {
    long bytes = 0;
    if (sealed != null) {
      bytes = sealed.totalBytes();
    } else {
      for (Segment s : segments) {
        bytes += s.file.size();
      }
    }
    return new Summary(
        name,
        kind,
        state,
        layout == null ? null : layout.shards() ? SealRecord.SHARDS : SealRecord.PLAIN,
        layout == null ? 0 : layout.tpSize(),
        List.copyOf(slots.keySet()),
        entries.size(),
        bytes,
        inFlight.size(),
        failure,
        created.toString());
  }

  /** Frees everything of an unsealed version (segments, batches in flight). */
  void discard() {
    List<Segment> segs;
    List<VersionWrite> writes;
    synchronized (this) {
      segs = List.copyOf(segments);
      segments.clear();
      writes = new ArrayList<>();
      for (VersionWrite w : inFlight.values()) {
        if (w != null) {
          writes.add(w);
        }
      }
      inFlight.clear();
      if (state != State.Sealed) {
        state = State.Failed;
        failure = failure == null ? "dropped" : failure;
      }
      notifyAll();
    }
    for (VersionWrite w : writes) {
      w.segment().file.close();
    }
    for (Segment s : segs) {
      s.file.close();
    }
  }

  @Override
  public String toString() {
    return "version " + name + " (" + summary().state() + ")";
  }
}
