package io.tensorcast.dataplane.p2p.sim;

import java.util.PriorityQueue;

/**
 * A virtual clock (nanoseconds) and the events scheduled on it. Events at the same time run in the
 * order they were scheduled, so a run is a pure function of its inputs.
 */
final class EventLoop {
  private record Event(long at, long seq, Runnable action) implements Comparable<Event> {
    @Override
    public int compareTo(Event o) {
      return at != o.at ? Long.compare(at, o.at) : Long.compare(seq, o.seq);
    }
  }

  private final PriorityQueue<Event> queue = new PriorityQueue<>();
  private long now;
  private long seq;
  private long events;

  /** The virtual time, nanoseconds from the start of the run. */
  long now() {
    return now;
  }

  /** Runs {@code action} at {@code when} (not before now). */
  void at(long when, Runnable action) {
    queue.add(new Event(Math.max(when, now), seq++, action));
  }

  /** Runs {@code action} {@code delay} nanoseconds from now. */
  void after(long delay, Runnable action) {
    at(now + delay, action);
  }

  /**
   * Runs the next event if it is due at or before {@code limit}.
   *
   * @return false when no event is due by then (the clock is left where it is)
   */
  boolean runNext(long limit) {
    Event e = queue.peek();
    if (e == null || e.at > limit) {
      return false;
    }
    queue.poll();
    now = e.at;
    events++;
    e.action.run();
    return true;
  }

  /** Runs every event due at or before {@code limit}, then sets the clock to {@code limit}. */
  void runUntil(long limit) {
    while (runNext(limit)) {
      // next
    }
    now = Math.max(now, limit);
  }

  /** Events run so far. */
  long events() {
    return events;
  }
}
