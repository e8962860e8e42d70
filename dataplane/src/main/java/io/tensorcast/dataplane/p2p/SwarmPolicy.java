package io.tensorcast.dataplane.p2p;

import io.tensorcast.api.wire.DataPlaneStatus.DroppedPeer;
import io.tensorcast.api.wire.Membership;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongSupplier;

/**
 * The rules of one swarm member: what to request from whom, which runs of pieces to read from the
 * source, whose piece hashes to trust, whom to drop, whom to serve — and nothing else. No sockets,
 * threads, store or wall clock: it is fed events (a peer connected, a frame arrived, a piece was
 * verified and stored, a source read ended, the membership changed, time passed) and answers with
 * {@link Decision}s that its mechanism carries out ({@link PeerSwarm} with the Netty transport, the
 * source and the store; a discrete-event simulator with virtual links). Time comes from the clock
 * given to the constructor (nanoseconds, any origin), so the same events at the same clock readings
 * give the same decisions: no randomness, every iteration in a fixed order (peers by id).
 *
 * <p>Single-threaded: the owner serialises every call (one thread, or one lock held only for the
 * call and the {@link #drain()} after it). Decisions accumulate in an outbox that {@link #drain()}
 * empties; carry them out in order.
 *
 * <p>The rules (each has a test in {@code SwarmPolicyTest} or {@code SwarmSimTest}):
 *
 * <ul>
 *   <li><b>Plan</b>: {@link SwarmPlan} over (members, live members, holdings), recomputed on every
 *       {@link #tick()}. A member is live while connected, and for the peer timeout after it
 *       disconnected (or, never connected, after this member's fill started or the membership
 *       arrived, whichever is later); a member refused for faults is not live.
 *   <li><b>Source reads</b> ({@link Decision.ReadSource}): a run is the first piece in the plan's
 *       reading order ({@link SwarmPlan#readingOrder}: a file that straddles two members' blocks
 *       first, from both sides of the boundary) that the plan of the moment assigns to this member
 *       and no live peer holds or reads, plus the plan's next pieces in the same file up to the
 *       range size. At most {@link #sourceReadsInFlight} runs from the plan at once, and {@code
 *       concurrency} in all; once only some members have pieces of their share left, the
 *       concurrency is divided among those ({@link #sourceReadsInFlight(int, int, int, int)}). With
 *       more live members than {@code concurrency}, only the first {@code concurrency} of them in
 *       id order with pieces left to read have their turn ({@link #readingTurn}): the swarm reads
 *       with one loader's concurrency. Nothing from the plan until every live member has sent its
 *       BITFIELD in this fill. Each piece of a run is announced with READING when the run starts
 *       (renewed every half peer timeout) and with HAVE the moment it is stored.
 *   <li><b>Last resort</b>: a piece no usable peer offers, whose plan owner is gone, that no live
 *       member holds usably or reads, is read from the source after it starved for the peer
 *       timeout.
 *   <li><b>Requests</b> ({@link Decision.Send} of a REQUEST): at most {@link #maxTotalInFlight} in
 *       all and {@link #perPeerInFlight} per usable peer; the least-loaded peer first (ties in
 *       {@link #tieRank} order, which differs per member), the rarest piece first ({@link
 *       SwarmPlan#rarest}, ties among the first {@link SwarmPlan#TIE_WINDOW} in piece order, chosen
 *       by a hash of this member's id).
 *   <li><b>Stuck, busy, trickle</b>: a request older than the peer timeout is stuck — asked
 *       elsewhere, a fault of its peer — only when that peer delivered no piece bytes at all within
 *       the timeout ({@link #onPieceArrived} for whole pieces, {@link #onPieceProgress} for bytes
 *       of pieces still arriving). {@value #MAX_FAULTS} faults (stuck requests, rejected pieces)
 *       and a peer is not asked for anything again.
 *   <li><b>Hash authority</b>: a piece's expected SHA-256 comes only from its reader ({@link
 *       SwarmPlan#reader}) in a HAVE or BITFIELD on the reader's own connection, or from this
 *       member's own source read. Another member's hash is a claim, neither fetched from nor
 *       planned around, checked once the reader's hash is known (or promoted when the readers
 *       change and it becomes the reader); a differing claim drops that member ({@link
 *       Decision.Drop}) for the life of this policy. READING counts only from a piece's reader; a
 *       member whose READING mark was taken while it was the reader stays the reader of that piece
 *       while its mark is fresh (renewals included), so a read started before a membership change
 *       moved the piece is neither read again nor demoted to a claim. Marks a member sends before
 *       its BITFIELD on a connection count whoever the reader is (its reads in flight when this
 *       member met it: a newcomer does not read them again); from a non-reader such a mark holds
 *       for one peer timeout and is not renewed.
 *   <li><b>Backing</b>: a piece from the peer whose own announcement is the piece's expected hash
 *       that does not hash to it drops that peer at once: it announced a hash it cannot back. The
 *       hashes a dropped or refused peer set are withdrawn for every piece not yet present here, so
 *       the next reader's hash takes their place (the piece is read from the source once, by its
 *       new reader, and fetched from it by the others). A differing hash from another member is a
 *       claim while the expected hash is only a peer's announcement and the piece is not in this
 *       member's store; it is settled (the claimer dropped or believed) once the piece is.
 *   <li><b>Hand-over</b> ({@link Frame.Handover}): a connected member that is the reader of pieces
 *       nobody live holds and announced none of them for {@link #SHARE_STALL_TIMEOUTS} × the peer
 *       timeout (counted from its connection, its last such HAVE, this fill's start or the
 *       membership, whichever is latest) loses its share: it is left out of the plan's live
 *       members, and a HANDOVER naming it goes to every peer, which do the same. Only while this
 *       member's own source reads are not stalled as well (a source outage stalls everyone and must
 *       not make every member read everything). A member whose load failed for good hands over
 *       itself ({@link #leave}). A member whose share progresses far slower than the median
 *       member's is handed over too ({@link #handOverSlow}: HAVEs of its share counted since the
 *       fill or the membership, below {@link #SLOW_FRACTION} of the median's for half a peer
 *       timeout, cleared at {@link #RECOVERED_FRACTION}); the runs a handed-over member has in
 *       flight stay its own while it is connected and its share progresses within the stall
 *       timeout. The handed-over set only grows during a fill and is sent on every new connection,
 *       so the members converge on it; a handed-over member still holds, serves and fetches pieces,
 *       and one that learns it was handed over reads nothing more for the plan. While the swarm
 *       reads in turns, a member whose link is far slower than the others' when its turn comes,
 *       before it read any of its share, hands its own share over ({@link #handOverOwnSlowShare}).
 *   <li><b>Own reads first</b> ({@link #ownReadsFirst}): a member whose share lags the median
 *       member's (within the slow rule's margin) while its holdings grow slower than the others'
 *       (its ingress, not the origin, paces its reads) keeps {@value #OWN_READS_FIRST_DIVISOR}
 *       times fewer peer requests in flight, so its source reads get more of its ingress and its
 *       share keeps the swarm's pace. So does each of the last readers: a member with pieces of its
 *       share left when at most half the live members have any (outside reading turns), since every
 *       member then waits for those shares.
 *   <li><b>Claims checked by the source's digest</b> ({@link #verifiable}): a piece whose reader is
 *       this member, not read yet, that every other live member claims with one hash (this member
 *       joined after the others held it), in a file the source publishes a digest for, is fetched
 *       from a claimant instead of read ({@link Decision.CheckFile}): it stays unannounced and not
 *       present until every piece of its file is in the store and the file matches the source's
 *       digest, then it is present, announced and counted ({@link Decision.Confirmed}); when the
 *       file does not match, its claimed pieces are read from the source, once. So is a piece with
 *       no known hash that at least {@value #SPREAD_CLAIMS} usable peers claim with one hash,
 *       whoever its reader is: it spread on a reader's word before this member could check it (a
 *       member that joined mid-load is the new reader of pieces the old reader read and passed on);
 *       such a piece is never read from the source while so claimed, only fetched once its file is
 *       within reach. Only files whose other readers' pieces are present here, offered by a peer or
 *       so claimed: two members never wait on each other's unchecked pieces.
 *   <li><b>Resume</b> ({@link #resume}): pieces an earlier fill left in the store wait, neither
 *       announced, requested nor read, until their hash is known — the reader's announcement, or
 *       this member's own hash when it is the piece's reader — and are then present and announced
 *       ({@link Decision.Kept}), or dropped and fetched again when the reader's hash differs.
 *   <li><b>Serving</b>: REQUESTs from members in good standing are answered with the piece ({@link
 *       Decision.SendPiece}) or a REJECT; a peer with {@value #MAX_QUEUED_SENDS} requested pieces
 *       still unsent is disconnected. Upload slots: at most {@value #UPLOAD_SLOTS} copies of one
 *       piece are handed to the mechanism at once; further requests for it wait (the piece this
 *       member sent least often goes first when a slot frees; a request that waited half a peer
 *       timeout goes at once while fewer than twice that many copies are out) and a requester's
 *       HAVE of the piece withdraws its waiting request. A piece only a slow member holds thus
 *       reaches a few peers fast instead of every peer slowly. While the swarm reads in turns, at
 *       most {@value #SEND_SLOTS} copies of all pieces together go out at once (old requests
 *       excepted); from a member whose link is far slower than the others' ({@link #linkFarSlower})
 *       one copy at a time, and two of one piece with old requests.
 *   <li><b>Asking again</b>: a request older than a quarter of the peer timeout at a peer that
 *       delivered no piece bytes in that time is withdrawn there, without a fault, when another
 *       usable peer offers the piece, and asked of the least-loaded such peer; the first peer is
 *       not asked for it again until it delivers a piece or a peer timeout passed.
 *   <li><b>Membership</b>: a new epoch is applied; members that left, or moved, are disconnected;
 *       this member dials the members whose id sorts after its own ({@link Decision.Dial}).
 * </ul>
 *
 * @param <C> the mechanism's handle of one authenticated connection, compared by identity
 */
public final class SwarmPolicy<C> {

  /** Faults (bad piece, stuck request) after which a peer is not asked for anything any more. */
  public static final int MAX_FAULTS = 3;

  /**
   * Pieces a peer may have asked for that are still queued to it unsent; one more request closes
   * the connection. Far above any in-flight limit a member uses.
   */
  public static final int MAX_QUEUED_SENDS = 256;

  /**
   * Peer timeouts without progress on its share after which a member's share is handed over: long
   * enough that a member reading its share announces a piece well within it (one piece of at most
   * 64 MiB every 3 × 10 s by default), short enough that an idle member holds the others back for
   * seconds, not minutes.
   */
  public static final int SHARE_STALL_TIMEOUTS = 3;

  /**
   * A member is slow when the pieces of its share it announced fall below this fraction of what the
   * swarm's median member announced in the same time ({@link #handOverSlow}).
   */
  public static final double SLOW_FRACTION = 2.0 / 3;

  /**
   * A slow member is not slow any more once its announced pieces reach this fraction of the median
   * member's: the gap between the two fractions is the rule's hysteresis.
   */
  public static final double RECOVERED_FRACTION = 5.0 / 6;

  /** Pieces a slow member must lag behind the median member before its share is handed over. */
  public static final int LAG_PIECES = 2;

  /**
   * Usable peers that must claim a piece with one hash, in a file the source publishes a digest
   * for, before a member without its hash fetches it on their claims instead of reading it or
   * waiting for its reader ({@link #claimablePieces}): more than its one holder, so some member
   * took it on a reader's announcement.
   */
  static final int SPREAD_CLAIMS = 2;

  /**
   * While a member's own source reads go first ({@link #ownReadsFirst}), it keeps this many times
   * fewer peer requests in flight. Half: in the swarm simulator's N = 8 swarm with one member at
   * half the link, that member's share then ended 1.0 s after the others' instead of 12.6 s; a
   * quarter gave the same p50 across seeds and slowed that member's own load more
   * (docs/DECISIONS.md, 2026-12-03).
   */
  public static final int OWN_READS_FIRST_DIVISOR = 2;

  /**
   * A member's link is far slower than the others' ({@link #linkFarSlower}: it hands over its own
   * share when its reading turn comes and sends one copy at a time) only if its holdings grew by at
   * most this fraction of the median member's: far slower than {@link #SLOW_FRACTION}, since while
   * the origin paces the swarm the members late in id order gain pieces slower for a while (at N =
   * 64 on equal links a third to two thirds of the median).
   */
  public static final double OWN_HANDOVER_FRACTION = 1.0 / 3;

  /**
   * Pieces by which a member's holdings must also trail the median member's gain in the window for
   * {@link #OWN_HANDOVER_FRACTION} to count ({@link #linkFarSlower}): while the origin paces a
   * large swarm every member gains a few pieces per window (5-6 at N = 256 on 128 MiB), and a gain
   * of 1 against 5 says nothing about a member's link.
   */
  public static final int OWN_HANDOVER_GAP = 4 * LAG_PIECES;

  /**
   * Pieces by which a member's share must lag the lower median live member's before it keeps one
   * source read more in flight ({@link #shareLags}): one run of the default 8 MiB range in 1 MiB
   * pieces. Measured at that value only (docs/DECISIONS.md, 2026-12-04).
   */
  public static final int EXTRA_RUN_LAG = 8;

  /** Dropped members {@link #dropped()} remembers, at most. */
  public static final int MAX_DROPPED_REPORTED = 16;

  /**
   * Upload slots per piece: copies of one piece this member hands to its mechanism to send at once;
   * further requests for it wait here ({@link #serve}, {@link #unchoke}) while requests for other
   * pieces go out. A piece only this member holds then reaches a few peers at a good share of the
   * uplink, and the others fetch it from them ({@link #reask}) instead of all sharing a slow
   * uplink.
   */
  public static final int UPLOAD_SLOTS = 4;

  /**
   * Copies of all pieces together this member hands to its mechanism to send at once while the
   * swarm reads in turns (more live members than the concurrency, {@link #readingTurn}); a request
   * that waited half a peer timeout still goes out ({@link #unchoke}). Each copy then gets a sixth
   * of the uplink rather than a share of one copy per requester, so a piece is complete at its
   * first receivers, and passed on by them, sooner; the pipeline term (N−1)·piece/b of such a swarm
   * is the larger part of its time. Not with fewer members, where every member reads its share at
   * once and the uplink's full use is what counts.
   */
  public static final int SEND_SLOTS = 6;

  /**
   * The settings the rules use.
   *
   * @param self this member's id
   * @param peerTimeout the stuck, lost-member and READING-lapse timeout; positive
   * @param maxInFlight most requests outstanding at one peer ({@link #perPeerInFlight}); ≥ 1
   * @param membershipWait how long a fill with a transport waits for a first membership before it
   *     loads alone; not negative
   */
  public record Config(
      String self, Duration peerTimeout, int maxInFlight, Duration membershipWait) {
    public Config {
      Objects.requireNonNull(self, "self");
      Objects.requireNonNull(peerTimeout, "peerTimeout");
      Objects.requireNonNull(membershipWait, "membershipWait");
      if (peerTimeout.isNegative() || peerTimeout.isZero()) {
        throw new IllegalArgumentException("peerTimeout must be positive, got " + peerTimeout);
      }
      if (maxInFlight < 1) {
        throw new IllegalArgumentException("maxInFlight must be >= 1, got " + maxInFlight);
      }
      if (membershipWait.isNegative()) {
        throw new IllegalArgumentException("membershipWait must not be negative");
      }
    }

    /** The rules' part of a member's peer settings. */
    public static Config of(PeerSettings s) {
      return new Config(s.peerId(), s.peerTimeout(), s.maxInFlight(), s.membershipWait());
    }
  }

  /**
   * Pieces {@code first .. first + count - 1}, contiguous in one file, read from the source with
   * one ranged request.
   */
  public record Run(int first, int count) {}

