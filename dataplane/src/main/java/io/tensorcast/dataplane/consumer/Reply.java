package io.tensorcast.dataplane.consumer;

import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpResponse;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * What {@link TensorEndpoint} answers to one request: either a complete small response ({@link
 * FullHttpResponse}, empty {@code body}) or a response head whose body is the concatenation of
 * {@code body}'s segments of the files under {@code directory}, which the server streams zero-copy.
 *
 * @param response the status line and headers ({@code Content-Length} set); a {@link
 *     FullHttpResponse} when {@code body} is empty
 * @param directory the artifact's store directory the segments' paths are relative to, or {@code
 *     null} when {@code body} is empty
 * @param body the body's segments, in order
 * @param artifact the stored artifact the segments belong to, or {@code null}: lets the server copy
 *     small segments from the store's mapping ({@link StoredArtifact#read}, safe against an unload)
 *     instead of a {@code pread} each; without it the server reads them from the files
 */
public record Reply(
    HttpResponse response, Path directory, List<Segment> body, StoredArtifact artifact) {

  /** A reply whose body, if any, is read from the files under {@code directory} only. */
  public Reply(HttpResponse response, Path directory, List<Segment> body) {
    this(response, directory, body, null);
  }

  public Reply {
    Objects.requireNonNull(response, "response");
    body = List.copyOf(body);
    if (body.isEmpty() != (response instanceof FullHttpResponse)) {
      throw new IllegalArgumentException("a reply has either a full response or body segments");
    }
    if (!body.isEmpty()) {
      Objects.requireNonNull(directory, "directory");
    }
  }
}
