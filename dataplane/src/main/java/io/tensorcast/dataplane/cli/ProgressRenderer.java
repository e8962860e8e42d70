package io.tensorcast.dataplane.cli;

import java.io.OutputStream;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * Shows a transfer's progress: as one bar redrawn in place on a terminal ({@link Bar}), as plain
 * lines every few seconds otherwise ({@link Plain}: logs, CI, pipes).
 */
public sealed interface ProgressRenderer permits ProgressRenderer.Bar, ProgressRenderer.Plain {

  /** Called at every tick with the current state. */
  void update(ProgressSnapshot s);

  /** Shows the final state and ends its line. */
  void finish(ProgressSnapshot s);

  /** How {@code --progress} picks a renderer. */
  enum Mode {
    /** A bar when the JVM has a console ({@link System#console()}), plain lines otherwise. */
    auto,
    bar,
    plain,
    none
  }

  /**
   * One line redrawn in place: carriage return, {@code label [#####.....] numbers}, erase to the
   * end of the line. Log lines written through {@link #logSink()} appear above it: the bar is
   * erased, the log line written, the bar drawn again below it, so the two never share a line.
   */
  final class Bar implements ProgressRenderer {
    /** Characters between the brackets. */
    static final int WIDTH = 24;

    private final PrintWriter out;
    private String line;

    /**
     * @param out the terminal (standard error)
     */
    public Bar(PrintWriter out) {
      this.out = out;
    }

    @Override
    public synchronized void update(ProgressSnapshot s) {
      line = render(s);
      draw();
    }

    @Override
    public synchronized void finish(ProgressSnapshot s) {
      update(s);
      out.print('\n');
      out.flush();
      line = null;
    }

    /** {@code Loading [##########..............] 45.2% …}. */
    static String render(ProgressSnapshot s) {
      int filled = (int) Math.round(s.fraction() * WIDTH);
      return String.format(
          java.util.Locale.ROOT,
          "%-9s [%s%s] %s",
          s.label(),
          "#".repeat(filled),
          ".".repeat(WIDTH - filled),
          s.numbers());
    }

    private void draw() {
      if (line != null) {
        out.print("\r" + line + "\u001b[K");
        out.flush();
      }
    }

    /**
     * A stream for log output while the bar is shown (e.g. installed as {@code System.err}, which
     * logback's console appender writes to): each complete line erases the bar, is written, and the
     * bar is drawn again under it. Text is decoded as UTF-8 a whole line at a time.
     */
    public OutputStream logSink() {
      return new OutputStream() {
        private final java.io.ByteArrayOutputStream pending = new java.io.ByteArrayOutputStream();

        @Override
        public void write(int b) {
          synchronized (Bar.this) {
            pending.write(b);
            if (b == '\n') {
              emit();
            }
          }
        }

        @Override
        public void write(byte[] b, int off, int len) {
          synchronized (Bar.this) {
            for (int i = off; i < off + len; i++) {
              pending.write(b[i]);
              if (b[i] == '\n') {
                emit();
              }
            }
          }
        }

        @Override
        public void flush() {
          synchronized (Bar.this) {
            if (pending.size() > 0) {
              emit();
            }
          }
        }

        private void emit() {
          String text = pending.toString(java.nio.charset.StandardCharsets.UTF_8);
          pending.reset();
          if (line != null) {
            out.print("\r\u001b[K");
          }
          out.print(text);
          if (!text.endsWith("\n")) {
            out.print('\n');
          }
          draw();
        }
      };
    }
  }

  /**
   * Plain lines, {@code label numbers}, at most one every {@code interval} (and one whenever the
   * label changes), no control characters: for logs, CI output and pipes.
   */
  final class Plain implements ProgressRenderer {
    private final PrintWriter out;
    private final LongSupplier nanoClock;
    private final long intervalNanos;
    private long lastPrinted;
    private String lastLabel;

    /**
     * @param out where the lines go (standard error)
     * @param nanoClock a monotonic clock in nanoseconds ({@code System::nanoTime})
     * @param interval the least time between two lines of the same label
     */
    public Plain(PrintWriter out, LongSupplier nanoClock, Duration interval) {
      this.out = out;
      this.nanoClock = nanoClock;
      this.intervalNanos = interval.toNanos();
    }

    @Override
    public synchronized void update(ProgressSnapshot s) {
      long now = nanoClock.getAsLong();
      if (lastLabel == null || !lastLabel.equals(s.label()) || now - lastPrinted >= intervalNanos) {
        print(s, now);
      }
    }

    @Override
    public synchronized void finish(ProgressSnapshot s) {
      print(s, nanoClock.getAsLong());
    }

    private void print(ProgressSnapshot s, long now) {
      out.println(String.format(java.util.Locale.ROOT, "%-9s %s", s.label(), s.numbers()));
      out.flush();
      lastPrinted = now;
      lastLabel = s.label();
    }
  }
}