  /** What the mechanism does; {@link #drain()} returns them in the order they were decided. */
  public sealed interface Decision<C> {
    /** Send a control frame (REQUEST, READING, HAVE, BITFIELD, REJECT) on {@code to}. */
    record Send<C>(C to, Frame frame) implements Decision<C> {}

    /**
     * Send piece {@code piece} (its bytes from the store) on {@code to}, tagged with {@code
     * sha256}; report {@link #onPieceSent} once the bytes were handed to the network.
     */
    record SendPiece<C>(C to, int piece, byte[] sha256) implements Decision<C> {}

    /** Close connection {@code conn}, saying why. */
    record Close<C>(C conn, String why) implements Decision<C> {}

    /**
     * Member {@code peer} is dropped for good: close {@code conn} if not null, stop dialling it,
     * count and report it ({@code why} names the piece and both hashes).
     */
    record Drop<C>(String peer, C conn, String why) implements Decision<C> {}

    /** Keep a connection to {@code peer} at {@code address} (reconnecting with back-off). */
    record Dial<C>(String peer, InetSocketAddress address) implements Decision<C> {}

    /** Stop dialling {@code peer} (it left the membership). */
    record Forget<C>(String peer) implements Decision<C> {}

    /** Read {@code run} from the source; report each piece and the end of the run. */
    record ReadSource<C>(Run run) implements Decision<C> {}

    /** Something worth a log line ({@code warn}: a fault or refusal; else information). */
    record Note<C>(boolean warn, String message) implements Decision<C> {}

    /**
     * Piece {@code piece}, kept in the store from an earlier fill ({@link #resume}), was confirmed
     * and is present now: count its bytes as kept, not as read.
     */
    record Kept<C>(int piece) implements Decision<C> {}

    /**
     * Pieces {@code first .. first + count - 1} are one whole file, every piece of it in the store,
     * some fetched from peers on their claim ({@link #verifiable}): compute the digest the source
     * publishes for the file over the store's bytes and report {@link #onFileChecked}.
     */
    record CheckFile<C>(int first, int count) implements Decision<C> {}

    /**
     * Piece {@code piece}, fetched from a peer on its claim, passed its file's check against the
     * source's digest and is present now: count its bytes as received from peers and record it.
     */
    record Confirmed<C>(int piece) implements Decision<C> {}
  }

  private final Config config;
  private final LongSupplier clock;
  private final String self;
  private final long timeout;
  private final int salt;
  private final List<Decision<C>> outbox = new ArrayList<>();

  private Membership membership;
  private long membershipSince;
  private final Map<String, InetSocketAddress> dialled = new TreeMap<>();
  private final Map<String, Peer<C>> peers = new TreeMap<>();

  /** {@link #peers} by id, for lookups in O(1). */
  private final Map<String, Peer<C>> byId = new HashMap<>();

  /**
   * The peers whose {@link Peer#waiting} may be non-empty, in {@link #peers}' order: {@link
   * #unchoke} looks only at these (a superset; emptied ones leave at its next pass).
   */
  private final Map<String, Peer<C>> waiters = new TreeMap<>();

  /**
   * The peers whose {@link Peer#inFlight} or {@link Peer#avoid} may be non-empty, in {@link
   * #peers}' order: the stuck-request and re-ask passes of a round look only at these (a superset;
   * emptied ones leave at {@link #reask}).
   */
  private final Map<String, Peer<C>> requested = new TreeMap<>();

  /** Ids of {@link #membership}'s members; empty without one. */
  private Set<String> memberIds = Set.of();

  /** {@link #byRank()}; null: to be computed. */
  private List<Peer<C>> byRank;

  /** {@link #memberList()}; null: to be computed. */
  private List<String> memberList;

  /**
   * Per member of {@link #memberPeersOf}, by index, its peer or null: {@link #view} looks up no id.
   * Null: to be computed (a peer was added).
   */
  private List<Peer<C>> memberPeers;

  private List<String> memberPeersOf;

  /** This member's index in {@link #memberPeersOf}. */
  private int selfIndex;

  /** The readers of {@link #readersMembers} with {@link #readersLive} live ({@link SwarmPlan}). */
  private String[] readers;

  /** {@link SwarmPlan#readingOrder} of {@link #readers}. */
  private int[] readingOrder;

  /** {@link SwarmPlan#fileStarts} of {@link #map}. */
  private BitSet fileStarts;

  private List<String> readersMembers;
  private List<String> readersLive = List.of();
  private Set<String> readersLiveSet = Set.of();
  private boolean transportUp;

  private PieceMap map;

  /** Per piece, the requests that passed it over at the front of the tie window (SwarmPlan). */
  private byte[] passedOver;

  private BitSet present;
  private BitSet inProgress;
  private byte[][] hashes;

  /** Who set {@link #hashes}[i]: the reader's id, or this member's own id (its source read). */
  private String[] hashFrom;

  private final List<DroppedPeer> dropped = new ArrayList<>();

  /** Members whose share was handed over during this fill, with why. */
  private final Map<String, String> handedOver = new TreeMap<>();

  /** The ids of {@link #handedOver}, for lookups in O(1) (a round looks up every member). */
  private final Set<String> handedOverIds = new HashSet<>();

  /** Peers whose {@link Peer#slow} is set: {@link #handOverSlow} clears it on no other peer. */
  private final Set<Peer<C>> slowPeers = new HashSet<>();

  /** {@link #waitingByReader} of {@link #waitingByView}, computed once per view. */
  private Map<String, Integer> waitingBy;

  private View waitingByView;

  /**
   * When the blocks last changed (the readers were computed for another set of live members): a
   * member's stall timeout for its share counts from here at the earliest, since pieces re-split to
   * a member that had finished its own block are new work.
   */
  private long blocksSince;

  /** Pieces this member stored from its own source reads since {@link #rateSince}. */
  private int ownShareReads;

  /** This member's own source reads go first on its ingress ({@link #ownReadsFirst}). */
  private boolean ownFirst;

  /** When the last window of holdings counts started ({@link #ingressSlow}); 0: none yet. */
  private long heldWindowAt;

  /** Pieces this member held at {@link #heldWindowAt}, and gained in the window before it. */
  private int heldAtWindow = -1;

  private int heldGrowth = -1;

  /** The median of the live members' gains in the last whole window; -1: unknown. */
  private int growthMedian = -1;

  /** Since when the members' share reads are counted: this fill's start or the last membership. */
  private long rateSince;

  /** When this member last stored a piece it read from the source, or started a run; 0: never. */
  private long sourceProgressAt;

  private final ArrayDeque<Integer> lastResort = new ArrayDeque<>();

  /**
   * The live members whose turn it is to read their share from the source ({@link #readingTurn}),
   * as of the last scheduling round; null: every live member's (no more live members than the
   * concurrency).
   */
  private Set<String> readingTurn;

  /**
   * Pieces an earlier fill left in this member's store ({@link #resume}) that wait for their
   * confirmation → their SHA-256 computed from the store now. Held back from announcements and
   * schedules until then.
   */
  private final Map<Integer, byte[]> resumed = new TreeMap<>();

  /**
   * Pieces of files the source publishes a digest for, which a peer's claim may fill ({@link
   * #verifiable}); null: none (claims are never fetched).
   */
  private BitSet verifiable;

  /**
   * {@link #verifiable} is still to come ({@link #verifiableLater}): pieces that would be fetchable
   * on a claim once it is known are neither read nor fetched meanwhile ({@link #claimsAwaited}).
   */
  private boolean verifiablePending;

  /** Per piece: the first piece of its file. */
  private int[] fileFirst;

  /** Per piece: the number of pieces of its file. */
  private int[] fileCount;

  /** A request made on a claim: to {@code peer}, checked against its claimed {@code sha256}. */
  private record ClaimFetch(String peer, byte[] sha256) {}

  /** Pieces requested on a peer's claim, in flight → the request. */
  private final Map<Integer, ClaimFetch> claimFetches = new HashMap<>();

  /**
   * Pieces fetched on a claim, in the store, neither present nor announced until their file matches
   * the source's digest → their SHA-256. Kept in {@link #inProgress} meanwhile.
   */
  private final NavigableMap<Integer, byte[]> unchecked = new TreeMap<>();

  /** First pieces of the files whose {@link Decision.CheckFile} was decided and not reported. */
  private final BitSet checking = new BitSet();

  /** Pieces whose claimed bytes failed their file's check: read from the source, not fetched. */
  private final BitSet claimsFailed = new BitSet();

  /** Pieces the last scheduling round found fetchable on a claim (not read from the source). */
  private BitSet claimable = new BitSet();

  /**
   * Pieces the last scheduling round found claimed as {@link #claimable} ones are, while {@link
   * #verifiable} is still to come: not read from the source until it is known.
   */
  private BitSet claimsAwaited = new BitSet();

  /**
   * Pieces the last scheduling round found claimed by {@link #SPREAD_CLAIMS} or more usable peers
   * with one hash, in a {@link #verifiable} file, with no hash known here: fetched on the claims
   * once their file is within reach ({@link #claimablePieces}), never read from the source while so
   * claimed.
   */
  private BitSet spread = new BitSet();

  /**
   * This member's link is far slower than the others' ({@link #linkFarSlower}), judged each round
   * while the swarm reads in turns: one copy goes out at a time, each at the whole uplink, and the
   * receivers pass it on ({@link #unchoke}); its own share is handed over once its turn has begun,
   * before it read any of it ({@link #handOverOwnSlowShare}).
   */
  private boolean slowLink;

  /**
   * This fill started a source run of the plan (not a last resort): a member that read some of its
   * share keeps the rest ({@link #handOverOwnSlowShare}), whatever membership changes reset.
   */
  private boolean planReadStarted;

  /** Pieces this member is reading from the source → when READING was last sent for it. */
  private final Map<Integer, Long> sourceReading = new TreeMap<>();

  private final Map<Integer, Long> starvedSince = new HashMap<>();
  private int sourceRuns;
  private int concurrency = 1;
  private long rangeSize = 1;
  private View lastView;
  private List<List<String>> lastReaders = List.of();
  private boolean filling;
  private boolean serving;
  private long fillStarted;

  /** When a fill with a transport stops waiting for a first membership; 0: not waiting. */
  private long membershipDeadline;

  private boolean closed;

  /** How often this member handed each piece to the mechanism to send; null before a map. */
  private int[] timesSent;

  /** Pieces handed to the mechanism and not yet reported sent, per piece. */
  private int[] sendingNow;

  /**
   * Per piece, how many peers of each kind announced it ({@link Peer#countedUsable}, {@link
   * Peer#countedView}, {@link Peer#countedLive}): kept on HAVE, BITFIELD, REJECT, connect,
   * disconnect and membership, so a scheduling round reads them instead of walking every peer. Null
   * before a map.
   */
  private int[] usableHasCount;

  private int[] viewHasCount;
  private int[] liveHasCount;

  /**
   * Peers that may have a {@link Peer#bad} piece (a superset; the rounds treat them one by one).
   */
  private final Set<Peer<C>> badPeers = new LinkedHashSet<>();

  /** Peers that may have {@link Peer#claims} (a superset). */
  private final Set<Peer<C>> claimers = new LinkedHashSet<>();

  /** Peers that may have {@link Peer#reading} marks (a superset). */
  private final Set<Peer<C>> markers = new LinkedHashSet<>();

  /** Peers whose {@link Peer#turnAt} is set. */
  private final Set<Peer<C>> inTurn = new HashSet<>();

  /** Peers whose {@link Peer#shareReads} is above zero since {@link #rateSince} (a superset). */
  private final Set<Peer<C>> sharers = new LinkedHashSet<>();

  /** Usable peers ({@link Peer#countedUsable}). */
  private int usableCount;

  /**
   * The view's members as last classified ({@link #classify}): which count, which are live; redone
   * when a peer connects, disconnects, is created, refused or handed over, the membership changes,
   * or a member's grace (never seen, or down) ends at {@link #classifyUntil}.
   */
  private boolean classifyStale = true;

  private long classifyUntil;
  private boolean classifyTimed;
  private long classRound;
  private List<Peer<C>> classCounted = List.of();
  private List<String> classAlive = List.of();
  private List<Peer<?>> classLivePeers = List.of();
  private boolean classSelfOut;
  private Peer<C> classItself;

  /** The sum of {@link #sendingNow}: copies handed to the mechanism and not yet sent. */
  private int sendingTotal;

  /** A request for {@code piece} that arrived at {@code at} and waits for an upload slot. */
  private record Waiting(int piece, long at) {}

  private static final class Peer<C> {
    final String id;

    /** Where this peer stands among equally loaded peers for this member ({@link #tieRank}). */
    final long rank;

    C conn;
    final BitSet has = new BitSet();
    final BitSet bad = new BitSet();
    final Map<Integer, Long> inFlight = new LinkedHashMap<>();

    /** Pieces the peer announced it is reading from the source → when. */
    final Map<Integer, Long> reading = new HashMap<>();

    /**
     * Pieces of {@link #reading} whose mark came before its BITFIELD while it was not their reader
     * (a read started under an earlier membership): held for one peer timeout, not renewed.
     */
    final BitSet inherited = new BitSet();

    /** Hashes it announced for pieces whose reader's hash is not known yet. */
    final Map<Integer, byte[]> claims = new HashMap<>();

    /** Why it was dropped, or null. */
    String dropped;

    int faults;
    boolean refused;
    boolean everConnected;
    long connectedAt;

    /** Its BITFIELD arrived on the current connection. */
    boolean synced;

    /** Its BITFIELD arrived on some connection during this fill. */
    boolean everSynced;

    long downSince;

    /** When the last whole PIECE arrived on the current connection; 0 for none. */
    long lastPieceAt;

    /** When bytes of a piece last arrived on the current connection; 0 for none. */
    long progressAt;

    /** When it first connected during this policy's life, or last announced a piece it reads. */
    long shareProgressAt;

    /**
     * When its reading turn ({@link #readingTurn}) began as this member last saw it; 0: not in turn
     * (or turns do not apply).
     */
    long turnAt;

    /**
     * Pieces it announced with HAVE as their reader (or marked reader) since {@link #rateSince}.
     */
    int shareReads;

    /** Pieces it held at {@link #heldWindowAt} ({@link #ingressSlow}); -1: not counted then. */
    int heldAtWindow = -1;

    /** Pieces it gained in the last whole window before {@link #heldWindowAt}; -1: unknown. */
    int heldGrowth = -1;

    /**
     * It lags behind the swarm's median member ({@link #handOverSlow}) since {@link #slowSince}.
     */
    boolean slow;

    long slowSince;

    /** The connection {@link #queuedSends} counts for. */
    C sendsOn;

    /** Pieces handed to {@link #sendsOn} to send and not yet written out. */
    int queuedSends;

    /** {@link #sendsOn} was closed for asking too much; its remaining requests are ignored. */
    boolean sendsCut;

    /** Of {@link #queuedSends}: pieces handed to the mechanism to send, in order. */
    final ArrayDeque<Integer> handed = new ArrayDeque<>();

    /** Of {@link #queuedSends}: requests waiting for an upload slot, oldest first. */
    final List<Waiting> waiting = new ArrayList<>();

    /**
     * Pieces asked of another holder because this peer sent nothing within {@link #reaskAfter}: not
     * asked of it again until it delivers a piece or {@link #avoidSince} is a peer timeout ago.
     */
    final BitSet avoid = new BitSet();

    long avoidSince;

    /**
     * Its {@link #has} is counted in {@link #usableHasCount} (it was {@link #usable} when last
     * synced).
     */
    boolean countedUsable;

    /**
     * Its {@link #has} is counted in {@link #viewHasCount}: a member the view counts (live or not).
     */
    boolean countedView;

