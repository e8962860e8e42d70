package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.store.FileTrees;
import io.tensorcast.dataplane.store.InsufficientMemoryException;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The write half of a node's data plane: named versions that processes on the node put tensors
 * into, seal, and that are then immutable artifacts of the page-locked store (read by consumers,
 * served to peers, saved to object storage).
 *
 * <p>Staged bytes live under the store's writes directory ({@link PinnedStore#writesDirectory()}):
 * {@code <writes>/<version>/seg-NNNNNN.safetensors}, one per batch. On start the service removes
 * whatever an earlier process left there (a version is never half-sealed: it was in the store
 * complete or not at all), so nothing half-written survives a restart.
 *
 * <p>Thread-safe.
 */
public final class WriteService implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(WriteService.class);

  /** The single file of a plain (no parallelism) version. */
  public static final String PLAIN_FILE = "model.safetensors";

  /** Kinds a version may declare ({@code spec.kind} of a ModelArtifact). */
  public static final Set<String> KINDS = Set.of("ModelWeights", "KVCache", "RLCheckpoint");

  private static final String KIND_NAMES = "ModelWeights, KVCache, RLCheckpoint";

  private static final Pattern NAME = Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  private static final int MAX_NAME = 63;
  private static final int MAX_METADATA_ENTRIES = 64;

  /**
   * How the service runs.
   *
   * @param writerId this data plane's member id (recorded in seal records)
   * @param pieceSize bytes per piece of a sealed version (what peers transfer and hash)
   * @param reservationTimeout a reservation not committed within this is dropped at the next seal
   * @param maxVersions most versions (open or sealed) held at once
   * @param artifactKind the kind of the artifact the versions belong to ({@code spec.kind}, one of
   *     {@link #KINDS}): a version created without a kind gets it and one of another kind is
   *     refused; null when the service serves no ModelArtifact (a version without a kind is then
   *     {@code ModelWeights})
   */
  public record Settings(
      String writerId,
      int pieceSize,
      Duration reservationTimeout,
      int maxVersions,
      String artifactKind) {
    public Settings {
      Objects.requireNonNull(writerId, "writerId");
      Objects.requireNonNull(reservationTimeout, "reservationTimeout");
      if (pieceSize < 1) {
        throw new IllegalArgumentException("pieceSize must be >= 1");
      }
      if (maxVersions < 1) {
        throw new IllegalArgumentException("maxVersions must be >= 1");
      }
      if (artifactKind != null && !KINDS.contains(artifactKind)) {
        throw new IllegalArgumentException(
            "artifact kind '" + artifactKind + "' is not one of " + KIND_NAMES);
      }
    }

    /** Settings of a service that serves no ModelArtifact (any kind; ModelWeights by default). */
    public Settings(String writerId, int pieceSize, Duration reservationTimeout, int maxVersions) {
      this(writerId, pieceSize, reservationTimeout, maxVersions, null);
    }
  }

  private final PinnedStore store;
  private final Settings settings;
  private final Map<String, WritableVersion> versions = new LinkedHashMap<>();

  /**
   * @throws IOException if the writes directory cannot be created or emptied
   */
  public WriteService(PinnedStore store, Settings settings) throws IOException {
    this.store = Objects.requireNonNull(store, "store");
    this.settings = Objects.requireNonNull(settings, "settings");
    Path writes = store.writesDirectory();
    Files.createDirectories(writes);
    try (Stream<Path> left = Files.list(writes)) {
      for (Path p : (Iterable<Path>) left::iterator) {
        if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
          FileTrees.deleteTree(p);
          log.info("removed {}: batches of a version left unsealed by an earlier process", p);
        }
      }
    }
  }

  PinnedStore store() {
    return store;
  }

  int pieceSize() {
    return settings.pieceSize();
  }

  String writerId() {
    return settings.writerId();
  }

  Duration reservationTimeout() {
    return settings.reservationTimeout();
  }

  /** The directory writers see: the segments of version {@code v} are under {@code <dir>/v/}. */
  public Path writesDirectory() {
    return store.writesDirectory();
  }

  /**
   * Creates a version, or returns the open one of that name when kind and metadata are the same (a
   * retried create).
   *
   * @param name a DNS-1123 label (lowercase letters, digits, '-'; at most 63): the sealed
   *     artifact's store id
   * @param kind {@code ModelWeights}, {@code KVCache} or {@code RLCheckpoint}; when null, the
   *     artifact's kind ({@link Settings#artifactKind()}), or {@code ModelWeights} when the service
   *     serves no artifact
   * @param metadata written into every file's {@code __metadata__}; at most {@value
   *     #MAX_METADATA_ENTRIES} entries, keys other than {@code tp_rank} and {@code tp_size}
   * @throws WriteException 400 {@code InvalidName}, {@code BadRequest}, {@code KindMismatch} (a
   *     kind other than the artifact's); 409 {@code VersionExists} (another kind or metadata, or
   *     sealed already, or a store artifact of that name), {@code TooManyVersions}
   */
  public WritableVersion create(String name, String kind, Map<String, String> metadata)
      throws WriteException {
    checkName(name);
    String artifactKind = settings.artifactKind();
    String k = kind != null ? kind : artifactKind != null ? artifactKind : "ModelWeights";
    if (!KINDS.contains(k)) {
      throw WriteException.bad("BadRequest", "kind '" + k + "' is not one of " + KIND_NAMES);
    }
    if (artifactKind != null && !artifactKind.equals(k)) {
      throw WriteException.bad(
          "KindMismatch",
          "version "
              + name
              + ": kind '"
              + k
              + "' differs from the artifact's kind "
              + artifactKind
              + " (spec.kind): leave kind out, or send "
              + artifactKind);
    }
    Map<String, String> meta = metadata == null ? Map.of() : metadata;
    checkMetadata(meta);
    synchronized (this) {
      WritableVersion v = versions.get(name);
      if (v != null) {
        if (v.state() == WritableVersion.State.Open
            && v.kind().equals(k)
            && v.metadata().equals(meta)) {
          return v;
        }
        throw WriteException.conflict(
            "VersionExists",
            "version "
                + name
                + " exists ("
                + v.state()
                + ", kind "
                + v.kind()
                + "); versions are immutable once sealed: create another name, or drop it first");
      }
      if (store.get(name).isPresent()) {
        throw WriteException.conflict(
            "VersionExists",
            "the store already holds an artifact named " + name + "; pick another version name");
      }
      if (versions.size() >= settings.maxVersions()) {
        throw WriteException.conflict(
            "TooManyVersions",
            "this data plane holds "
                + versions.size()
                + " versions (at most "
                + settings.maxVersions()
                + "); drop an old one first");
      }
      Path dir = store.writesDirectory().resolve(name);
      try {
        Files.createDirectories(dir);
      } catch (IOException e) {
        throw new WriteException(500, "StoreIoError", "cannot create " + dir + ": " + e, e);
      }
      v = new WritableVersion(this, name, k, meta, dir);
      versions.put(name, v);
      log.info("version {} created (kind {})", name, k);
      return v;
    }
  }

  /**
   * The version of that name.
   *
   * @throws WriteException 404 {@code NoSuchVersion}
   */
  public synchronized WritableVersion version(String name) throws WriteException {
    WritableVersion v = versions.get(name);
    if (v == null) {
      throw new WriteException(
          404,
          "NoSuchVersion",
          "no version named "
              + name
              + " on this data plane"
              + (versions.isEmpty()
                  ? ""
                  : " (it has " + String.join(", ", versions.keySet()) + ")"));
    }
    return v;
  }

  /** Every version, in creation order. */
  public synchronized List<WritableVersion> versions() {
    return List.copyOf(versions.values());
  }

  /** The sealed versions in seal order. */
  public List<WritableVersion> sealed() {
    List<WritableVersion> out = new ArrayList<>();
    for (WritableVersion v : versions()) {
      if (v.state() == WritableVersion.State.Sealed) {
        out.add(v);
      }
    }
    out.sort((a, b) -> a.sealRecord().sealedAt().compareTo(b.sealRecord().sealedAt()));
    return out;
  }

  /** The sealed artifact of version {@code name} in the store, if sealed. */
  public Optional<StoredArtifact> sealedArtifact(String name) {
    WritableVersion v;
    synchronized (this) {
      v = versions.get(name);
    }
    if (v == null || v.state() != WritableVersion.State.Sealed) {
      return Optional.empty();
    }
    return store.get(name);
  }

  /**
   * Drops a version: an open one loses its batches, a sealed one leaves the store.
   *
   * @throws WriteException 404 {@code NoSuchVersion}; 409 {@code Sealing} while it is being sealed
   */
  public void drop(String name) throws WriteException {
    WritableVersion v = version(name);
    if (v.state() == WritableVersion.State.Sealing) {
      throw WriteException.conflict(
          "Sealing", "version " + name + " is being sealed; drop it once sealed");
    }
    synchronized (this) {
      versions.remove(name);
    }
    v.discard();
    try {
      store.unload(name);
      FileTrees.deleteTree(v.directory());
    } catch (StoreException | IOException e) {
      throw new WriteException(500, "StoreIoError", "version " + name + ": " + e.getMessage(), e);
    }
    log.info("version {} dropped", name);
  }

  /** Frees the staged bytes of every unsealed version; sealed ones stay in the store. */
  @Override
  public void close() {
    for (WritableVersion v : versions()) {
      if (v.state() != WritableVersion.State.Sealed) {
        v.discard();
      }
    }
  }

  static WriteException storeFailure(String version, StoreException e) {
    int status =
        e instanceof InsufficientMemoryException
            ? 507
            : switch (e.reason()) {
              case InvalidArtifactId, InvalidPath, InvalidSize -> 400;
              case ArtifactExists -> 409;
              case FilesystemFull -> 507;
              default -> 500;
            };
    return new WriteException(
        status, e.reason().name(), "version " + version + ": " + e.getMessage(), e);
  }

  static void checkName(String name) throws WriteException {
    if (name == null || name.length() > MAX_NAME || !NAME.matcher(name).matches()) {
      throw WriteException.bad(
          "InvalidName",
          "version name "
              + (name == null ? "null" : "'" + name + "'")
              + " is not a DNS-1123 label: lowercase letters, digits and '-', starting and ending"
              + " with a letter or digit, at most "
              + MAX_NAME
              + " characters (e.g. step-000120, or kv-<first 32 hex of a prefix hash>)");
    }
  }

  private static void checkMetadata(Map<String, String> meta) throws WriteException {
    if (meta.size() > MAX_METADATA_ENTRIES) {
      throw WriteException.bad(
          "BadRequest",
          "metadata has " + meta.size() + " entries, at most " + MAX_METADATA_ENTRIES);
    }
    for (Map.Entry<String, String> e : meta.entrySet()) {
      if (e.getKey() == null || e.getValue() == null) {
        throw WriteException.bad("BadRequest", "metadata keys and values must be strings");
      }
      if (e.getKey().equals("tp_rank") || e.getKey().equals("tp_size")) {
        throw WriteException.bad(
            "BadRequest",
            "metadata key '"
                + e.getKey()
                + "' is reserved: the data plane writes it into every rank file");
      }
      if (e.getKey().length() > 256 || e.getValue().length() > 4096) {
        throw WriteException.bad(
            "BadRequest",
            "metadata entry '"
                + e.getKey().substring(0, Math.min(64, e.getKey().length()))
                + "' is too long (keys at most 256, values at most 4096 characters)");
      }
    }
  }
}
