package io.tensorcast.dataplane.p2p;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * Who reads which piece from the source: a pure function of (the members' sorted ids, which of them
 * are live, which pieces each live member holds), so every member that sees the same inputs
 * computes the same plan.
 *
 * <ul>
 *   <li>Base assignment: the pieces are cut into {@code |members|} contiguous blocks, block {@code
 *       j} to the {@code j}-th member in id order (piece {@code i} → member {@code ⌊i × m / n⌋}),
 *       so every source read of a member is large and sequential (cooperative cold load).
 *   <li>Pieces whose base owner is not live (lost, refused) are orphans; the orphans, in piece
 *       order, are cut into contiguous blocks over the live members in id order. This depends only
 *       on the live set, so members agree as soon as they agree on who is live.
 *   <li>A piece that any live member holds, or is reading from the source, is assigned to nobody:
 *       it is fetched from a peer, never read from the source again.
 * </ul>
 *
 * <p>Every piece nobody holds is therefore assigned to exactly one live member.
 *
 * <p>{@link #readingOrder} is the order in which each reader reads its pieces: per block (a maximal
 * run of consecutive pieces with the same reader), first the head of the block's last file when
 * that file continues into the next block, then the tail of the block's first file when that file
 * began in the previous block, then the rest front to back. A file that straddles two blocks is
 * thus read from both ends of the boundary at the start, not its first part last, and every block's
 * last read piece ends a file: each file's contiguous prefix (which its digests follow) grows while
 * the pieces arrive.
 *
 * <p>The same assignment without the last rule names each piece's <em>reader</em> ({@link
 * #reader}): the member whose announced SHA-256 is the piece's expected hash. Only the reader's
 * announcement sets it; every other member's hash for the piece is checked against it.
 */
public final class SwarmPlan {
  private final List<String> members;
  private final List<String> live;
  private final String[] owner;
  private final String[] reader;

  private SwarmPlan(List<String> members, List<String> live, String[] owner, String[] reader) {
    this.members = members;
    this.live = live;
    this.owner = owner;
    this.reader = reader;
  }

  /**
   * Computes the plan.
   *
   * @param pieceCount pieces in the {@link PieceMap}
   * @param members every member id (any order; sorted here); must not be empty
   * @param live the members taking part now (ignored when not a member); must not be empty
   * @param holdings pieces each member holds (verified, in its store) or is reading from the source
   *     now (its READING marks, see {@link Frame.Reading}); missing = none
   * @throws IllegalArgumentException when there are no live members
   */
  public static SwarmPlan compute(
      int pieceCount, Set<String> members, Set<String> live, Map<String, BitSet> holdings) {
    List<String> all = List.copyOf(new TreeSet<>(members));
    List<String> alive = new ArrayList<>();
    for (String m : all) {
      if (live.contains(m)) {
        alive.add(m);
      }
    }
    BitSet held = new BitSet(pieceCount);
    for (String m : alive) {
      BitSet h = holdings.get(m);
      if (h != null) {
        held.or(h);
      }
    }
    return of(readers(pieceCount, all, alive), all, alive, held);
  }

  /**
   * Every piece's reader: the base assignment over {@code members}, the orphans re-split over
   * {@code alive} ({@link #reader}). A function of the two lists alone, so a caller may keep it
   * while they stay the same; O(pieceCount).
   *
   * @param members every member id, sorted
   * @param alive the live members, sorted, a subset of {@code members}; must not be empty
   * @throws IllegalArgumentException when {@code alive} is empty
   */
  static String[] readers(int pieceCount, List<String> members, List<String> alive) {
    if (alive.isEmpty()) {
      throw new IllegalArgumentException("a swarm plan needs at least one live member");
    }
    Set<String> liveSet = new HashSet<>(alive);
    String[] reader = new String[pieceCount];
    List<Integer> orphans = new ArrayList<>();
    int m = members.size();
    for (int i = 0; i < pieceCount; i++) {
      String base = members.get((int) ((long) i * m / pieceCount));
      if (liveSet.contains(base)) {
        reader[i] = base;
      } else {
        orphans.add(i);
      }
    }
    int k = orphans.size();
    for (int j = 0; j < k; j++) {
      reader[orphans.get(j)] = alive.get((int) ((long) j * alive.size() / k));
    }
    return reader;
  }