    /** Its {@link #has} is counted in {@link #liveHasCount}: a live member of the view. */
    boolean countedLive;

    /** The last {@link #classify} that counted it, and whether as live. */
    long classRound;

    boolean classLive;

    Peer(String id, long rank) {
      this.id = id;
      this.rank = rank;
    }

    boolean usable() {
      return conn != null && !refused;
    }
  }

  /**
   * @param config the member's id and limits
   * @param clock nanoseconds, monotonic, any origin ({@code System::nanoTime} in a data plane, the
   *     virtual time in a simulator)
   */
  public SwarmPolicy(Config config, LongSupplier clock) {
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.self = config.self();
    this.timeout = config.peerTimeout().toNanos();
    this.salt = self.hashCode();
  }

  /** The decisions taken since the last call, in order; the outbox is empty afterwards. */
  public List<Decision<C>> drain() {
    if (outbox.isEmpty()) {
      return List.of();
    }
    List<Decision<C>> out = List.copyOf(outbox);
    outbox.clear();
    return out;
  }

  // ------------------------------------------------------------------ membership

  /**
   * Applies a membership ({@code PUT /v1/peers}, {@code --peers}): connections of members that left
   * it or whose published address changed are closed, members to dial are dialled.
   *
   * @return false when its epoch equals the current one (nothing changed), true when applied
   */
  public boolean applyMembership(Membership m) {
    Objects.requireNonNull(m, "membership");
    if (membership != null && membership.epoch().equals(m.epoch())) {
      return false;
    }
    if (!m.ids().contains(self)) {
      note(
          true,
          "membership "
              + m.epoch()
              + " does not list this member '"
              + self
              + "'; taking"
              + " part anyway");
    }
    note(false, "membership " + m.epoch() + ": " + m.members().size() + " members");
    Membership old = membership;
    membership = m;
    memberIds = m.ids();
    memberList = null;
    classifyStale = true;
    membershipSince = now();
    resetShareReads(membershipSince);
    lastView = null; // the next source pick plans with it, not with the last round's view
    for (Peer<C> p : peers.values()) {
      if (p.conn == null) {
        continue;
      }
      Membership.Member member = m.member(p.id);
      Membership.Member before = old == null ? null : old.member(p.id);
      if (member == null || (before != null && !before.address().equals(member.address()))) {
        emit(
            new Decision.Close<>(
                p.conn,
                "not a member at the address it authenticated with in membership " + m.epoch()));
      }
    }
    redial();
    return true;
  }

  /** The membership applied last, or null. */
  public Membership membership() {
    return membership;
  }

  /** The epoch of the membership applied last, or null. */
  public String epoch() {
    return membership == null ? null : membership.epoch();
  }

  /** The transport listens now: members can be dialled, and a fill waits for a membership. */
  public void transportStarted() {
    transportUp = true;
    memberList = null;
    classifyStale = true;
    if (filling && membership == null) {
      membershipDeadline = now() + config.membershipWait().toNanos();
    }
    redial();
  }

  private void redial() {
    if (!transportUp || membership == null) {
      return;
    }
    Set<String> ids = membership.ids();
    for (Iterator<String> it = dialled.keySet().iterator(); it.hasNext(); ) {
      String id = it.next();
      if (!ids.contains(id)) {
        it.remove();
        emit(new Decision.Forget<>(id));
      }
    }
    for (Membership.Member m : membership.members()) {
      if (m.id().compareTo(self) > 0 && !m.address().equals(dialled.get(m.id()))) {
        dialled.put(m.id(), m.address());
        emit(new Decision.Dial<>(m.id(), m.address()));
      }
    }
  }

  // ------------------------------------------------------------------ what to hold

  /**
   * Starts filling a copy of {@code map}: nothing held yet, every piece from peers or (the plan's
   * share, and last resorts) from the source.
   *
   * @param concurrency source reads (runs) this member may have in flight at most, ≥ 1
   * @param rangeSize bytes one run may span at most (runs also end at file ends), ≥ 1
   */
  public void startFill(PieceMap map, int concurrency, long rangeSize) {
    hold(map);
    this.concurrency = Math.max(1, concurrency);
    this.rangeSize = Math.max(1, rangeSize);
    this.filling = true;
    this.serving = true;
    this.planReadStarted = false;
    if (transportUp && membership == null) {
      membershipDeadline = now() + config.membershipWait().toNanos();
    }
  }

  /**
   * Holds a complete copy of {@code map} whose piece hashes this member computed from its own store
   * (an adopted copy): every piece is present and served, nothing is fetched or read.
   *
   * @param sha256 every piece's SHA-256, by index
   */
  public void holdComplete(PieceMap map, byte[][] sha256) {
    if (sha256.length != map.size()) {
      throw new IllegalArgumentException(sha256.length + " hashes for " + map.size() + " pieces");
    }
    hold(map);
    System.arraycopy(sha256, 0, hashes, 0, sha256.length);
    Arrays.fill(hashFrom, self);
    present.set(0, map.size());
    serving = true;
  }

  private void hold(PieceMap pm) {
    if (this.map != null) {
      throw new IllegalStateException("this policy already holds a piece map");
    }
    this.map = pm;
    this.fileStarts = SwarmPlan.fileStarts(pm);
    this.present = new BitSet(pm.size());
    this.inProgress = new BitSet(pm.size());
    this.hashes = new byte[pm.size()][];
    this.hashFrom = new String[pm.size()];
    this.fileFirst = new int[pm.size()];
    this.fileCount = new int[pm.size()];
    for (int i = 0; i < pm.size(); ) {
      String path = pm.piece(i).path();
      int end = i + 1;
      while (end < pm.size() && pm.piece(end).path().equals(path)) {
        end++;
      }
      for (int j = i; j < end; j++) {
        fileFirst[j] = i;
        fileCount[j] = end - i;
      }
      i = end;
    }
    this.timesSent = new int[pm.size()];
    this.sendingNow = new int[pm.size()];
    this.usableHasCount = new int[pm.size()];
    this.passedOver = new byte[pm.size()];
    this.viewHasCount = new int[pm.size()];
    this.liveHasCount = new int[pm.size()];
    classifyStale = true;
    this.sendingTotal = 0;
    this.fillStarted = now();
    resetShareReads(fillStarted);
  }

  /** The share reads of every member are counted from {@code at} on (the blocks changed). */
  private void resetShareReads(long at) {
    rateSince = at;
    ownShareReads = 0;
    ownFirst = false;
    for (Peer<C> p : peers.values()) {
      p.shareReads = 0;
      p.slow = false;
    }
    slowPeers.clear();
    sharers.clear();
  }

  /**
   * Pieces {@code held} are in this member's store already, left by an earlier fill of the same map
   * (a failed load retried, a restarted process): they are neither fetched nor read while they wait
   * to be confirmed. A piece is confirmed when its hash is known and equals {@code sha256[piece]}:
   * its reader's announcement, or — when the plan names this member its reader — this member's own
   * hash (the bytes were verified when they were stored and are hashed again now). A confirmed
   * piece is present and announced ({@link Decision.Kept}); one whose reader announced another hash
   * is dropped and fetched again, from peers, like any missing piece. Call right after {@link
   * #startFill}, before any peer connected.
   *
   * @param sha256 the SHA-256 of each held piece as it is in the store now, by index
   * @throws IllegalStateException outside a fill, or after a peer connected
   */
  public void resume(BitSet held, byte[][] sha256) {
    if (map == null || !filling || !present.isEmpty() || connectedPeers() > 0) {
      throw new IllegalStateException("resume only right after startFill, before any peer");
    }
    for (int i = held.nextSetBit(0); i >= 0; i = held.nextSetBit(i + 1)) {
      if (i >= map.size() || sha256[i] == null || sha256[i].length != 32) {
        throw new IllegalArgumentException("held piece " + i + " needs a 32-byte SHA-256");
      }
      resumed.put(i, sha256[i].clone());
      inProgress.set(i);
    }
    if (!resumed.isEmpty()) {
      note(
          false,
          resumed.size()
              + " pieces are kept from an earlier fill; each is announced once it is confirmed");
    }
  }

  /**
   * Pieces {@code pieces} belong to files the source publishes a digest for, which the mechanism
   * can check over the store's bytes ({@link Decision.CheckFile}): such a piece this member is the
   * reader of may be fetched on a peer's claim instead of read from the source. Without this call
   * no claim is ever fetched. Call right after {@link #startFill}.
   *
   * @throws IllegalStateException outside a fill
   */
  public void verifiable(BitSet pieces) {
    if (map == null || !filling) {
      throw new IllegalStateException("verifiable pieces are set right after startFill");
    }
    verifiable = (BitSet) pieces.clone();
    verifiable.clear(map.size(), Math.max(map.size(), verifiable.length()));
    verifiablePending = false;
  }

  /**
   * The pieces of {@link #verifiable} are known only later (the loader reads the source's digests
   * while the fill starts): until {@link #verifiable} is called, a piece of this member's share
   * that the other members claim is neither read from the source nor fetched, so a late joiner does
   * not read what it will be able to fetch on the claims. Call right after {@link #startFill}.
   *
   * @throws IllegalStateException outside a fill
   */
  public void verifiableLater() {
    if (map == null || !filling) {
      throw new IllegalStateException("verifiableLater is called right after startFill");
    }
    verifiablePending = verifiable == null;
  }

  /**
   * The check decided by {@link Decision.CheckFile} for the file starting at piece {@code first}
   * ended: when the file's bytes {@code match} the source's digest, its pieces fetched on claims
   * are present, announced and reported ({@link Decision.Confirmed}); otherwise they are read from
   * the source (never fetched on a claim again in this fill).
   */
  public void onFileChecked(int first, boolean match) {
    if (map == null || first < 0 || first >= map.size() || !checking.get(first)) {
      return;
    }
    checking.clear(first);
    int end = first + fileCount[first];
    List<Integer> pieces = new ArrayList<>(unchecked.subMap(first, end).keySet());
    if (pieces.isEmpty()) {
      return;
    }
    String path = map.piece(first).path();
    if (!match) {
      for (Integer i : pieces) {
        unchecked.remove(i);
        inProgress.clear(i);
        claimsFailed.set(i);
      }
      note(
          true,
          path
              + ": the "
              + pieces.size()
              + " pieces fetched from peers on their claim do not match the digest the source"
              + " publishes for the file; they are read from the source, and a peer whose claim"
              + " differs from those bytes is dropped");
      return;
    }
    for (Integer i : pieces) {
      byte[] sha = unchecked.remove(i);
      if (hashes[i] != null && !Arrays.equals(hashes[i], sha)) {
        Peer<C> announcer = hashFrom[i] == null ? null : byId.get(hashFrom[i]);
        if (announcer != null) {
          drop(
              announcer,
              "announced piece "
                  + i
                  + " with sha256 "
                  + hex(hashes[i])
                  + " but the file's bytes that match the source's digest give "
                  + hex(sha));
        }
      }
      hashes[i] = sha;
      hashFrom[i] = self;
      present.set(i);
      inProgress.clear(i);
      settleClaims(i);
      broadcast(new Frame.Have(i, sha));
      emit(new Decision.Confirmed<>(i));
    }
    note(
        false,
        path
            + ": "
            + pieces.size()
            + " pieces fetched from peers on their claim match the digest the source publishes for"
            + " the file; announced");
  }

  /**
   * Decides the check of piece {@code piece}'s file when every piece of it is present or fetched on
   * a claim, and some are the latter.
   */
  private void checkFileOf(int piece) {
    int first = fileFirst[piece];
    int end = first + fileCount[first];
    if (checking.get(first) || unchecked.subMap(first, end).isEmpty()) {
      return;
    }
    for (int j = first; j < end; j++) {
      if (!present.get(j) && !unchecked.containsKey(j)) {
        return;
      }
    }
    checking.set(first);
    emit(new Decision.CheckFile<>(first, end - first));
  }

  /** Pieces kept from an earlier fill that still wait for their confirmation. */
  public int resumedPending() {
    return resumed.size();
  }

  /**
   * The hash of resumed piece {@code piece} is known now: present when it equals the stored one,
   * else dropped (to be fetched again).
   */
  private void settleResumed(int piece) {
    byte[] mine = resumed.remove(piece);
    if (mine == null) {
      return;
    }
    inProgress.clear(piece);
    if (!Arrays.equals(mine, hashes[piece])) {
      note(
          true,
          "piece "
              + piece
              + " kept from an earlier fill has sha256 "
              + hex(mine)
              + " but "
              + (self.equals(hashFrom[piece]) ? "this member" : "its reader " + hashFrom[piece])
              + " announced "
              + hex(hashes[piece])
              + "; dropped and fetched again");
      return;
    }
    present.set(piece);
    settleClaims(piece);
    broadcast(new Frame.Have(piece, mine));
    emit(new Decision.Kept<>(piece));
    if (!unchecked.isEmpty()) {
      checkFileOf(piece);
    }
  }

  /** Resumed pieces the plan names this member the reader of: its own hash confirms them. */
  private void confirmOwnReads(SwarmPlan plan) {
    for (Integer piece : List.copyOf(resumed.keySet())) {
      if (hashes[piece] == null && self.equals(plan.reader(piece))) {
        hashes[piece] = resumed.get(piece);
        hashFrom[piece] = self;
      }
      if (hashes[piece] != null) {
        settleResumed(piece);
      }
    }
  }

  /** Every piece is present. */
  public boolean complete() {
    return map != null && present.cardinality() == map.size();
  }

  /** Stops the fill (it failed or was closed): no more reads or requests, and nothing is served. */
  public void stop() {
    filling = false;
    serving = false;
  }

  /** Closed for good: nothing is served or decided any more. */
  public void close() {
    closed = true;
    stop();
  }

  // ------------------------------------------------------------------ status

  /** The members dropped so far (at most {@value #MAX_DROPPED_REPORTED}, oldest first). */
  public List<DroppedPeer> dropped() {
    return List.copyOf(dropped);
  }

  /** Members whose share of the source reads was handed over in this fill → why; by id. */
  public Map<String, String> handedOver() {
    return new TreeMap<>(handedOver);
  }

  /**
   * This member's load failed for good: its share is handed over (a HANDOVER naming itself goes to
   * every peer, so they re-plan at once rather than after the peer timeout) and nothing is read,
   * requested or served any more. The mechanism closes the peer transport next.
   *
   * @param why the failure, sent to the peers (cut to {@value FrameCodec#MAX_HELLO_STRING} bytes)
   */
  public void leave(String why) {
    if (!handedOver.containsKey(self)) {
      handOver(self, why, self);
    }
    stop();
  }

  /** Peers connected now. */
  public int connectedPeers() {
    int n = 0;
    for (Peer<C> p : peers.values()) {
      if (p.conn != null) {
        n++;
      }
    }
    return n;
  }

  /** The current connection of every connected peer, by peer id. */
  public Map<String, C> connections() {
    Map<String, C> out = new TreeMap<>();
    for (Peer<C> p : peers.values()) {
      if (p.conn != null) {
        out.put(p.id, p.conn);
      }
    }
    return out;
  }

  /** Pieces present (verified, in the store), a copy; empty before a fill. */
  public BitSet present() {
    return present == null ? new BitSet() : (BitSet) present.clone();
  }

  /** The expected SHA-256 of {@code piece}, or null while no authority announced it. */
  public byte[] expectedHash(int piece) {
    if (hashes == null) {
      return null;
    }
    if (hashes[piece] == null) {
      ClaimFetch f = claimFetches.get(piece);
      return f == null ? null : f.sha256();
    }
    return hashes[piece];
  }

  // ------------------------------------------------------------------ connections

