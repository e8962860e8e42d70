package io.tensorcast.dataplane.http;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.DefaultFileRegion;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.LastHttpContent;
import io.tensorcast.dataplane.consumer.Segment;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Streams one response body, the concatenation of segments of store files, to a connection without
 * copying it through the heap: each segment is a {@link DefaultFileRegion}, which the NIO transport
 * sends with {@code FileChannel.transferTo} ({@code sendfile(2)} on Linux) from the store's tmpfs
 * file straight to the socket.
 *
 * <p>Small segments are the exception ({@link BodyStreaming}): a run of consecutive segments
 * shorter than {@link BodyStreaming#gatherBelowBytes()} is read from the same open file channels
 * into one pooled direct buffer (up to {@link BodyStreaming#gatherBufferBytes()}) and written with
 * one system call, since a {@code sendfile} per 2 KiB row costs more than copying it. The bytes are
 * copied from the store's mapping through {@link StoredArtifact#read} (no system call; it is safe
 * against an unload, which it reports with {@code IllegalStateException}); after an unload, or
 * without an artifact, from the open file channels ({@code pread}, still valid on a deleted tmpfs
 * file). Either is a memory copy on the event loop, at most one buffer's worth per step.
 *
 * <p>Memory per connection is bounded: at most {@link #MAX_IN_FLIGHT} regions or buffers are queued
 * at a time, of which at most {@link BodyStreaming#maxGatherBuffersInFlight()} buffers, and a new
 * one only while the channel is writable; the next is written when one completes or the channel
 * becomes writable again ({@link #pump()}). Files are opened before the head is sent (so a file
 * removed by an unload turns into an error reply, not a cut body) and stay open until the body is
 * sent: an unload that deletes them meanwhile does not disturb the transfer (the open descriptors
 * keep the tmpfs pages) and, unlike a mapping, cannot crash the process.
 *
 * <p>Used on the channel's event loop only.
 */
final class SegmentStreamer {
  private static final Logger log = LoggerFactory.getLogger(SegmentStreamer.class);

  /** Regions queued on the channel at most; each is a small object, not a buffer. */
  static final int MAX_IN_FLIGHT = 16;

  private final ChannelHandlerContext ctx;
  private final Path directory;
  private final List<Segment> segments;
  private final boolean keepAlive;
  private final BodyStreaming streaming;
  private StoredArtifact artifact;
  private final Runnable onDone;
  private final Map<String, FileChannel> files = new LinkedHashMap<>();
  private int next;
  private int inFlight;
  private int buffersInFlight;
  private boolean pumping;
  private boolean again;
  private boolean done;

  SegmentStreamer(
      ChannelHandlerContext ctx,
      Path directory,
      List<Segment> segments,
      StoredArtifact artifact,
      boolean keepAlive,
      BodyStreaming streaming,
      Runnable onDone) {
    this.streaming = streaming;
    this.artifact = artifact;
    this.ctx = ctx;
    this.directory = directory;
    this.segments = segments;
    this.keepAlive = keepAlive;
    this.onDone = onDone;
  }

  /**
   * Opens every file the segments read.
   *
   * @throws IOException if one cannot be opened (e.g. the artifact was unloaded); all opened ones
   *     are closed again
   */
  void open() throws IOException {
    try {
      for (Segment s : segments) {
        if (!files.containsKey(s.file())) {
          files.put(
              s.file(), FileChannel.open(directory.resolve(s.file()), StandardOpenOption.READ));
        }
      }
    } catch (IOException e) {
      closeFiles();
      throw e;
    }
  }

  /** Writes the head, then the body as the channel drains. */
  void start(HttpResponse head) {
    inFlight++;
    ctx.write(head).addListener(this::completed);
    pump();
  }

  /** Queues more regions while the channel is writable; ends the response after the last one. */
  void pump() {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        while (!done
            && next < segments.size()
            && inFlight < MAX_IN_FLIGHT
            && ctx.channel().isWritable()) {
          Segment s = segments.get(next);
          if (s.length() >= streaming.gatherBelowBytes()) {
            next++;
            inFlight++;
            ctx.write(new SharedFileRegion(files.get(s.file()), s.offset(), s.length()))
                .addListener(this::completed);
          } else if (buffersInFlight < streaming.maxGatherBuffersInFlight()) {
            ByteBuf buf = gather();
            if (buf == null) {
              return; // failed
            }
            inFlight++;
            buffersInFlight++;
            ctx.write(buf).addListener(this::bufferCompleted);
          } else {
            break;
          }
        }
        if (!done && next == segments.size() && inFlight == 0) {
          finish();
        } else if (!done) {
          ctx.flush();
        }
      } while (again && !done);
    } finally {
      pumping = false;
    }
  }

  /**
   * Reads the run of small segments starting at {@code next} (as many as fit one buffer) into a
   * pooled direct buffer and advances {@code next} past them.
   *
   * @return the buffer, or {@code null} after failing the stream (a file ended early or a read
   *     failed)
   */
  private ByteBuf gather() {
    int limit = streaming.gatherBufferBytes();
    long bytes = 0;
    int end = next;
    while (end < segments.size()) {
      Segment s = segments.get(end);
      if (s.length() >= streaming.gatherBelowBytes() || bytes + s.length() > limit) {
        break;
      }
      bytes += s.length();
      end++;
    }
    ByteBuf buf = ctx.alloc().directBuffer((int) bytes, (int) bytes);
    try {
      for (; next < end; next++) {
        Segment s = segments.get(next);
        if (artifact != null) {
          int at = buf.writerIndex();
          try {
            artifact.read(s.file(), s.offset(), buf.nioBuffer(at, (int) s.length()));
            buf.writerIndex(at + (int) s.length());
            continue;
          } catch (IllegalStateException unloaded) {
            artifact = null; // unloaded meanwhile: the open files still hold the bytes
          }
        }
        FileChannel ch = files.get(s.file());
        long pos = s.offset();
        int left = (int) s.length();
        while (left > 0) {
          int n = buf.writeBytes(ch, pos, left);
          if (n < 0) {
            throw new IOException(
                "stored file '" + s.file() + "' ends before byte " + (s.offset() + s.length()));
          }
          pos += n;
          left -= n;
        }
      }
      return buf;
    } catch (IOException | RuntimeException e) {
      buf.release();
      fail(e);
      return null;
    }
  }

  private void bufferCompleted(io.netty.util.concurrent.Future<? super Void> f) {
    buffersInFlight--;
    completed(f);
  }

  private void completed(io.netty.util.concurrent.Future<? super Void> f) {
    inFlight--;
    if (!f.isSuccess()) {
      fail(f.cause());
    } else {
      pump();
    }
  }

  private void finish() {
    done = true;
    closeFiles();
    if (keepAlive) {
      ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
    } else {
      ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT)
          .addListener(ChannelFutureListener.CLOSE);
    }
    onDone.run();
  }

  /** The connection went away or a transfer failed: stop, release the files, close. */
  void fail(Throwable cause) {
    if (done) {
      return;
    }
    done = true;
    log.debug(
        "streaming to {} stopped after {} of {} segments: {}",
        ctx.channel().remoteAddress(),
        next,
        segments.size(),
        String.valueOf(cause));
    closeFiles();
    ctx.close();
    onDone.run();
  }

  private void closeFiles() {
    for (FileChannel f : files.values()) {
      try {
        f.close();
      } catch (IOException ignored) {
        // read-only descriptor: nothing to lose
      }
    }
    files.clear();
  }

  /**
   * A region of a file channel shared by several regions: releasing it does not close the channel
   * (the streamer closes its files when the body is done).
   */
  private static final class SharedFileRegion extends DefaultFileRegion {
    SharedFileRegion(FileChannel file, long position, long count) {
      super(file, position, count);
    }

    @Override
    protected void deallocate() {
      // the channel belongs to the streamer
    }
  }
}