  /**
   * The pieces whose first byte is the first byte of a file of {@code map}: the file boundaries
   * {@link #readingOrder} starts and ends its segments at.
   */
  static BitSet fileStarts(PieceMap map) {
    BitSet starts = new BitSet(map.size());
    for (PieceMap.Piece p : map.pieces()) {
      if (p.offset() == 0) {
        starts.set(p.index());
      }
    }
    return starts;
  }

  /**
   * Every piece once, in reading order: the blocks (maximal runs of consecutive pieces with the
   * same reader) in piece order, each as three segments — the block's last file's pieces in the
   * block when that file continues past the block (its <em>head</em>), then the pieces of a file
   * that began before the block (its <em>tail</em>), then the rest in piece order. A reader reads
   * the pieces it is assigned in the order they appear here; a run of consecutive pieces of one
   * file never crosses a segment (segments start and end at file or block boundaries). O(pieces).
   *
   * @param readers every piece's reader ({@link #readers}), non-null
   * @param fileStarts the pieces that start a file ({@link #fileStarts}); piece 0 is one
   * @return piece indices, a permutation of {@code 0 .. readers.length - 1}
   */
  static int[] readingOrder(String[] readers, BitSet fileStarts) {
    int n = readers.length;
    int[] order = new int[n];
    int k = 0;
    for (int s = 0; s < n; ) {
      int e = s + 1;
      while (e < n && readers[e].equals(readers[s])) {
        e++;
      }
      // [s, t): the tail of a file that began in an earlier block.
      int t = s;
      if (!fileStarts.get(s)) {
        int next = fileStarts.nextSetBit(s);
        t = next < 0 || next > e ? e : next;
      }
      // [h, e): the head of a file that continues in the next block.
      int h = e;
      if (e < n && !fileStarts.get(e)) {
        h = Math.max(t, fileStarts.previousSetBit(e - 1));
      }
      for (int i = h; i < e; i++) {
        order[k++] = i;
      }
      for (int i = s; i < t; i++) {
        order[k++] = i;
      }
      for (int i = t; i < h; i++) {
        order[k++] = i;
      }
      s = e;
    }
    return order;
  }

  /**
   * The plan from {@link #readers} (not copied: not to be changed afterwards) and the pieces live
   * members hold or read ({@code held}): a held piece has no source owner. O(pieceCount).
   */
  static SwarmPlan of(String[] readers, List<String> members, List<String> alive, BitSet held) {
    String[] owner = readers.clone();
    for (int i = held.nextSetBit(0); i >= 0 && i < owner.length; i = held.nextSetBit(i + 1)) {
      owner[i] = null;
    }
    return new SwarmPlan(List.copyOf(members), List.copyOf(alive), owner, readers);
  }

  /**
   * The member that reads piece {@code index} from the source, or null when a live member holds it.
   */
  public String sourceOwner(int index) {
    Objects.checkIndex(index, owner.length);
    return owner[index];
  }

  /**
   * The member assigned to read piece {@code index} from the source, whether or not some live
   * member holds it already: its base owner when that member is live, else the live member its
   * orphaned block was re-split to. The piece's expected hash is the one this member announces.
   */
  public String reader(int index) {
    Objects.checkIndex(index, reader.length);
    return reader[index];
  }

  /** Pieces {@code member} reads from the source, in piece order. */
  public BitSet assignedTo(String member) {
    BitSet out = new BitSet(owner.length);
    for (int i = 0; i < owner.length; i++) {
      if (member.equals(owner[i])) {
        out.set(i);
      }
    }
    return out;
  }

