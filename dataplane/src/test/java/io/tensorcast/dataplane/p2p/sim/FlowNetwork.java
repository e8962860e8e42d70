package io.tensorcast.dataplane.p2p.sim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A fluid model of transfers over per-node links: every transfer (a {@link Flow}) leaves through
 * one uplink and enters through one downlink, and the flows of a link share its capacity max-min
 * fairly (a flow held back at its other end leaves its share to the rest), as TCP flows through a
 * shaped link do.
 *
 * <p>Rates are recomputed when the set of flows changes, at most once per {@link #quantum}: a flow
 * started between two recomputations waits for the next one, and a flow that ends is noticed at the
 * next one, so every transfer may end up to one quantum late. Bytes are exact: a flow's bytes are
 * counted on both its links as they move. The max-min share is found by alternating per-link
 * water-filling (uplinks, then downlinks, three rounds), exact for one bottleneck per flow and
 * within a few per cent otherwise.
 */
final class FlowNetwork {
  /** One direction of a node's (or the origin's) link. */
  static final class Link {
    final String name;

    /** Bytes per nanosecond. */
    double capacity;

    final List<Flow> flows = new ArrayList<>();

    /** Bytes that went through this link. */
    double bytes;

    Link(String name, double bytesPerSecond) {
      this.name = name;
      this.capacity = bytesPerSecond / 1e9;
    }

    @Override
    public String toString() {
      return name;
    }
  }

  /** One transfer in progress. */
  final class Flow {
    final Link up;
    final Link down;
    final long size;
    final Runnable done;
    double remaining;

    /** Bytes per nanosecond, until the next recomputation. */
    double rate;

    private double offerUp;
    private double offerDown;
    boolean active = true;

    /** What the caller attached (e.g. the connection the bytes travel on), or null. */
    Object tag;

    Flow(Link up, Link down, long size, Runnable done) {
      this.up = up;
      this.down = down;
      this.size = size;
      this.remaining = size;
      this.done = done;
    }

    /** Bytes moved so far. */
    long moved() {
      return Math.round(size - remaining);
    }
  }

  private final EventLoop loop;

  /** Shortest interval between two rate recomputations, nanoseconds. */
  final long quantum;

  private final List<Flow> flows = new ArrayList<>();
  private long advancedTo;
  private long lastRecompute = Long.MIN_VALUE / 2;
  private long scheduledAt = -1;
  private long generation;
  private boolean inRecompute;
  private boolean dirty;

  FlowNetwork(EventLoop loop, long quantum) {
    this.loop = Objects.requireNonNull(loop);
    if (quantum < 0) {
      throw new IllegalArgumentException("quantum must not be negative, got " + quantum);
    }
    this.quantum = quantum;
  }

  /** Flows in progress. */
  int activeFlows() {
    return flows.size();
  }

  /**
   * Starts moving {@code bytes} from {@code up} to {@code down} now; {@code done} runs when the
   * last byte left (add the latency for its arrival).
   */
  Flow start(Link up, Link down, long bytes, Runnable done) {
    if (bytes <= 0) {
      throw new IllegalArgumentException("a flow needs at least one byte, got " + bytes);
    }
    advance(loop.now());
    Flow f = new Flow(up, down, bytes, done);
    flows.add(f);
    up.flows.add(f);
    down.flows.add(f);
    changed();
    return f;
  }

  /** Stops {@code f} where it is (its node died); its {@code done} does not run. */
  void cancel(Flow f) {
    if (!f.active) {
      return;
    }
    advance(loop.now());
    remove(f);
    changed();
  }

  private void remove(Flow f) {
    f.active = false;
    flows.remove(f);
    f.up.flows.remove(f);
    f.down.flows.remove(f);
  }

  private void changed() {
    dirty = true;
    if (!inRecompute) {
      schedule(Math.max(loop.now(), lastRecompute + quantum));
    }
  }

  private void schedule(long when) {
    if (scheduledAt >= 0 && scheduledAt <= when) {
      return;
    }
    scheduledAt = when;
    long gen = ++generation;
    loop.at(
        when,
        () -> {
          if (gen == generation) {
            scheduledAt = -1;
            recompute();
          }
        });
  }

  /** Counts the bytes every flow moved up to now on its links ({@link Link#bytes}). */
  void sync() {
    advance(loop.now());
  }

  /** Moves every flow's bytes up to {@code t} at its current rate. */
  private void advance(long t) {
    long dt = t - advancedTo;
    if (dt <= 0) {
      return;
    }
    for (Flow f : flows) {
      double moved = Math.min(f.remaining, f.rate * dt);
      f.remaining -= moved;
      f.up.bytes += moved;
      f.down.bytes += moved;
    }
    advancedTo = t;
  }

  private void recompute() {
    long now = loop.now();
    advance(now);
    inRecompute = true;
    try {
      // Flows that ended: their callbacks may start the next transfer on the same connection,
      // which then shares this recomputation.
      List<Flow> ended = new ArrayList<>();
      for (Flow f : flows) {
        if (f.remaining <= 0.5) {
          ended.add(f);
        }
      }
      for (Flow f : ended) {
        f.up.bytes += f.remaining;
        f.down.bytes += f.remaining;
        f.remaining = 0;
        remove(f);
      }
      for (Flow f : ended) {
        f.done.run();
      }
      shareOut();
      dirty = false;
      lastRecompute = now;
    } finally {
      inRecompute = false;
    }
    double next = Double.POSITIVE_INFINITY;
    for (Flow f : flows) {
      if (f.rate > 0) {
        next = Math.min(next, f.remaining / f.rate);
      }
    }
    if (next != Double.POSITIVE_INFINITY) {
      schedule(now + Math.max(quantum, (long) Math.ceil(next)));
    }
  }

  /** Max-min fair rates by alternating water-filling over the uplinks and the downlinks. */
  private void shareOut() {
    List<Link> ups = new ArrayList<>();
    List<Link> downs = new ArrayList<>();
    for (Flow f : flows) {
      f.offerDown = Double.POSITIVE_INFINITY;
      f.offerUp = Double.POSITIVE_INFINITY;
    }
    java.util.IdentityHashMap<Link, Boolean> seen = new java.util.IdentityHashMap<>();
    for (Flow f : flows) {
      if (seen.put(f.up, Boolean.TRUE) == null) {
        ups.add(f.up);
      }
      if (seen.put(f.down, Boolean.TRUE) == null) {
        downs.add(f.down);
      }
    }
    for (int round = 0; round < 3; round++) {
      for (Link l : ups) {
        waterFill(l, true);
      }
      for (Link l : downs) {
        waterFill(l, false);
      }
    }
    for (Flow f : flows) {
      f.rate = Math.min(f.offerUp, f.offerDown);
    }
    for (Link l : ups) {
      clamp(l);
    }
    for (Link l : downs) {
      clamp(l);
    }
  }

  /**
   * Water-fills {@code l}: its level is the rate every flow may take here when flows held back at
   * their other end ({@code demand} below the level) take only what they get there; every flow is
   * offered the level (the whole capacity when the demands do not fill the link).
   */
  private static void waterFill(Link l, boolean up) {
    int n = l.flows.size();
    double[] demand = new double[n];
    for (int i = 0; i < n; i++) {
      Flow f = l.flows.get(i);
      demand[i] = up ? f.offerDown : f.offerUp;
    }
    Arrays.sort(demand);
    double left = l.capacity;
    int k = n;
    double level = l.capacity;
    for (int j = 0; j < n; j++) {
      if (demand[j] * k <= left) {
        left -= demand[j];
        k--;
      } else {
        level = left / k;
        break;
      }
    }
    for (Flow f : l.flows) {
      if (up) {
        f.offerUp = level;
      } else {
        f.offerDown = level;
      }
    }
  }

  /** Scales the flows of a link whose rates add up to more than its capacity down to it. */
  private static void clamp(Link l) {
    double sum = 0;
    for (Flow f : l.flows) {
      sum += f.rate;
    }
    if (sum > l.capacity) {
      double k = l.capacity / sum;
      for (Flow f : l.flows) {
        f.rate *= k;
      }
    }
  }
}
