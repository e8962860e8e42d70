package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.store.LockPolicy;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * Everything a {@link WriteNode} needs (what {@code dataplane serve-writes} reads from its command
 * line and environment).
 *
 * @param artifactId the node's id for status and metrics (the ModelArtifact generation's id)
 * @param listen control endpoint address
 * @param controlAuth the control endpoint's read and admin tokens (the read token is also what this
 *     node presents to the writers' control endpoints: every pod of the artifact holds it)
 * @param storeRoot the page-locked store's root
 * @param budgetBytes the store's budget in bytes; 0 = measured
 * @param lockPolicy whether failing to {@code mlock} is an error
 * @param writer whether processes on this node write versions here (the put API is served)
 * @param writeTokenFile the write token's file (required for a writer)
 * @param writeTcp a TCP address for the put API besides its unix socket, or null
 * @param peer peer transport settings (id, listen address, piece size, static peers, timeouts, the
 *     peer secret: required, it authenticates members and the writers' seal records)
 * @param writers the writers of the artifact: member id to control endpoint {@code host:port} (this
 *     node included when it writes)
 * @param want what this node keeps of each version
 * @param followInterval how often the writers are asked for new sealed versions
 * @param retain versions kept on this node (the newest, and older ones still held for consumers)
 * @param maxVersions most versions the put API holds open or sealed at once
 * @param reservationTimeout a reservation not committed within this is dropped at the next seal
 * @param kind the artifact's kind ({@code spec.kind}): what a version written here is recorded as
 *     (see {@link WriteService.Settings#artifactKind()}); null: not bound to an artifact
 * @param env the process environment (save credentials: {@code AWS_*}, {@code OSS_*}, {@code
 *     HF_TOKEN})
 */
public record WriteNodeSettings(
    String artifactId,
    InetSocketAddress listen,
    ControlAuth controlAuth,
    Path storeRoot,
    long budgetBytes,
    LockPolicy lockPolicy,
    boolean writer,
    Path writeTokenFile,
    InetSocketAddress writeTcp,
    PeerSettings peer,
    Map<String, String> writers,
    int writerControlPort,
    Want want,
    Duration followInterval,
    int retain,
    int maxVersions,
    Duration reservationTimeout,
    String kind,
    Function<String, String> env) {

  public WriteNodeSettings {
    Objects.requireNonNull(artifactId, "artifactId");
    Objects.requireNonNull(listen, "listen");
    Objects.requireNonNull(storeRoot, "storeRoot");
    Objects.requireNonNull(lockPolicy, "lockPolicy");
    Objects.requireNonNull(controlAuth, "controlAuth");
    Objects.requireNonNull(peer, "peer");
    if (peer.secret() == null) {
      throw new IllegalArgumentException(
          "a written artifact needs its peer secret (--peer-secret-file): members prove it before"
              + " any piece moves, and the writers' seal records are tagged with it");
    }
    writers = Map.copyOf(writers);
    Objects.requireNonNull(want, "want");
    Objects.requireNonNull(followInterval, "followInterval");
    Objects.requireNonNull(reservationTimeout, "reservationTimeout");
    Objects.requireNonNull(env, "env");
    if (writer && writeTokenFile == null) {
      throw new IllegalArgumentException("a writer node needs a write token file");
    }
    if (writer && !writers.containsKey(peer.peerId())) {
      throw new IllegalArgumentException(
          "a writer node must be one of --writers (its id '" + peer.peerId() + "' is not)");
    }
    if (writer && want.mode() != Want.Mode.OWN) {
      throw new IllegalArgumentException(
          "a writer node keeps the part it wrote (--want own); a full copy or other tp ranks are"
              + " kept by reader nodes");
    }
    if (writers.isEmpty()) {
      throw new IllegalArgumentException("--writers names no writer");
    }
    if (retain < 1) {
      throw new IllegalArgumentException("--retain must be >= 1");
    }
  }

  /**
   * What a node keeps of each version.
   *
   * @param mode {@link Mode}
   * @param tpSize for {@link Mode#RANKS}: the tp size of the node's consumers
   * @param ranks for {@link Mode#RANKS}: their tp ranks
   */
  public record Want(Mode mode, int tpSize, SortedSet<Integer> ranks) {
    public Want {
      Objects.requireNonNull(mode, "mode");
      ranks = ranks == null ? new TreeSet<>() : new TreeSet<>(ranks);
      if (mode == Mode.RANKS && (ranks.isEmpty() || tpSize < 1)) {
        throw new IllegalArgumentException("want tp ranks needs a tp size and at least one rank");
      }
    }

    /** What it keeps. */
    public enum Mode {
      /** Only what it wrote (a writer that serves its part). */
      OWN,
      /** A full copy in the writers' layout (relayed to others; can be saved). */
      ALL,
      /** The shard layout of another tp size, for these ranks only. */
      RANKS
    }

    /**
     * Parses {@code own}, {@code all}, or {@code tp:R1,R2/S} (ranks R1, R2 of tp size S), e.g.
     * {@code tp:0/2} or {@code tp:0,1/2}.
     *
     * @throws IllegalArgumentException naming the text and the expected forms
     */
    public static Want parse(String text) {
      String t = text.trim();
      if (t.equals("own")) {
        return new Want(Mode.OWN, 0, null);
      }
      if (t.equals("all")) {
        return new Want(Mode.ALL, 0, null);
      }
      if (t.startsWith("tp:") && t.indexOf('/') > 3) {
        try {
          int slash = t.indexOf('/');
          int size = Integer.parseInt(t.substring(slash + 1));
          SortedSet<Integer> ranks = new TreeSet<>();
          for (String r : t.substring(3, slash).split(",")) {
            int x = Integer.parseInt(r.trim());
            if (x < 0 || x >= size) {
              throw new IllegalArgumentException("rank " + x + " is outside tp size " + size);
            }
            ranks.add(x);
          }
          return new Want(Mode.RANKS, size, ranks);
        } catch (NumberFormatException e) {
          // fall through to the usage error
        }
      }
      throw new IllegalArgumentException(
          "--want '" + text + "': expected own, all, or tp:RANKS/SIZE (e.g. tp:0/2, tp:0,1/4)");
    }

    @Override
    public String toString() {
      return switch (mode) {
        case OWN -> "own";
        case ALL -> "all";
        case RANKS ->
            "tp:" + String.join(",", ranks.stream().map(String::valueOf).toList()) + "/" + tpSize;
      };
    }
  }
}