  /** Number of pieces assigned per member (members with none are absent). */
  public Map<String, Integer> counts() {
    Map<String, Integer> out = new HashMap<>();
    for (String o : owner) {
      if (o != null) {
        out.merge(o, 1, Integer::sum);
      }
    }
    return out;
  }

  /** All member ids, sorted. */
  public List<String> members() {
    return members;
  }

  /** Live member ids, sorted. */
  public List<String> live() {
    return live;
  }

  public int pieceCount() {
    return owner.length;
  }

  /**
   * How many of the rarest candidates, in piece order, {@link #rarest} chooses among: few enough
   * that a member's pieces arrive close to each file's contiguous prefix (which its digests
   * follow), enough that members asking the same peer for fresh pieces mostly ask for different
   * ones and can then serve them to each other.
   */
  public static final int TIE_WINDOW = 8;

  /**
   * How many picks may pass over the front of the tie window (its lowest piece) before a pick takes
   * it (see {@link #rarest(BitSet, int[], int, byte[])}): one window's worth. Half that took the
   * simulator's N = 64 <em>slow</em> last node from 1.277 to 1.332 of the bound; this value leaves
   * every simulator row as it was and bounds the wait.
   */
  public static final int FRONT_PATIENCE = TIE_WINDOW;

  /**
   * Which piece to request next from one peer: among {@code candidates} (pieces that peer has and
   * this member still needs), one the fewest peers hold ({@code holders[i]}). Ties are broken among
   * the first {@link #TIE_WINDOW} such pieces in piece order, by {@code salt} (e.g. a hash of this
   * member's id): requests stay near the front of what is missing, so the files' contiguous
   * prefixes grow while pieces arrive, and members that see the same counts spread their requests
   * over the window.
   *
   * <p>Without {@code passedOver} a salt that never lands on the window's front leaves its lowest
   * piece to the end while the window refills behind it, and the file's digest, which follows the
   * contiguous prefix, waits for that piece. A member's {@code passedOver} (one counter per piece,
   * kept across picks) counts the picks that passed over each front; a front passed over {@link
   * #FRONT_PATIENCE} times is taken by the next pick that has it at the front.
   *
   * @param passedOver per piece, the picks that passed it over at the window's front, updated;
   *     {@code null}: no such bound
   * @return the piece index, or -1 when {@code candidates} is empty
   */
  public static int rarest(BitSet candidates, int[] holders, int salt, byte[] passedOver) {
    int[] window = new int[TIE_WINDOW];
    int size = window(candidates, holders, window);
    if (size == 0) {
      return -1;
    }
    int piece = window[Math.floorMod(salt, size)];
    int front = window[0];
    if (passedOver == null || piece == front) {
      return piece;
    }
    if (passedOver[front] >= FRONT_PATIENCE) {
      return front;
    }
    passedOver[front]++;
    return piece;
  }

  /** {@link #rarest(BitSet, int[], int, byte[])} without the bound on passing over the front. */
  public static int rarest(BitSet candidates, int[] holders, int salt) {
    return rarest(candidates, holders, salt, null);
  }

  /**
   * Fills {@code window} with the first {@link #TIE_WINDOW} of the rarest candidates in piece
   * order; returns how many.
   */
  private static int window(BitSet candidates, int[] holders, int[] window) {
    int n = holders.length;
    if (n == 0 || candidates.isEmpty()) {
      return 0;
    }
    int size = 0;
    int bestCount = Integer.MAX_VALUE;
    for (int i = candidates.nextSetBit(0); i >= 0 && i < n; i = candidates.nextSetBit(i + 1)) {
      int count = holders[i];
      if (count < bestCount) {
        bestCount = count;
        size = 0;
      }
      if (count == bestCount && size < TIE_WINDOW) {
        window[size++] = i;
      }
      if (size == TIE_WINDOW && bestCount <= 1) {
        break;
      }
    }
    return size;
  }
}
