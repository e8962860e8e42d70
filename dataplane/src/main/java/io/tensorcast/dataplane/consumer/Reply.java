package io.tensorcast.dataplane.consumer;

import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpResponse;
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
 */
public record Reply(HttpResponse response, Path directory, List<Segment> body) {
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