  /**
   * A connection to {@code peer} passed the handshake. Refused (closed) when the peer was dropped
   * or is not a member; an earlier connection of the same peer is replaced. This member's READING
   * marks and then its BITFIELD go out on it.
   */
  public void onConnected(C conn, String peer) {
    Peer<C> p = peer(peer);
    if (p.dropped != null) {
      emit(new Decision.Close<>(conn, "dropped earlier: " + p.dropped));
      return;
    }
    if (membership == null || !memberIds.contains(peer)) {
      emit(new Decision.Close<>(conn, "not a member of the current membership"));
      return;
    }
    C old = p.conn;
    if (old != null && old != conn) {
      requeue(p);
      resetSends(p);
      unchoke();
      emit(new Decision.Close<>(old, "replaced by a new connection from the same peer"));
    }
    p.conn = conn;
    syncUsable(p);
    p.everConnected = true;
    p.synced = false;
    p.lastPieceAt = 0;
    p.progressAt = 0;
    p.connectedAt = now();
    if (p.shareProgressAt == 0) {
      p.shareProgressAt = p.connectedAt;
    }
    note(false, "peer " + peer + " connected");
    for (Map.Entry<String, String> h : handedOver.entrySet()) {
      emit(new Decision.Send<>(conn, new Frame.Handover(h.getKey(), h.getValue())));
    }
    if (present != null) {
      byte[][] h = new byte[map.size()][];
      for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
        h[i] = hashes[i];
      }
      // READING first: the BITFIELD completes what the peer must know before it reads any piece
      // from the source.
      for (Integer piece : sourceReading.keySet()) {
        emit(new Decision.Send<>(conn, new Frame.Reading(piece)));
      }
      emit(new Decision.Send<>(conn, new Frame.Bitfield(map.size(), present(), h)));
    }
  }

  /** A connection reported by {@link #onConnected} closed; its requests are asked elsewhere. */
  public void onDisconnected(C conn, String peer) {
    Peer<C> p = byId.get(peer);
    if (p == null || p.conn != conn) {
      return;
    }
    p.conn = null;
    syncUsable(p);
    p.synced = false;
    p.downSince = now();
    requeue(p);
    resetSends(p);
    unchoke();
    note(false, "peer " + peer + " disconnected");
  }

  /**
   * A control frame arrived on {@code conn} from {@code peer} (HAVE, BITFIELD, READING, REQUEST,
   * REJECT; anything else closes the connection). Frames of a replaced connection are ignored.
   */
  public void onFrame(C conn, String peer, Frame frame) {
    Peer<C> p = byId.get(peer);
    if (p == null || p.conn != conn || map == null || p.dropped != null) {
      return;
    }
    if (frame instanceof Frame.Have h) {
      if (checkIndex(conn, h.piece(), "HAVE")) {
        int piece = h.piece();
        if (p.sendsOn == conn && !p.waiting.isEmpty()) {
          int before = p.waiting.size();
          p.waiting.removeIf(w -> w.piece() == piece); // it got the piece elsewhere
          p.queuedSends -= before - p.waiting.size();
        }
        boolean share =
            !p.has.get(piece)
                && (p.id.equals(readerOf(piece))
                    || (!p.reading.isEmpty() && fresh(p.reading.get(piece), now())));
        announced(p, piece, h.sha256());
        if (share && p.dropped == null) {
          p.shareReads++;
          sharers.add(p);
        }
      }
    } else if (frame instanceof Frame.Bitfield b) {
      if (b.pieceCount() != map.size()) {
        emit(
            new Decision.Close<>(
                conn, "BITFIELD for " + b.pieceCount() + " pieces, the map has " + map.size()));
        return;
      }
      for (int i = b.have().nextSetBit(0);
          i >= 0 && p.dropped == null;
          i = b.have().nextSetBit(i + 1)) {
        announced(p, i, b.sha256()[i]);
      }
      p.synced = true;
      p.everSynced = true;
    } else if (frame instanceof Frame.Reading r) {
      // Only the piece's reader keeps others from reading it: marks from anyone else would let a
      // member hold every piece back by renewing marks for pieces it never reads.
      // A renewal of a mark taken while it was the reader keeps that read its own when the readers
      // change meanwhile.
      // Marks sent before its BITFIELD on a connection are the reads it had in flight when this
      // member met it: taken from any member in good standing, so a member that joins does not
      // read again what a read started under the old membership brings in; from a member that is
      // not the piece's reader such a mark holds for one peer timeout and is not renewed.
      if (checkIndex(conn, r.piece(), "READING") && !p.has.get(r.piece())) {
        int piece = r.piece();
        long now = now();
        if (p.id.equals(readerOf(piece))) {
          p.reading.put(piece, now);
          markers.add(p);
          p.inherited.clear(piece);
        } else if (!p.synced && !fresh(p.reading.get(piece), now)) {
          p.reading.put(piece, now);
          markers.add(p);
          p.inherited.set(piece);
        } else if (fresh(p.reading.get(piece), now) && !p.inherited.get(piece)) {
          p.reading.put(piece, now);
          markers.add(p);
        }
      }
    } else if (frame instanceof Frame.Request r) {
      if (checkIndex(conn, r.piece(), "REQUEST")) {
        serve(p, conn, r.piece());
      }
    } else if (frame instanceof Frame.Handover h) {
      if (!p.refused && membership != null && memberIds.contains(h.member())) {
        handOver(h.member(), h.why(), p.id);
      }
    } else if (frame instanceof Frame.Reject r) {
      if (p.inFlight.remove(r.piece()) != null) {
        inProgress.clear(r.piece());
        clearHas(p, r.piece());
        if (claimFetches.remove(r.piece()) != null) {
          setBad(p, r.piece()); // it claimed the piece and will not send it: not asked again
        }
        note(false, "peer " + p.id + " rejected piece " + r.piece() + ": " + r.reason());
      }
    } else {
      emit(
          new Decision.Close<>(
              conn, "unexpected " + FrameCodec.typeName(frame.type()) + " after the handshake"));
    }
  }

  private boolean checkIndex(C conn, int piece, String what) {
    if (piece < 0 || piece >= map.size()) {
      emit(
          new Decision.Close<>(
              conn, what + " for piece " + piece + " outside 0.." + (map.size() - 1)));
      return false;
    }
    return true;
  }

  // ------------------------------------------------------------------ pieces from peers

  /**
   * A whole PIECE arrived on {@code conn}. Counts as progress of that peer (it is busy, not stuck).
   *
   * @return true when this member asked that peer for it and still waits for it (then verify it
   *     against {@link #expectedHash} and report {@link #onPieceVerified} or {@link
   *     #onPieceRejected}); false for a late or unasked piece (release it)
   */
  public boolean onPieceArrived(C conn, String peer, int piece) {
    Peer<C> p = byId.get(peer);
    if (p != null && p.conn == conn) {
      p.lastPieceAt = now();
      p.avoid.clear();
    }
    return p != null
        && p.conn == conn
        && map != null
        && piece >= 0
        && piece < map.size()
        && p.inFlight.remove(piece) != null;
  }

  /**
   * Bytes of a piece from {@code peer} arrived on {@code conn} at {@code at} (this policy's clock):
   * the peer is delivering, so its requests are not stuck.
   */
  public void onPieceProgress(C conn, String peer, long at) {
    Peer<C> p = byId.get(peer);
    if (p != null && p.conn == conn && at > p.progressAt) {
      p.progressAt = at;
    }
  }

  /**
   * A piece from {@code peer} was rejected (wrong length, tag or hash): counted as a fault of that
   * peer, which is not asked for that piece again.
   */
  public void onPieceRejected(String peer, int piece, String problem) {
    abandon(piece);
    Peer<C> p = byId.get(peer);
    if (p != null) {
      setBad(p, piece);
      fault(p, problem);
    }
  }

  /**
   * A piece from {@code peer} of the right length, authentic on its stream, hashed to {@code
   * actual}, not to the hash it was checked against. When the piece's expected hash is {@code
   * peer}'s own announcement, {@code peer} announced a hash it cannot back and is dropped at once
   * ({@link Decision.Drop}); otherwise it is a fault, as {@link #onPieceRejected}.
   *
   * @param actual the SHA-256 of the bytes received (32 bytes)
   */
  public void onPieceHashMismatch(String peer, int piece, byte[] actual) {
    Peer<C> p = byId.get(peer);
    ClaimFetch claimed = claimFetches.get(piece);
    if (p != null
        && hashes != null
        && hashes[piece] == null
        && claimed != null
        && claimed.peer().equals(peer)
        && !Arrays.equals(claimed.sha256(), actual)) {
      abandon(piece);
      setBad(p, piece);
      drop(
          p,
          "claimed piece "
              + piece
              + " with sha256 "
              + hex(claimed.sha256())
              + " but sent bytes with sha256 "
              + hex(actual));
      return;
    }
    if (p != null
        && hashes != null
        && peer.equals(hashFrom[piece])
        && !Arrays.equals(hashes[piece], actual)) {
      abandon(piece);
      setBad(p, piece);
      drop(
          p,
          "announced piece "
              + piece
              + " with sha256 "
              + hex(hashes[piece])
              + " but sent bytes with sha256 "
              + hex(actual));
      return;
    }
    onPieceRejected(
        peer,
        piece,
        "piece "
            + piece
            + " has sha256 "
            + hex(actual)
            + " but "
            + (hashes == null || hashes[piece] == null ? "none" : hex(hashes[piece]))
            + " is expected; dropped");
  }

  /**
   * A piece from a peer hashed to its expected value.
   *
   * @return true when it should be written to the store (then report {@link #onPieceStored} or
   *     {@link #abandon}); false when it is not wanted any more (present meanwhile, or not serving)
   */
  public boolean onPieceVerified(int piece) {
    if (!serving || present == null || present.get(piece)) {
      abandon(piece);
      return false;
    }
    return true;
  }

  /**
   * A verified piece is in the store: from peer {@code from}, or (null) read from the source by
   * this member, whose hash is then the piece's expected hash. Announced with HAVE.
   *
   * @return true when it was not present before (count its bytes), false for a duplicate or for a
   *     piece from a peer whose hash is not the expected one any more (its announcer was dropped)
   */
  public boolean onPieceStored(String from, int piece, byte[] sha256) {
    if (present == null || present.get(piece)) {
      if (from == null) {
        sourceReading.remove(piece);
      }
      abandon(piece);
      return false;
    }
    if (from != null && hashes[piece] == null) {
      ClaimFetch claimed = claimFetches.remove(piece);
      if (claimed != null && Arrays.equals(claimed.sha256(), sha256)) {
        // On a peer's word only: held back (still in progress) until its file is checked.
        unchecked.put(piece, sha256);
        checkFileOf(piece);
        return false;
      }
    }
    if (from != null && !Arrays.equals(hashes[piece], sha256)) {
      // Verified against a hash withdrawn (its announcer dropped) while the piece was on its way.
      abandon(piece);
      return false;
    }
    if (from == null) {
      if (hashes[piece] != null && !Arrays.equals(hashes[piece], sha256)) {
        Peer<C> announcer = hashFrom[piece] == null ? null : byId.get(hashFrom[piece]);
        if (announcer != null) {
          drop(
              announcer,
              "announced piece "
                  + piece
                  + " with sha256 "
                  + hex(hashes[piece])
                  + " but the source gives "
                  + hex(sha256)
                  + " (read by this member)");
        }
      }
      hashes[piece] = sha256;
      hashFrom[piece] = self;
      sourceProgressAt = now();
      ownShareReads++;
    }
    present.set(piece);
    settleClaims(piece);
    inProgress.clear(piece);
    sourceReading.remove(piece);
    broadcast(new Frame.Have(piece, sha256));
    if (!unchecked.isEmpty()) {
      checkFileOf(piece);
    }
    return true;
  }

  /**
   * A piece that was on its way (requested, or being stored) will not come: it may be asked again.
   */
  public void abandon(int piece) {
    claimFetches.remove(piece);
    if (inProgress != null
        && present != null
        && !present.get(piece)
        && !unchecked.containsKey(piece)) {
      inProgress.clear(piece);
    }
  }

  // ------------------------------------------------------------------ source reads

  /**
   * A run decided by {@link Decision.ReadSource} ended: every piece was reported ({@code complete})
   * or the read gave up; pieces of it not stored may be decided again.
   */
  public void onSourceRunEnded(Run run, boolean complete) {
    sourceRuns--;
    if (!complete && present != null) {
      for (int i = run.first(); i < run.first() + run.count(); i++) {
        if (!present.get(i)) {
          sourceReading.remove(i);
          inProgress.clear(i);
        }
      }
    }
  }

  // ------------------------------------------------------------------ serving

  private void serve(Peer<C> p, C conn, int piece) {
    if (p.dropped != null || membership == null || !memberIds.contains(p.id)) {
      emit(
          new Decision.Close<>(
              conn, "REQUEST from a peer that is not a member in good standing; not served"));
      return;
    }
    if (p.sendsOn != conn) {
      resetSends(p);
      p.sendsOn = conn;
    }
    if (p.sendsCut) {
      return; // closing; frames already buffered still arrive
    }
    if (p.queuedSends >= MAX_QUEUED_SENDS) {
      p.sendsCut = true;
      // A member asks for at most its in-flight limit at a time and reads what it asked for; a
      // peer that keeps asking without reading would grow this side's send queue without bound.
      emit(
          new Decision.Close<>(
              conn,
              "REQUEST for piece "
                  + piece
                  + " while "
                  + p.queuedSends
                  + " requested pieces are still queued unread (limit "
                  + MAX_QUEUED_SENDS
                  + ")"));
      return;
    }
    if (!serving || !present.get(piece)) {
      emit(new Decision.Send<>(conn, new Frame.Reject(piece, "piece not held")));
      return;
    }
    p.queuedSends++;
    p.waiting.add(new Waiting(piece, now()));
    waiters.put(p.id, p);
    unchoke();
  }

  /**
   * Hands every waiting request whose piece has a free upload slot ({@link #UPLOAD_SLOTS}; while
   * the swarm reads in turns also one of {@link #SEND_SLOTS} in all) to the mechanism: first a
   * request that waited half a peer timeout (its requester would count it stuck at a full timeout;
   * up to twice the slots, so that a slow uplink is not shared by every requester of one piece at
   * once while the first copies could be passed on), then the piece this member sent least often in
   * this fill, so its pieces spread before any goes out many times (the receivers pass them on);
   * ties to the oldest request, then by peer id. A requester that got the piece elsewhere meanwhile
   * says so with its HAVE, which withdraws its request. From a member whose link is far slower than
   * the others' ({@link #slowLink}) one copy at a time, two of one piece with old requests: four at
   * once would each take four times as long to reach a peer that could pass it on.
   */
  private void unchoke() {
    long now = now();
    // A complete member's tick makes no more rounds: the last round's verdict must not outlive it.
    boolean oneAtATime = slowLink && present.cardinality() < map.size();
    int slots = oneAtATime ? 1 : UPLOAD_SLOTS;
    while (serving && !closed && !waiters.isEmpty()) {
      Peer<C> best = null;
      Waiting bestWait = null;
      int bestPiece = -1;
      long bestAt = 0;
      boolean bestOld = false;
      int bestSent = Integer.MAX_VALUE;
      for (java.util.Iterator<Peer<C>> it = waiters.values().iterator(); it.hasNext(); ) {
        Peer<C> p = it.next();
        if (p.waiting.isEmpty()) {
          it.remove();
          continue;
        }
        if (p.sendsCut || p.sendsOn == null || p.sendsOn != p.conn) {
          continue;
        }
        for (Waiting w : p.waiting) {
          int piece = w.piece();
          long at = w.at();
          boolean old = now - at >= timeout / 2;
          if (sendingNow[piece] >= (old ? 2 * slots : slots)
              || (!old && readingTurn != null && sendingTotal >= (oneAtATime ? 1 : SEND_SLOTS))) {
            continue;
          }
          int sent = timesSent[piece];
          boolean better =
              best == null
                  || (old != bestOld
                      ? old
                      : old ? at < bestAt : sent != bestSent ? sent < bestSent : at < bestAt);
          if (better) {
            best = p;
            bestWait = w;
            bestPiece = piece;
            bestAt = at;
            bestOld = old;
            bestSent = sent;
          }
        }
      }
      if (best == null) {
        return;
      }
      best.waiting.remove(bestWait);
      best.handed.add(bestPiece);
      sendingNow[bestPiece]++;
      sendingTotal++;
      timesSent[bestPiece]++;
      emit(new Decision.SendPiece<>(best.sendsOn, bestPiece, hashes[bestPiece]));
    }
  }

  /** Forgets what {@code p} asked for on its current connection (closed or replaced). */
  private void resetSends(Peer<C> p) {
    for (Integer piece : p.handed) {
      sendingNow[piece]--;
      sendingTotal--;
    }
    p.handed.clear();
    p.waiting.clear();
    p.queuedSends = 0;
    p.sendsCut = false;
    p.sendsOn = null;
  }

  /** A piece decided by {@link Decision.SendPiece} on {@code conn} was handed to the network. */
  public void onPieceSent(C conn, String peer) {
    Peer<C> p = byId.get(peer);
    if (p != null && p.sendsOn == conn) {
      p.queuedSends--;
      Integer piece = p.handed.poll();
      if (piece != null) {
        sendingNow[piece]--;
        sendingTotal--;
      }
      unchoke();
    }
  }

  // ------------------------------------------------------------------ the scheduling round

  /**
   * One scheduling round: stuck requests, last resorts, READING renewals, peer requests, source
   * runs. Call it after every batch of events and at least every few tens of milliseconds while a
   * fill runs (the timeouts are only checked here); it does nothing before a fill, after it
   * completed or stopped, and while a fill with a transport still waits for its first membership.
   */
  public void tick() {
    if (map != null) {
      unchoke(); // requests that waited half a peer timeout go out now
    }
    if (map == null || !filling || closed || complete()) {
      return;
    }
    long now = now();
    if (membershipDeadline != 0) {
      if (membership == null && now - membershipDeadline < 0) {
        return;
      }
      if (membership == null) {
        note(
            false,
            "no membership within "
                + config.membershipWait()
                + " (--membership-wait); loading from the source alone until one arrives");
      }
      membershipDeadline = 0;
    }
    schedule(now);
    while (sourceRuns < concurrency) {
      boolean lastResortRun = !lastResort.isEmpty();
      Run run = nextSourceRun(now);
      if (run == null) {
        break;
      }
      planReadStarted |= !lastResortRun;
      sourceRuns++;
      emit(new Decision.ReadSource<>(run));
    }
  }

  private void schedule(long now) {
    // Stuck requests: ask elsewhere. A request is stuck when its peer has sent no piece bytes at
    // all for the peer timeout (whole pieces or PIECE frames still arriving); a peer that keeps
    // delivering is only busy (its queue is deep because its link or CPU is shared).
    for (Peer<C> p : requested.values()) {
      long progress = Math.max(p.lastPieceAt, p.conn == null ? 0 : p.progressAt);
      if (p.inFlight.isEmpty() || (progress != 0 && now - progress <= timeout)) {
        continue;
      }
      List<Integer> stuck = new ArrayList<>();
      p.inFlight.forEach(
          (piece, deadline) -> {
            if (deadline - now < 0) {
              stuck.add(piece);
            }
          });
      for (Integer piece : stuck) {
        if (p.inFlight.remove(piece) != null) {
          inProgress.clear(piece);
          claimFetches.remove(piece);
          setBad(p, piece);
          fault(p, "piece " + piece + " not received within " + config.peerTimeout());
        }
      }
    }
    reask(now);
    View view = view(now);
    boolean stalled = handOverStalled(view, now);
    boolean slow = handOverSlow(view, now);
    if (stalled || slow) {
      view = view(now);
    }
    lastView = view;
    readingTurn = readingTurn(view, now);
    if (!resumed.isEmpty()) {
      confirmOwnReads(view.plan());
    }
    slowLink = readingTurn != null && linkFarSlower(view, now);
    if (handOverOwnSlowShare(view, now)) {
      view = view(now);
      lastView = view;
      readingTurn = readingTurn(view, now);
    }
    List<List<String>> readersKey = List.of(view.plan().members(), view.plan().live());
    // The same lists as the last round's (the usual case) are equal without a look at each id.
    boolean sameReaders =
        lastReaders.size() == 2
            && lastReaders.get(0) == readersKey.get(0)
            && lastReaders.get(1) == readersKey.get(1);
    if (!sameReaders) {
      boolean changed = !readersKey.equals(lastReaders);
      lastReaders = readersKey;
      if (changed) {
        promoteClaims(view.plan());
      }
    }
    SwarmPlan plan = view.plan();
    int n = map.size();
    // What this member still needs and nobody was asked for: pieces not present, not in progress.
    BitSet want = new BitSet(n);
    want.set(0, n);
    want.andNot(present);
    want.andNot(inProgress);
    // What the usable peers offer (hold and did not fail), from the per-piece counts: only the
    // peers with failed pieces are looked at one by one. Requests in flight are at requested peers.
    int total = 0;
    for (Peer<C> p : requested.values()) {
      if (p.usable()) {
        total += p.inFlight.size();
      }
    }
    int[] offeredBy = usableHasCount.clone();
    BitSet scratch = new BitSet(n);
    for (Iterator<Peer<C>> it = badPeers.iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (p.bad.isEmpty()) {
        it.remove();
        continue;
      }
      if (!p.countedUsable) {
        continue;
      }
      scratch.clear();
      scratch.or(p.has);
      scratch.and(p.bad);
      for (int i = scratch.nextSetBit(0); i >= 0; i = scratch.nextSetBit(i + 1)) {
        offeredBy[i]--;
      }
    }
    BitSet offered = new BitSet(n);
    for (int i = 0; i < n; i++) {
      if (offeredBy[i] > 0) {
        offered.set(i);
      }
    }
    List<Peer<C>> usableClaimers = new ArrayList<>();
    for (Iterator<Peer<C>> it = claimers.iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (p.claims.isEmpty()) {
        it.remove();
      } else if (p.usable()) {
        usableClaimers.add(p);
      }
    }
    BitSet claimed = claimablePieces(plan, offered, usableClaimers);
    if (verifiable == null) {
      claimsAwaited = claimed;
      claimable = new BitSet();
    } else {
      claimsAwaited = new BitSet();
      claimable = claimed;
    }
    // Last resorts: wanted pieces no usable peer offers. The plan's own pieces are picked when a
    // run can start (nextSourceRun), from the plan of that moment, so a membership change re-splits
    // everything not yet started.
    BitSet unoffered = (BitSet) want.clone();
    unoffered.andNot(offered);
    BitSet backed = unoffered.isEmpty() ? null : backedByLive(view, now);
    for (int i = unoffered.nextSetBit(0); i >= 0; i = unoffered.nextSetBit(i + 1)) {
      if (plan.sourceOwner(i) != null) {
        if (!starvedSince.isEmpty()) {
          starvedSince.remove(i);
        }
        continue;
      }
      // A live member holds or is reading it, but no usable peer offers it to this member: when
      // every live holder is connected and failed this piece, no live member is reading it, and no
      // peer relayed it within the peer timeout, read it from the source (a reconnecting holder is
      // waited for).
      if (backed.get(i)) {
        if (!starvedSince.isEmpty()) {
          starvedSince.remove(i);
        }
        continue;
      }
      long since = starvedSince.computeIfAbsent(i, k -> now);
      if (now - since > timeout) {
        starvedSince.remove(i);
        inProgress.set(i);
        want.clear(i);
        lastResort.add(i);
      }
    }
    // Source reads in flight: renew their READING marks before they lapse at the others.
    for (Map.Entry<Integer, Long> e : sourceReading.entrySet()) {
      if (now - e.getValue() > timeout / 2) {
        e.setValue(now);
        broadcast(new Frame.Reading(e.getKey()));
      }
    }
    // Peer requests: least-loaded peer first, rarest piece first. Only the pieces still wanted are
    // counted and offered, so a round with no request to send costs no per-piece work.
    int maxTotal = maxTotalInFlight(config.maxInFlight());
    if (ownReadsFirst(view, now)) {
      maxTotal = Math.max(1, maxTotal / OWN_READS_FIRST_DIVISOR);
    }
    if (total >= maxTotal || want.isEmpty()) {
      return;
    }
    // Per wanted piece, the usable peers to ask for it: a peer with no failed, avoided or claimed
    // piece offers what it holds (the counts); the others are counted one by one.
    int[] holders = new int[n];
    boolean claiming = !claimable.isEmpty();
    for (int i = want.nextSetBit(0); i >= 0; i = want.nextSetBit(i + 1)) {
      holders[i] = usableHasCount[i];
    }
    Set<Peer<C>> special = new LinkedHashSet<>();
    for (Peer<C> p : badPeers) {
      if (p.countedUsable) {
        special.add(p);
      }
    }
    for (Peer<C> p : requested.values()) {
      if (p.countedUsable && !p.avoid.isEmpty()) {
        special.add(p);
      }
    }
    if (claiming) {
      special.addAll(usableClaimers);
    }
    for (Peer<C> p : special) {
      scratch.clear();
      scratch.or(p.has);
      scratch.and(want);
      for (int i = scratch.nextSetBit(0); i >= 0; i = scratch.nextSetBit(i + 1)) {
        holders[i]--;
      }
      BitSet c = candidates(p, want, claiming);
      for (int i = c.nextSetBit(0); i >= 0; i = c.nextSetBit(i + 1)) {
        holders[i]++;
      }
    }
    // Pieces some usable peer can be asked for; none: no search.
    BitSet askable = new BitSet(n);
    for (int i = want.nextSetBit(0); i >= 0; i = want.nextSetBit(i + 1)) {
      if (holders[i] > 0) {
        askable.set(i);
      }
    }
    int perPeer = perPeerInFlight(config.maxInFlight(), maxTotal, usableCount);
    // The peers in tieRank order; a peer's candidates (what it offers of what is still wanted) are
    // worked out when the search reaches it, so a search that ends early looks at few peers.
    List<Peer<C>> ranked = byRank();
    boolean sent = true;
    while (sent && total < maxTotal && !askable.isEmpty()) {
      sent = false;
      // The first peer in (requests in flight, tieRank) order with a piece to ask for.
      search:
      for (int load = 0; load < perPeer; load++) {
        for (Peer<C> p : ranked) {
          if (p.inFlight.size() != load
              || !p.countedUsable
              || (!p.has.intersects(askable) && (!claiming || p.claims.isEmpty()))) {
            continue;
          }
          int piece =
              SwarmPlan.rarest(
                  candidates(p, want, claiming), holders, salt + load * 7919, passedOver);
          if (piece < 0) {
            continue;
          }
          want.clear(piece);
          askable.clear(piece);
          inProgress.set(piece);
          p.inFlight.put(piece, now + timeout);
          requested.put(p.id, p);
          if (!p.has.get(piece)) {
            claimFetches.put(piece, new ClaimFetch(p.id, p.claims.get(piece)));
          }
          emit(new Decision.Send<>(p.conn, new Frame.Request(piece)));
          total++;
          sent = true;
          break search;
        }
      }
    }
  }

  /**
   * What {@code p} can be asked for of {@code want}: what it holds (and, while {@code claiming},
   * its claims of {@link #claimable} pieces), less what it failed or is avoided for.
   */
  private BitSet candidates(Peer<C> p, BitSet want, boolean claiming) {
    BitSet c = (BitSet) p.has.clone();
    if (claiming) {
      for (Integer i : p.claims.keySet()) {
        if (claimable.get(i)) {
          c.set(i);
        }
      }
    }
    c.andNot(p.bad);
    c.andNot(p.avoid);
    c.and(want);
    return c;
  }

  /**
   * Pieces to fetch on a peer's claim rather than read from the source or wait for: their file is
   * {@link #verifiable} and never failed its check, this member has no hash for them yet, the
   * usable peers' claims on them agree, and either (a) this member is their reader and every other
   * live member claims them (they hold them already: this member joined late), or (b) at least
   * {@link #SPREAD_CLAIMS} usable peers claim them, whoever the reader is: the piece spread before
   * this member could check it (a peer fetched it on its reader's announcement, e.g. under the
   * membership before this member joined), so the members that need it are not waiting for this
   * member's read. Only files whose other pieces are present here, offered by a usable peer, on
   * their way, this member's own to read, or of kind (b): this member's check of the file then
   * waits on nobody's unchecked pieces. Sets {@link #spread} to the pieces of kind (b) in any file.
   * O(claims + pieces of those files).
   */
  private BitSet claimablePieces(SwarmPlan plan, BitSet offered, List<Peer<C>> usable) {
    BitSet out = new BitSet(map.size());
    if (verifiable == null && !verifiablePending) {
      spread = out;
      return out;
    }
    Map<Integer, byte[]> agreed = new HashMap<>();
    Map<Integer, Integer> claimCount = new HashMap<>();
    BitSet conflict = new BitSet(map.size());
    BitSet own = new BitSet(map.size());
    for (Peer<C> p : usable) {
      for (Map.Entry<Integer, byte[]> c : p.claims.entrySet()) {
        int i = c.getKey();
        if ((verifiable != null && !verifiable.get(i))
            || claimsFailed.get(i)
            || hashes[i] != null
            || present.get(i)
            || p.bad.get(i)) {
          continue;
        }
        byte[] other = agreed.putIfAbsent(i, c.getValue());
        if (other != null && !Arrays.equals(other, c.getValue())) {
          conflict.set(i); // one of them is wrong: the source decides
        }
        claimCount.merge(i, 1, Integer::sum);
        out.set(i);
        if (self.equals(plan.reader(i))) {
          own.set(i);
        }
      }
    }
    out.andNot(conflict);
    BitSet wide = new BitSet(map.size());
    claimCount.forEach(
        (i, k) -> {
          if (k >= SPREAD_CLAIMS && out.get(i)) {
            wide.set(i);
          }
        });
    spread = wide;
    own.and(out);
    out.clear();
    out.or(own);
    // Of this member's own pieces, only those every other live member claims: a member that still
    // needs a piece waits for its reader's announcement (a claim is of no use to it), and would
    // count the reader as stalled or slow while it fetches on a claim; the reader's source read is
    // the copy that member needs.
    for (String m : plan.live()) {
      if (out.isEmpty()) {
        break;
      }
      if (m.equals(self)) {
        continue;
      }
      Peer<C> p = byId.get(m);
      if (p == null || !p.usable() || p.dropped != null) {
        out.clear();
        break;
      }
      BitSet claimed = new BitSet(map.size());
      p.claims.keySet().forEach(claimed::set);
      out.and(claimed);
    }
    out.or(wide);
    for (int i = out.nextSetBit(0); i >= 0; ) {
      int first = fileFirst[i];
      int end = first + fileCount[i];
      for (int j = first; j < end; j++) {
        if (!self.equals(plan.reader(j))
            && !present.get(j)
            && !offered.get(j)
            && !inProgress.get(j)
            && !wide.get(j)) {
          out.clear(first, end);
          break;
        }
      }
      i = end < map.size() ? out.nextSetBit(end) : -1;
    }
    return out;
  }

  /**
   * Requests a peer sits on: a request older than {@link #reaskAfter} to a peer that delivered no
   * piece bytes in that time (it serves others first, {@link #unchoke}) is withdrawn there when
   * another usable peer offers the piece, and asked again in this round, of the least-loaded peer
   * that offers it; the first peer is not asked for it again until it delivers a piece or a peer
   * timeout passed. Not a fault: the peer is busy, not stuck. If it sends the piece anyway, the
   * piece is not wanted any more ({@link #onPieceArrived} says false).
   */
  private void reask(long now) {
    long after = reaskAfter();
    for (java.util.Iterator<Peer<C>> it = requested.values().iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (!p.avoid.isEmpty() && now - p.avoidSince > timeout) {
        p.avoid.clear();
      }
      if (p.inFlight.isEmpty() && p.avoid.isEmpty()) {
        it.remove(); // nothing of it for this pass or the stuck-request pass until it is asked
        // again
        continue;
      }
      if (!p.usable() || p.inFlight.isEmpty()) {
        continue;
      }
      long heard = Math.max(p.lastPieceAt, p.progressAt);
      if (heard != 0 && now - heard <= after) {
        continue;
      }
      List<Integer> moved = new ArrayList<>();
      p.inFlight.forEach(
          (piece, deadline) -> {
            if (now - (deadline - timeout) > after && offeredElsewhere(p, piece)) {
              moved.add(piece);
            }
          });
      for (Integer piece : moved) {
        p.inFlight.remove(piece);
        inProgress.clear(piece);
        if (p.avoid.isEmpty()) {
          p.avoidSince = now;
        }
        p.avoid.set(piece);
      }
    }
  }

  /**
   * A request is asked elsewhere after a quarter of the peer timeout without bytes from its peer.
   */
  private long reaskAfter() {
    return timeout / 4;
  }

  /** Some usable peer but {@code p} offers {@code piece} and was not given up on for it. */
  private boolean offeredElsewhere(Peer<C> p, int piece) {
    for (Peer<C> q : peers.values()) {
      if (q != p && q.usable() && q.has.get(piece) && !q.bad.get(piece) && !q.avoid.get(piece)) {
        return true;
      }
    }
    return false;
  }

  /**
   * A handed-over member's source reads in flight still count: it is connected and announced a
   * piece of its share within the stall timeout (a slow member finishing the runs it started).
   */
  private boolean readsStillCount(Peer<C> p, long now) {
    return p.conn != null
        && !p.refused
        && now - p.shareProgressAt <= SHARE_STALL_TIMEOUTS * timeout;
  }

  /**
   * Pieces some live peer holds and did not fail on its current connection, or announced it is
   * reading from the source (fresh), or a handed-over member whose reads still count ({@link
   * #readsStillCount}) is reading: a piece among them is waited for, not a last resort.
   */
  private BitSet backedByLive(View view, long now) {
    Set<String> live = view.live();
    BitSet backed = new BitSet(map.size());
    BitSet scratch = new BitSet(map.size());
    for (String id : handedOver.keySet()) {
      Peer<C> p = byId.get(id);
      if (p != null && !live.contains(id) && readsStillCount(p, now)) {
        p.reading.forEach(
            (piece, at) -> {
              if (fresh(at, now)) {
                backed.set(piece);
              }
            });
      }
    }
    // The live peers' holdings from the per-piece counts, less what connected peers failed (only
    // the peers with failed pieces are looked at); a peer connected with this member's id (the
    // view's live peers list it, the counts do not) on its own.
    int[] heldBy = liveHasCount.clone();
    for (Peer<C> p : badPeers) {
      if (p.countedLive && p.conn != null) {
        scratch.clear();
        scratch.or(p.has);
        scratch.and(p.bad);
        for (int i = scratch.nextSetBit(0); i >= 0; i = scratch.nextSetBit(i + 1)) {
          heldBy[i]--;
        }
      }
    }
    for (int i = 0; i < heldBy.length; i++) {
      if (heldBy[i] > 0) {
        backed.set(i);
      }
    }
    Peer<C> p = classSelfOut ? null : classItself;
    if (p != null) {
      if (p.conn != null && !p.bad.isEmpty()) {
        scratch.clear();
        scratch.or(p.has);
        scratch.andNot(p.bad);
        backed.or(scratch);
      } else {
        backed.or(p.has);
      }
      markFresh(p, backed, now);
    }
    for (Peer<C> q : markers) {
      if (q.countedLive) {
        markFresh(q, backed, now);
      }
    }
    return backed;
  }

  /** Sets in {@code out} the pieces {@code p} marked as reading and whose marks are fresh. */
  private void markFresh(Peer<?> p, BitSet out, long now) {
    if (p.reading.isEmpty()) {
      return;
    }
    p.reading.forEach(
        (piece, at) -> {
          if (fresh(at, now)) {
            out.set(piece);
          }
        });
  }

  /** Every peer, by {@link #tieRank} (then id); kept until a peer is added. */
  private List<Peer<C>> byRank() {
    if (byRank == null) {
      List<Peer<C>> all = new ArrayList<>(peers.values());
      all.sort((x, y) -> x.rank != y.rank ? Long.compare(x.rank, y.rank) : x.id.compareTo(y.id));
      byRank = all;
    }
    return byRank;
  }

  /**
   * Hands over the share of every connected member that is the reader of pieces nobody live holds
   * and announced none of them for {@link #SHARE_STALL_TIMEOUTS} peer timeouts, unless this
   * member's own source reads are stalled too.
   *
   * @return whether a share was handed over (the view is stale then)
   */
  private boolean handOverStalled(View view, long now) {
    long stall = SHARE_STALL_TIMEOUTS * timeout;
    if (!sourceReading.isEmpty() && now - sourceProgressAt > stall) {
      return false; // the source may be down for everyone
    }
    long since = Math.max(Math.max(fillStarted, membershipSince), blocksSince);
    if (now - since <= stall) {
      return false; // nobody's share can have stalled yet
    }
    boolean any = false;
    // Only the readers of pieces nobody holds can have stalled: those peers, in id order. One
    // whose reading turn has not come is waiting, not stalled; its stall counts from its turn.
    Map<String, Integer> waitingBy = waitingByReader(view);
    for (Peer<C> p : readersAmongPeers(waitingBy)) {
      if (now - Math.max(Math.max(since, p.shareProgressAt), p.turnAt) <= stall
          || (readingTurn != null && !readingTurn.contains(p.id))
          || p.conn == null
          || p.refused
          || handedOverIds.contains(p.id)
          || !view.live().contains(p.id)) {
        continue;
      }
      int waiting = waitingBy.getOrDefault(p.id, 0);
      if (waiting > 0) {
        handOver(
            p.id,
            "announced none of the "
                + waiting
                + " pieces it reads from the source within "
                + config.peerTimeout().multipliedBy(SHARE_STALL_TIMEOUTS),
            self);
        any = true;
      }
    }
    return any;
  }

  /** The median number of pieces the live members among {@code ids} hold (this member included). */
  private int heldMedian(Set<String> ids, View view) {
    List<Integer> held = new ArrayList<>();
    for (String m : ids) {
      if (!view.live().contains(m)) {
        continue;
      }
      Peer<C> q = byId.get(m);
      if (m.equals(self)) {
        held.add(present.cardinality());
      } else if (q != null) {
        held.add(q.has.cardinality());
      }
    }
    if (held.isEmpty()) {
      return 0;
    }
    held.sort(null);
    return held.get(held.size() / 2);
  }

  /**
   * Hands over the share of every connected member whose share progresses much slower than the
   * swarm's: counted from this fill's start or the last membership (at least half a peer timeout
   * ago), it announced fewer than {@link #SLOW_FRACTION} of the pieces the median live member with
   * a share announced (capped at what it had to read) and lags at least {@link #LAG_PIECES} behind,
   * continuously for half a peer timeout; it stops being slow once it reaches {@link
   * #RECOVERED_FRACTION}. Only members that announced at least one piece of their share (one that
   * announced none is the stall rule's). Every member sees the same HAVEs, so the members reach the
   * same verdict about the same time, and the HANDOVER makes it the same for all. Not while this
   * member's own source reads are stalled. O(members + pieces).
   *
   * @return whether a share was handed over (the view is stale then)
   */
  private boolean handOverSlow(View view, long now) {
    long stall = SHARE_STALL_TIMEOUTS * timeout;
    if (now - rateSince < timeout / 2
        || (!sourceReading.isEmpty() && now - sourceProgressAt > stall)) {
      return false;
    }
    Map<String, Integer> waitingBy = waitingByReader(view);
    // The peers that can be slow now (a share left to read, some of it announced), in id order:
    // the median below and the verdicts concern only these (and the peers still marked slow).
    List<Peer<C>> suspects = new ArrayList<>();
    for (Peer<C> p : readersAmongPeers(waitingBy)) {
      if (p.conn != null
          && !p.refused
          && p.everSynced
          && !handedOverIds.contains(p.id)
          && view.live().contains(p.id)
          && waitingBy.getOrDefault(p.id, 0) > 0
          && p.shareReads > 0
          && (readingTurn == null || readingTurn.contains(p.id))) {
        suspects.add(p);
      }
    }
    if (suspects.isEmpty() && slowPeers.isEmpty()) {
      return false;
    }
    Set<String> counted = sharingMembers(waitingBy);
    int median = shareReadsMedian(counted, waitingBy, view);
    if (median < 0) {
      return false;
    }
    boolean any = false;
    // Every other peer is not slow (a no-op but for the peers still marked slow).
    for (Iterator<Peer<C>> it = slowPeers.iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (!suspects.contains(p)) {
        p.slow = false;
        it.remove();
      }
    }
    int heldMedian = -1;
    for (Peer<C> p : suspects) {
      int waiting = waitingBy.getOrDefault(p.id, 0);
      int expected = Math.min(median, p.shareReads + waiting);
      boolean lags =
          expected - p.shareReads >= LAG_PIECES && p.shareReads < SLOW_FRACTION * expected;
      if (lags && !p.slow) {
        // Its share lags, but does everything it receives? Connections that start later get a
        // smaller slice of a shared origin for a while, and the member then takes more from its
        // peers: its link is not slow, and moving its share would only pile the reads onto fewer
        // uplinks (each reader sends its pieces to every other member). A member whose link is
        // slow holds less of everything.
        if (heldMedian < 0) {
          heldMedian = heldMedian(counted, view);
        }
        lags = p.has.cardinality() < SLOW_FRACTION * heldMedian;
      }
      if (lags) {
        if (!p.slow) {
          p.slow = true;
          p.slowSince = now;
          slowPeers.add(p);
        } else if (now - p.slowSince >= timeout / 2) {
          handOver(
              p.id,
              "slow: announced "
                  + p.shareReads
                  + " pieces of its share while the median member announced "
                  + median
                  + "; its "
                  + waiting
                  + " pieces nobody holds yet go to the others",
              self);
          any = true;
        }
      } else if (p.shareReads >= RECOVERED_FRACTION * expected) {
        p.slow = false;
        slowPeers.remove(p);
      }
    }
    return any;
  }

  /**
   * The members whose share reads are compared: those with pieces waiting ({@code waitingBy}'s
   * readers), the peers that announced share pieces since {@link #rateSince}, and this member.
   */
  private Set<String> sharingMembers(Map<String, Integer> waitingBy) {
    Set<String> counted = new HashSet<>(waitingBy.keySet());
    counted.add(self);
    for (Peer<C> q : sharers) {
      counted.add(q.id);
    }
    return counted;
  }

  /**
   * The median number of share pieces announced since {@link #rateSince} among the live members of
   * {@code counted} that announced some or still have pieces waiting; -1 with fewer than two such.
   */
  private int shareReadsMedian(Set<String> counted, Map<String, Integer> waitingBy, View view) {
    List<Integer> counts = new ArrayList<>();
    for (String m : counted) {
      if (!view.live().contains(m)) {
        continue;
      }
      Peer<C> q = byId.get(m);
      int reads = m.equals(self) ? ownShareReads : q == null ? 0 : q.shareReads;
      if (reads > 0 || waitingBy.getOrDefault(m, 0) > 0) {
        counts.add(reads);
      }
    }
    if (counts.size() < 2) {
      return -1;
    }
    counts.sort(null);
    return counts.get(counts.size() / 2);
  }

  /**
   * Whether this member's own source reads go first on its ingress: its share lags the median
   * member's by at least {@link #LAG_PIECES} pieces (but not so far that it is slow, {@link
   * #handOverSlow}) and its ingress is slow ({@link #ingressSlow}). Its ingress, shared about per
   * flow between its source reads and its peer fetches, then paces its reads, and every member
   * waits for its share in the end. While its ingress stays slow and its share is not read, it
   * keeps {@link #OWN_READS_FIRST_DIVISOR} times fewer peer requests in flight ({@link #schedule}):
   * its source reads get a larger part of its ingress and its share keeps the swarm's pace, and the
   * peer fetches take the rest. A member that joined late or whose origin slice is small lags in
   * its share and in its holdings, but its holdings grow as fast as the others': it keeps its peer
   * requests. One of the last readers (pieces of its share left while at most half the live members
   * have any, outside reading turns) reads first whatever its pace: every member waits for the last
   * shares, and the pieces it defers come from peers whose shares are read.
   */
  private boolean ownReadsFirst(View view, long now) {
    Map<String, Integer> waitingBy = waitingByReader(view);
    int waiting = waitingBy.getOrDefault(self, 0);
    if (waiting == 0
        || now - rateSince < timeout / 2
        || handedOverIds.contains(self)
        || (readingTurn != null && !readingTurn.contains(self))) {
      ownFirst = false;
      return false;
    }
    if (readingTurn == null && 2 * readersLeft(view) <= view.live().size()) {
      return true; // one of the last readers: the swarm waits for its share
    }
    if (!ingressSlow(view, now)) {
      ownFirst = false;
      return false;
    }
    if (!ownFirst) {
      int median = shareReadsMedian(sharingMembers(waitingBy), waitingBy, view);
      int expected = median < 0 ? 0 : Math.min(median, ownShareReads + waiting);
      ownFirst =
          expected - ownShareReads >= LAG_PIECES && ownShareReads >= SLOW_FRACTION * expected;
    }
    return ownFirst;
  }

  /**
   * Whether this member's share lags the others' by {@link #EXTRA_RUN_LAG} pieces or more and it
   * keeps one source read in flight more than its cap ({@link #nextSourceRun}): the pieces of its
   * share nobody holds yet outnumber the lower median live member's by that many. Two source flows
   * through one origin uplink do not share it evenly for long (on the netns bench one member's flow
   * got 4.7 MB/s and the other's 7.0 over the 14 s before the faster share was read), so without it
   * the member whose flow gets less is left to read the rest of its share alone at the end, through
   * an ingress its source bytes then fill, while every other member waits for those pieces. The
   * extra flow takes a larger part of the origin's uplink until the lag is below {@link
   * #EXTRA_RUN_LAG} again. Only while every live member has pieces of its share left (once some
   * share is read the last readers' rule divides the concurrency, and the two never add up), with 3
   * live members or more (a pair measured no faster with it), and only where every live member
   * could keep one more and the swarm still read with at most one loader's concurrency (live
   * members × (cap + 1) ≤ concurrency: N = 3 and 4 at the default 16), for a member whose ingress
   * keeps up ({@link #ingressSlow}, judged on a whole window of holdings counts: one whose link is
   * slow reads first instead, {@link #ownReadsFirst}). O(members) once the round's counts are made.
   */
  private boolean shareLags(View view, long now) {
    if (view.live().size() < 3) {
      return false;
    }
    Map<String, Integer> waitingBy = waitingByReader(view);
    int mine = waitingBy.getOrDefault(self, 0);
    if (mine < EXTRA_RUN_LAG || readersLeft(view) < view.live().size()) {
      return false;
    }
    List<Integer> counts = new ArrayList<>(view.live().size());
    for (String m : view.live()) {
      counts.add(waitingBy.getOrDefault(m, 0));
    }
    counts.sort(null);
    int median = counts.get((counts.size() - 1) / 2);
    // The ingress must be seen to keep up: not before a whole window of holdings counts.
    return mine - median >= EXTRA_RUN_LAG
        && !ingressSlow(view, now)
        && heldGrowth >= 0
        && growthMedian >= 0;
  }

  /**
   * Hands over this member's own share when its reading turn ({@link #readingTurn}) comes while its
   * link is far slower than the others' ({@link #linkFarSlower}) and it has read none of its share
   * yet: with more live members than the concurrency the turns go in id order, so a member late in
   * that order knows its ingress by the time its turn comes. Reading then would put its share
   * behind its own slow ingress, shared per flow with its peer fetches, and every member would wait
   * for those pieces (and for its slow uplink to pass them on); a share not started yet is read at
   * once by the others instead. The others hand over a slow member only once it announced some of
   * its share ({@link #handOverSlow}), which a share of one run never gives them the time to see.
   * Never without reading turns (too early to know any rate when the turns begin), with a source
   * read of its own in flight, once this fill started a run of the plan (membership changes
   * included), or with pieces an earlier fill kept that are not confirmed yet (they may be its
   * share: handing them over would have them read again).
   *
   * @return whether the share was handed over (the view is stale then)
   */
  private boolean handOverOwnSlowShare(View view, long now) {
    // slowLink: linkFarSlower, counted every round in reading turns so that the holdings windows
    // are whole when the turn comes.
    if (!slowLink
        || !readingTurn.contains(self)
        || handedOverIds.contains(self)
        || planReadStarted
        || !sourceReading.isEmpty()
        || !resumed.isEmpty()
        || waitingByReader(view).getOrDefault(self, 0) == 0) {
      return false;
    }
    handOver(
        self,
        "its ingress is slow (its holdings grew by "
            + heldGrowth
            + " pieces in the last half peer timeout, the median member's by "
            + growthMedian
            + ") and its reading turn came before it read any of its share",
        self);
    return true;
  }

  /**
   * Whether this member's holdings grew far slower than the median member's in the last window
   * ({@link #ingressSlow}, at most {@link #OWN_HANDOVER_FRACTION} of it and {@link
   * #OWN_HANDOVER_GAP} pieces less) while it holds less than {@link #SLOW_FRACTION} of what the
   * median live member holds: its link, not the origin or its peers, paces it. A member that holds
   * everything, or more than the others, gains only what is new to it: its growth says nothing of
   * its link, and it is the best uploader there is. O(members) only once the growth test passed.
   */
  private boolean linkFarSlower(View view, long now) {
    int held = present.cardinality();
    return held < map.size()
        && ingressSlow(view, now)
        && heldGrowth <= OWN_HANDOVER_FRACTION * growthMedian
        && growthMedian - heldGrowth >= OWN_HANDOVER_GAP
        && held < SLOW_FRACTION * heldMedian(view.live(), view);
  }

  /**
   * Whether this member's holdings grew by at most {@link #SLOW_FRACTION} of the median live
   * member's (among those not yet complete) in the last whole window of half a peer timeout, and by
   * at least {@link #LAG_PIECES} less: its ingress is slower than theirs. Counts are taken once a
   * window, O(members).
   */
  private boolean ingressSlow(View view, long now) {
    countHoldings(view, now);
    return heldGrowth >= 0
        && growthMedian >= 0
        && heldGrowth + LAG_PIECES <= growthMedian
        && heldGrowth <= SLOW_FRACTION * growthMedian;
  }

  /**
   * Once every half peer timeout: how many pieces this member and every peer gained in the window
   * that just ended ({@link Peer#heldGrowth}, -1 when the window was not whole), and the median
   * gain of the live members that were not complete when it started. O(members).
   */
  private void countHoldings(View view, long now) {
    if (heldWindowAt != 0 && now - heldWindowAt < timeout / 2) {
      return;
    }
    boolean whole = heldWindowAt != 0 && now - heldWindowAt < timeout;
    int held = present.cardinality();
    heldGrowth = whole && heldAtWindow >= 0 ? held - heldAtWindow : -1;
    heldAtWindow = held;
    for (Peer<C> p : peers.values()) {
      int h = p.has.cardinality();
      p.heldGrowth = whole && p.heldAtWindow >= 0 ? h - p.heldAtWindow : -1;
      // No baseline before its BITFIELD: the whole BITFIELD would count as the next window's gain.
      p.heldAtWindow = p.synced ? h : -1;
    }
    heldWindowAt = now;
    growthMedian = -1;
    List<Integer> growth = new ArrayList<>();
    if (heldGrowth >= 0) {
      growth.add(heldGrowth);
    }
    for (String m : view.live()) {
      Peer<C> p = m.equals(self) ? null : byId.get(m);
      // A peer that was complete when the window started gains nothing: not counted.
      if (p != null && p.heldGrowth >= 0 && p.heldAtWindow - p.heldGrowth < map.size()) {
        growth.add(p.heldGrowth);
      }
    }
    if (growth.size() >= 2) {
      growth.sort(null);
      growthMedian = growth.get(growth.size() / 2);
    }
  }

  /**
   * Whose turn it is to read their share: with more live members than the concurrency, the first
   * {@code concurrency} live members in id order (block order) that still read pieces nobody live
   * holds — the swarm as a whole reads with the concurrency of one loader, and the first pieces
   * leave the origin after {@code concurrency} pieces' worth of its bytes, not after every
   * member's. The others' turn comes as the earlier members' HAVEs arrive. Null: every live
   * member's turn (no more live members than the concurrency). Sets {@link Peer#turnAt}. O(members
   * + pieces).
   */
  private Set<String> readingTurn(View view, long now) {
    if (view.live().size() <= concurrency) {
      return null;
    }
    Map<String, Integer> waitingBy = waitingByReader(view);
    Set<String> turn = new HashSet<>();
    // The readers are live members and the live members are in id order: the first readers in id
    // order, without a walk over the members.
    for (String m : new TreeSet<>(waitingBy.keySet())) {
      if (turn.size() >= concurrency) {
        break;
      }
      if (view.live().contains(m) && waitingBy.get(m) > 0) {
        turn.add(m);
      }
    }
    for (Iterator<Peer<C>> it = inTurn.iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (!turn.contains(p.id)) {
        p.turnAt = 0;
        it.remove();
      }
    }
    for (String m : turn) {
      Peer<C> p = byId.get(m);
      if (p != null) {
        if (p.turnAt == 0) {
          p.turnAt = now;
        }
        inTurn.add(p);
      }
    }
    return turn;
  }

  /**
   * The live members with pieces of their share that no live member holds yet ({@link
   * #waitingByReader}); at least 1.
   */
  private int readersLeft(View view) {
    return Math.max(1, readersLeftIds(view).size());
  }

  /** The live members with pieces of their share waiting ({@link #readersLeft}), in id order. */
  private List<String> readersLeftIds(View view) {
    List<String> out = new ArrayList<>();
    for (Map.Entry<String, Integer> e : waitingByReader(view).entrySet()) {
      if (e.getValue() > 0 && view.live().contains(e.getKey())) {
        out.add(e.getKey());
      }
    }
    out.sort(null);
    return out;
  }

  /**
   * Per reader, the pieces it reads that are neither present here nor held by a live member
   * (announced with the expected hash): one pass over the pieces, not one per member.
   */
  private Map<String, Integer> waitingByReader(View view) {
    if (waitingByView != view) {
      waitingBy = computeWaitingByReader(view);
      waitingByView = view;
    }
    return waitingBy;
  }

  /** The peers among the keys of {@code byReader}, in id order ({@link #peers}' order). */
  private List<Peer<C>> readersAmongPeers(Map<String, Integer> byReader) {
    List<Peer<C>> out = new ArrayList<>(byReader.size());
    for (String id : new TreeSet<>(byReader.keySet())) {
      Peer<C> p = byId.get(id);
      if (p != null) {
        out.add(p);
      }
    }
    return out;
  }

  private Map<String, Integer> computeWaitingByReader(View view) {
    BitSet held = (BitSet) present.clone();
    held.or(view.liveHas());
    Map<String, Integer> out = new HashMap<>();
    for (int i = held.nextClearBit(0); i < map.size(); i = held.nextClearBit(i + 1)) {
      out.merge(view.plan().reader(i), 1, Integer::sum);
    }
    return out;
  }

  /**
   * Member {@code member}'s share is handed over (told by {@code by}, or decided here when {@code
   * by} is this member): it is left out of the plan's live members for the rest of this fill, and
   * every peer is told.
   */
  private void handOver(String member, String why, String by) {
    if (handedOverIds.contains(member)) {
      return;
    }
    String reason =
        why.length() > FrameCodec.MAX_HELLO_STRING / 2
            ? why.substring(0, FrameCodec.MAX_HELLO_STRING / 2)
            : why;
    handedOver.put(member, reason);
    handedOverIds.add(member);
    classifyStale = true;
    lastView = null;
    note(
        true,
        (member.equals(self) ? "this member's" : "member " + member + "'s")
            + " share of the source reads is handed over to the others"
            + (by.equals(self) ? "" : " (told by " + by + ")")
            + ": "
            + reason);
    broadcast(new Frame.Handover(member, reason));
  }

  /** Who is live now and the plan from that. */
  /**
   * Who is live now and the plan from that; {@code liveHas}: the pieces the live members' peers
   * announced (not their reads, not this member's own pieces); {@code livePeers}: the peers of the
   * live members.
   */
  private record View(
      Set<String> live, SwarmPlan plan, BitSet mine, BitSet liveHas, List<Peer<?>> livePeers) {}

  private View view(long now) {
    List<String> members = memberList();
    if (memberPeers == null || memberPeersOf != members) {
      List<Peer<C>> resolved = new ArrayList<>(members.size());
      for (String m : members) {
        resolved.add(byId.get(m));
      }
      memberPeers = resolved;
      memberPeersOf = members;
      selfIndex = members.indexOf(self);
      classifyStale = true;
    }
    // Who counts and who is live changes only with an event or a member's grace ending: the
    // members are walked then, not every round; the holdings come from the per-piece counts.
    boolean classified = classifyStale || (classifyTimed && now - classifyUntil > 0);
    if (classified) {
      classify(members, now);
    }
    List<String> alive = classAlive;
    int n = map.size();
    BitSet held = new BitSet(n);
    BitSet liveHas = new BitSet(n);
    for (int i = 0; i < n; i++) {
      if (viewHasCount[i] > 0) {
        held.set(i);
      }
      if (liveHasCount[i] > 0) {
        liveHas.set(i);
      }
    }
    // Pieces a live member is reading from the source are nobody's source read; a handed-over
    // member's reads count while it is connected and its share still progresses (a slow member
    // finishes the runs it started), not once it stalled or left.
    boolean anyOut = !handedOverIds.isEmpty();
    for (Iterator<Peer<C>> it = markers.iterator(); it.hasNext(); ) {
      Peer<C> p = it.next();
      if (p.reading.isEmpty()) {
        it.remove();
        continue;
      }
      if (p.countedView && (!anyOut || !handedOverIds.contains(p.id) || readsStillCount(p, now))) {
        p.reading.forEach(
            (piece, at) -> {
              if (fresh(at, now)) {
                held.set(piece);
              }
            });
      }
    }
    if (!classSelfOut) {
      if (classItself != null) {
        liveHas.or(classItself.has);
      }
      held.or(present);
      sourceReading.keySet().forEach(held::set);
    }
    // The readers depend only on (members, live): kept while both stay the same, so a round costs
    // O(members + pieces) word operations, not members x pieces.
    if (members != readersMembers || (classified && !alive.equals(readersLive))) {
      readersMembers = members;
      readersLive = List.copyOf(alive);
      readers = SwarmPlan.readers(map.size(), members, readersLive);
      readingOrder = SwarmPlan.readingOrder(readers, fileStarts);
      readersLiveSet = Set.copyOf(readersLive);
      blocksSince = now;
    }
    SwarmPlan plan = SwarmPlan.of(readers, members, readersLive, held);
    return new View(readersLiveSet, plan, plan.assignedTo(self), liveHas, classLivePeers);
  }

  /**
   * Which members the view counts ({@link Peer#countedView}: their holdings are nobody's source
   * read) and which of them are live ({@link Peer#countedLive}), the live ids and peers, and when a
   * member's grace ends next; the per-piece counts follow each member whose standing changed.
   */
  private void classify(List<String> members, long now) {
    classifyStale = false;
    classifyTimed = false;
    List<String> alive = new ArrayList<>(members.size());
    List<Peer<?>> livePeers = new ArrayList<>(members.size());
    List<Peer<C>> counted = new ArrayList<>(members.size());
    classRound++;
    // By index: the members' ids are looked at only when some member was handed over.
    boolean anyOut = !handedOverIds.isEmpty();
    for (int k = 0; k < members.size(); k++) {
      String m = members.get(k);
      if (k == selfIndex) {
        alive.add(m);
        continue;
      }
      Peer<C> p = memberPeers.get(k);
      if (p != null && p.refused) {
        continue;
      }
      boolean out = anyOut && handedOverIds.contains(m);
      if (out && p == null) {
        continue;
      }
      if (p == null || p.conn == null) {
        long since =
            p != null && p.everConnected ? p.downSince : Math.max(fillStarted, membershipSince);
        // A member never seen gets the same grace from when this member could first meet it:
        // longer would let one member wait on a dead member's block that the others re-assigned.
        if (now - since > timeout) {
          continue;
        }
        long until = since + timeout;
        if (!classifyTimed || until - classifyUntil < 0) {
          classifyUntil = until;
          classifyTimed = true;
        }
      }
      if (!out) {
        alive.add(m);
      }
      if (p == null) {
        continue;
      }
      p.classRound = classRound;
      p.classLive = !out;
      counted.add(p);
      if (!out) {
        livePeers.add(p);
      }
    }
    for (Peer<C> q : classCounted) {
      if (q.classRound != classRound) {
        setCounted(q, false, false);
      }
    }
    for (Peer<C> q : counted) {
      setCounted(q, true, q.classLive);
    }
    classCounted = counted;
    classSelfOut = handedOverIds.contains(self) && alive.size() > 1;
    classItself = null;
    if (classSelfOut) {
      alive.remove(self); // its share went to the others; alone, it reads everything itself
    } else {
      classItself = byId.get(self); // none, unless a peer connected with this member's id
      if (classItself != null) {
        livePeers.add(classItself);
      }
    }
    classAlive = alive;
    classLivePeers = livePeers;
  }

  private void setCounted(Peer<C> q, boolean view, boolean live) {
    if (q.countedView != view) {
      q.countedView = view;
      countAll(q.has, viewHasCount, view ? 1 : -1);
    }
    if (q.countedLive != live) {
      q.countedLive = live;
      countAll(q.has, liveHasCount, live ? 1 : -1);
    }
  }

  /**
   * Every member id, this member's own included, sorted; kept until the membership or the
   * transport's state changes.
   */
  private List<String> memberList() {
    if (memberList == null) {
      Set<String> members = new TreeSet<>();
      members.add(self);
      if (membership != null && transportUp) {
        members.addAll(membership.ids());
      }
      memberList = List.copyOf(members);
    }
    return memberList;
  }

  /** A READING mark from {@code at} (or null) has not lapsed at {@code now}. */
  private boolean fresh(Long at, long now) {
    return at != null && now - at <= timeout;
  }

  /**
   * The next run of pieces to read from the source, or null for none now: first a last-resort piece
   * (a run of one); then, while fewer than {@link #sourceReadsInFlight} runs are in flight, the
   * first piece in the plan's reading order ({@link SwarmPlan#readingOrder}) the current plan
   * assigns to this member and the pieces of the plan right after it in the same file, up to the
   * range size: one ranged request per run keeps the source's request count that of a plain load,
   * while each piece is announced as soon as it is in. Nothing from the plan while a live member
   * has not yet sent its BITFIELD in this fill: its holdings and reads are unknown, and a member
   * joining mid-load would otherwise re-read what the others hold. Announces READING for each piece
   * of the run.
   */
  private Run nextSourceRun(long now) {
    Integer last = lastResort.poll();
    if (last != null) {
      startReading(last, now);
      return new Run(last, 1);
    }
    // The plan of the last scheduling round; what changed since in the holdings and reads is
    // checked against the current state below.
    View v = lastView != null ? lastView : (lastView = view(now));
    int cap = sourceReadsInFlight(concurrency, v.live().size());
    if (sourceRuns >= cap && readingTurn == null && v.live().size() > 1) {
      List<String> left = readersLeftIds(v);
      cap =
          Math.max(
              cap,
              sourceReadsInFlight(
                  concurrency, v.live().size(), left.size(), Math.max(0, left.indexOf(self))));
    }
    if (sourceRuns >= cap
        && (long) v.live().size() * (cap + 1) <= concurrency
        && shareLags(v, now)) {
      cap++;
    }
    if (sourceRuns >= cap || (readingTurn != null && !readingTurn.contains(self))) {
      return null;
    }
    // Nothing of the plan left for this member: no per-member checks (most members of a large
    // swarm, most of the time).
    BitSet mine = (BitSet) v.mine().clone();
    mine.andNot(present);
    mine.andNot(inProgress);
    mine.andNot(claimable);
    mine.andNot(claimsAwaited);
    mine.andNot(spread);
    if (mine.isEmpty()) {
      return null;
    }
    List<Peer<C>> others = new ArrayList<>();
    for (String m : v.plan().live()) {
      if (m.equals(self)) {
        continue;
      }
      Peer<C> p = byId.get(m);
      boolean unknown =
          p == null
              || (p.conn != null ? !p.synced && now - p.connectedAt <= timeout : !p.everSynced);
      if (unknown) {
        return null;
      }
      if (!p.refused) {
        others.add(p);
      }
    }
    for (int i : readingOrder) {
      if (!mine.get(i) || claimedByOther(others, i, now)) {
        continue;
      }
      PieceMap.Piece first = map.piece(i);
      long bytes = first.length();
      int count = 1;
      for (int j = i + 1; j < map.size() && mine.get(j); j++) {
        PieceMap.Piece next = map.piece(j);
        if (!next.path().equals(first.path())
            || bytes + next.length() > rangeSize
            || claimedByOther(others, j, now)) {
          break;
        }
        bytes += next.length();
        count++;
      }
      for (int k = i; k < i + count; k++) {
        inProgress.set(k);
        startReading(k, now);
      }
      return new Run(i, count);
    }
    return null;
  }

  /** A live peer holds piece {@code i} or announced it is reading it. */
  private boolean claimedByOther(List<Peer<C>> others, int i, long now) {
    for (Peer<C> p : others) {
      if (p.has.get(i) || fresh(p.reading.get(i), now)) {
        return true;
      }
    }
    return false;
  }

  private void startReading(int piece, long now) {
    if (sourceReading.isEmpty()) {
      sourceProgressAt = now;
    }
    sourceReading.put(piece, now);
    broadcast(new Frame.Reading(piece));
  }

  // ------------------------------------------------------------------ limits

  /**
   * Source reads (runs) one member keeps in flight for its plan: the swarm as a whole reads with
   * the concurrency of one loader, so each of {@code liveMembers} takes ⌈concurrency /
   * liveMembers⌉, at least 1 (with more members than {@code concurrency}, {@link #readingTurn}
   * keeps the swarm's total at {@code concurrency}), and with peers at most one per peer: its
   * ingress link carries its own source reads and one connection from each peer, shared about per
   * flow, and it needs its share (1 / liveMembers of the bytes) from the source and the rest from
   * its peers, so one flow for each of those is its due. Last resorts are not capped by this.
   * Measurements behind both caps: docs/DECISIONS.md.
   */
  public static int sourceReadsInFlight(int concurrency, int liveMembers) {
    int members = Math.max(1, liveMembers);
    int share = Math.max(1, (concurrency + members - 1) / members);
    return members == 1 ? share : Math.min(share, members - 1);
  }

  /**
   * Source reads (runs) a member with pieces of its share left may keep in flight once only {@code
   * readersLeft} of the {@code liveMembers} have any ({@link #readersLeft}): the concurrency
   * divided among those readers, ⌊concurrency / readersLeft⌋ each and one more for the first {@code
   * concurrency mod readersLeft} of them in id order ({@code rank}), so together they read with one
   * loader's concurrency and the runs of the members whose share is read are not left unused while
   * the last readers read through an ingress they share with their peer fetches. At most two per
   * peer, below {@code concurrency}, at least 1; {@link #sourceReadsInFlight(int, int)} while every
   * live member has pieces left. A member keeps the larger of the two ({@link #nextSourceRun}).
   */
  public static int sourceReadsInFlight(
      int concurrency, int liveMembers, int readersLeft, int rank) {
    int base = sourceReadsInFlight(concurrency, liveMembers);
    int members = Math.max(1, liveMembers);
    int readers = Math.max(1, Math.min(readersLeft, members));
    if (members == 1 || readers == members) {
      return base;
    }
    int share = concurrency / readers + (rank < concurrency % readers ? 1 : 0);
    return Math.max(1, Math.min(share, Math.min(2 * (members - 1), concurrency - 1)));
  }

  /**
   * Most piece requests outstanding across all peers: twice the per-peer limit, since everything in
   * flight shares this member's one ingress link.
   */
  public static int maxTotalInFlight(int perPeer) {
    return 2 * perPeer;
  }

  /**
   * Requests one member keeps outstanding at one peer: the per-peer limit while few peers share the
   * member's total, else an even share of the total, but at least 2 (one piece on the wire, one
   * queued behind it, so the peer's link never waits on a round trip). Every member asks every peer
   * at once, so a holder's send queue is requesters × this.
   */
  public static int perPeerInFlight(int perPeerLimit, int maxTotal, int usablePeers) {
    return Math.max(
        Math.min(2, perPeerLimit), Math.min(perPeerLimit, maxTotal / Math.max(1, usablePeers)));
  }

  /**
   * The order in which member {@code self} asks equally loaded peers: a hash of (self, peer)
   * (rendezvous order), so each member has its own order and no peer is everybody's first choice.
   */
  public static long tieRank(String self, String peer) {
    long h = 0x9E3779B97F4A7C15L;
    for (int i = 0; i < self.length(); i++) {
      h = (h ^ self.charAt(i)) * 0x100000001B3L;
    }
    h = (h ^ 0xFF) * 0x100000001B3L;
    for (int i = 0; i < peer.length(); i++) {
      h = (h ^ peer.charAt(i)) * 0x100000001B3L;
    }
    // SplitMix64's finaliser: every input bit moves every output bit.
    h = (h ^ (h >>> 30)) * 0xBF58476D1CE4E5B9L;
    h = (h ^ (h >>> 27)) * 0x94D049BB133111EBL;
    return h ^ (h >>> 31);
  }

  // ------------------------------------------------------------------ hash authority

  /**
   * Peer {@code p} announced it holds {@code piece} with hash {@code sha} (HAVE, BITFIELD). From
   * the piece's reader the hash becomes the expected one; from anyone else it is a holding only
   * when it equals the expected hash, a claim while that is unknown, and a reason to drop {@code p}
   * when it differs.
   */
  private void announced(Peer<C> p, int piece, byte[] sha) {
    // A READING mark is only ever taken from the piece's reader of that moment: a member whose
    // read started before the readers changed (a membership change) is still the reader of it.
    boolean markedReading = !p.reading.isEmpty() && fresh(p.reading.remove(piece), now());
    boolean reader = p.id.equals(readerOf(piece));
    if (reader || markedReading) {
      p.shareProgressAt = now();
    }
    byte[] known = hashes[piece];
    if (known != null) {
      if (Arrays.equals(known, sha)) {
        setHas(p, piece);
        p.claims.remove(piece);
      } else if (self.equals(hashFrom[piece]) || present.get(piece)) {
        drop(p, differs(piece, sha));
      } else {
        // Two members disagree and neither hash is backed by bytes here yet: settled when the
        // piece is in the store, or when the expected hash is withdrawn with its announcer.
        p.claims.put(piece, sha);
        claimers.add(p);
      }
      return;
    }
    if (reader || markedReading) {
      accept(p, piece, sha);
    } else {
      p.claims.put(piece, sha);
      claimers.add(p);
    }
  }

  /** The reader {@code p}'s hash of {@code piece} becomes its expected hash. */
  private void accept(Peer<C> p, int piece, byte[] sha) {
    hashes[piece] = sha;
    hashFrom[piece] = p.id;
    setHas(p, piece);
    p.claims.remove(piece);
    settleClaims(piece);
    settleResumed(piece);
  }

  /** Checks the other members' claims on {@code piece} against its now known hash. */
  private void settleClaims(int piece) {
    boolean claimed = false;
    for (Peer<C> q : claimers) {
      if (!q.claims.isEmpty() && q.claims.containsKey(piece)) {
        claimed = true;
        break;
      }
    }
    if (!claimed) {
      return; // nobody claims it: nothing to settle (the common case; no copy of the peers)
    }
    for (Peer<C> q : List.copyOf(peers.values())) {
      byte[] claim = q.claims.remove(piece);
      if (claim == null || q.dropped != null) {
        continue;
      }
      if (Arrays.equals(claim, hashes[piece])) {
        setHas(q, piece);
      } else {
        drop(q, differs(piece, claim));
      }
    }
  }

  private String differs(int piece, byte[] announced) {
    String from = hashFrom[piece];
    return "announced piece "
        + piece
        + " with sha256 "
        + hex(announced)
        + " but "
        + (self.equals(from)
            ? "this member read " + hex(hashes[piece]) + " from the source"
            : "its reader " + from + " announced " + hex(hashes[piece]));
  }

  /** The reader of {@code piece} in the plan of the moment. */
  private String readerOf(int piece) {
    View v = lastView != null ? lastView : (lastView = view(now()));
    return v.plan().reader(piece);
  }

  /**
   * Claims of members who have become the reader of the piece since they announced it (the live set
   * changed, e.g. a block re-split after a member was lost): their hash is now the expected one.
   */
  private void promoteClaims(SwarmPlan plan) {
    for (Peer<C> p : List.copyOf(peers.values())) {
      if (p.claims.isEmpty() || p.dropped != null || p.refused) {
        continue;
      }
      for (Map.Entry<Integer, byte[]> c : new TreeMap<>(p.claims).entrySet()) {
        int piece = c.getKey();
        if (p.dropped == null && hashes[piece] == null && p.id.equals(plan.reader(piece))) {
          accept(p, piece, c.getValue());
        }
      }
    }
  }

  /**
   * Drops member {@code p} for announcing a hash that is not its piece's expected hash: it is
   * disconnected, not dialled, asked, served or trusted again while this policy lives, and
   * reported.
   */
  private void drop(Peer<C> p, String why) {
    if (p.dropped != null) {
      return;
    }
    p.dropped = why;
    p.refused = true;
    syncUsable(p);
    requeue(p);
    clearAllHas(p);
    p.claims.clear();
    p.reading.clear();
    withdrawHashes(p);
    if (dropped.size() < MAX_DROPPED_REPORTED) {
      dropped.add(new DroppedPeer(p.id, why));
    }
    emit(new Decision.Drop<>(p.id, p.conn, why));
  }

  // ------------------------------------------------------------------ bookkeeping

  private void fault(Peer<C> p, String why) {
    p.faults++;
    note(true, "peer " + p.id + ": " + why + " (fault " + p.faults + " of " + MAX_FAULTS + ")");
    if (p.faults >= MAX_FAULTS && !p.refused) {
      p.refused = true;
      syncUsable(p);
      note(
          true,
          "peer "
              + p.id
              + ": "
              + p.faults
              + " faults; not requesting anything from it any"
              + " more");
      requeue(p);
      withdrawHashes(p);
    }
  }

  /**
   * The expected hashes {@code p} set for pieces not present here are withdrawn: it is no authority
   * any more, and pieces others hold must not be checked against a hash it may not be able to back.
   */
  private void withdrawHashes(Peer<C> p) {
    if (hashes == null) {
      return;
    }
    for (int i = 0; i < hashes.length; i++) {
      if (p.id.equals(hashFrom[i]) && !present.get(i)) {
        byte[] was = hashes[i];
        hashes[i] = null;
        hashFrom[i] = null;
        for (Peer<C> q : peers.values()) {
          if (q != p && q.dropped == null && q.has.get(i)) {
            // It announced the same hash: a claim again, settled against the next authority.
            clearHas(q, i);
            q.claims.put(i, was);
            claimers.add(q);
          }
        }
      }
    }
    lastReaders = List.of(); // the next round promotes the new readers' claims
  }

  private void requeue(Peer<C> p) {
    for (Integer piece : p.inFlight.keySet()) {
      inProgress.clear(piece);
      claimFetches.remove(piece);
    }
    p.inFlight.clear();
  }

  /** {@code p} announced {@code piece}: its holdings and the per-piece counts. */
  private void setHas(Peer<C> p, int piece) {
    if (!p.has.get(piece)) {
      p.has.set(piece);
      countHas(p, piece, 1);
    }
  }

  private void clearHas(Peer<C> p, int piece) {
    if (p.has.get(piece)) {
      p.has.clear(piece);
      countHas(p, piece, -1);
    }
  }

  private void clearAllHas(Peer<C> p) {
    for (int i = p.has.nextSetBit(0); i >= 0; i = p.has.nextSetBit(i + 1)) {
      countHas(p, i, -1);
    }
    p.has.clear();
  }

  private void countHas(Peer<C> p, int piece, int delta) {
    if (usableHasCount == null) {
      return;
    }
    if (p.countedUsable) {
      usableHasCount[piece] += delta;
    }
    if (p.countedView) {
      viewHasCount[piece] += delta;
    }
    if (p.countedLive) {
      liveHasCount[piece] += delta;
    }
  }

  private static void countAll(BitSet has, int[] counts, int delta) {
    if (counts == null) {
      return;
    }
    for (int i = has.nextSetBit(0); i >= 0; i = has.nextSetBit(i + 1)) {
      counts[i] += delta;
    }
  }

  /**
   * {@code p}'s usability changed or may have (connect, disconnect, refused): the counts follow.
   */
  private void syncUsable(Peer<C> p) {
    boolean usable = p.usable();
    if (usable != p.countedUsable) {
      p.countedUsable = usable;
      usableCount += usable ? 1 : -1;
      countAll(p.has, usableHasCount, usable ? 1 : -1);
    }
    classifyStale = true;
  }

  /** {@code p} failed {@code piece}. */
  private void setBad(Peer<C> p, int piece) {
    p.bad.set(piece);
    badPeers.add(p);
  }

  private Peer<C> peer(String id) {
    Peer<C> p = byId.get(id);
    if (p == null) {
      classifyStale = true;
      p = new Peer<>(id, tieRank(self, id));
      byId.put(id, p);
      peers.put(id, p);
      byRank = null;
      if (memberPeers != null) {
        // memberPeersOf is sorted and lists each id once: the new peer's slot, if it is a member.
        int k = Collections.binarySearch(memberPeersOf, id);
        if (k >= 0) {
          memberPeers.set(k, p);
        }
      }
    }
    return p;
  }

  private void broadcast(Frame f) {
    for (Peer<C> p : peers.values()) {
      if (p.conn != null) {
        emit(new Decision.Send<>(p.conn, f));
      }
    }
  }

  private void note(boolean warn, String message) {
    emit(new Decision.Note<>(warn, message));
  }

  private void emit(Decision<C> d) {
    outbox.add(d);
  }

  private long now() {
    return clock.getAsLong();
  }

  private static String hex(byte[] b) {
    return HexFormat.of().formatHex(b);
  }
}
