package io.tensorcast.dataplane.shards;

import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.ReadTarget;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.stream.Collectors;

/**
 * Reads one tensor slice from a ModelArtifact copy's control endpoint: {@code GET
 * /v1/tensors/{name}?target=shard&parallelism=tp:R/T@D} (the copy's data plane cuts the slice, so
 * exactly the slice's bytes cross the network, whatever the split dim) or {@code target=as_stored}
 * for a replicated tensor, with the copy's bearer token, the same path and authorisation consumers
 * use. The answer must be {@code 200} with the expected {@code Content-Length}, {@code
 * X-Tensor-Dtype} and {@code X-Tensor-Shape}; anything else is an {@link IOException} and the
 * caller reads the slice from the source instead.
 */
final class CopyReader {

  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .followRedirects(HttpClient.Redirect.NEVER)
          .build();
  private final Path tokenFile;

  CopyReader(Path tokenFile) {
    this.tokenFile = tokenFile;
  }

  /** The query of {@code target}: {@code target=shard&parallelism=tp:1/4@0} or as stored. */
  static String query(ReadTarget target) {
    if (target.mode() != ReadTarget.Mode.SHARD) {
      return "target=as_stored";
    }
    ParallelAxis tp = target.parallelism().tp().orElseThrow();
    return "target=shard&parallelism=tp:" + tp.rank() + "/" + tp.size() + "@" + tp.splitDim();
  }

  /**
   * Reads the slice into {@code dst} (exactly its remaining bytes).
   *
   * @param copy the copy's control endpoint
   * @param name the tensor's name
   * @param target the slice
   * @param dtype expected {@code X-Tensor-Dtype}
   * @param shape expected {@code X-Tensor-Shape}
   * @throws IOException when the copy does not answer with exactly the slice
   */
  void read(
      InetSocketAddress copy,
      String name,
      ReadTarget target,
      String dtype,
      long[] shape,
      ByteBuffer dst)
      throws IOException, InterruptedException {
    String host = copy.getHostString();
    if (host.contains(":")) {
      host = "[" + host + "]";
    }
    URI uri =
        URI.create(
            "http://"
                + host
                + ":"
                + copy.getPort()
                + "/v1/tensors/"
                + URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20")
                + "?"
                + query(target));
    HttpRequest.Builder req = HttpRequest.newBuilder(uri).timeout(Duration.ofMinutes(5)).GET();
    if (tokenFile != null) {
      req.header(
          "Authorization", "Bearer " + Files.readString(tokenFile, StandardCharsets.UTF_8).strip());
    }
    HttpResponse<InputStream> resp =
        http.send(req.build(), HttpResponse.BodyHandlers.ofInputStream());
    try (InputStream in = resp.body()) {
      int expected = dst.remaining();
      String shapeText =
          Arrays.stream(shape).mapToObj(Long::toString).collect(Collectors.joining(","));
      if (resp.statusCode() != 200) {
        throw new IOException(copy + " answered " + resp.statusCode() + " for " + uri.getRawPath());
      }
      long length = resp.headers().firstValueAsLong("Content-Length").orElse(-1);
      String gotDtype = resp.headers().firstValue("X-Tensor-Dtype").orElse("");
      String gotShape = resp.headers().firstValue("X-Tensor-Shape").orElse("");
      if (length != expected || !dtype.equals(gotDtype) || !shapeText.equals(gotShape)) {
        throw new IOException(
            copy
                + " answered "
                + length
                + " bytes of "
                + gotDtype
                + "["
                + gotShape
                + "] for tensor \""
                + name
                + "\" "
                + target
                + "; expected "
                + expected
                + " bytes of "
                + dtype
                + "["
                + shapeText
                + "]");
      }
      byte[] buf = new byte[(int) Math.min(expected, 256 * 1024)];
      while (dst.hasRemaining()) {
        int n = in.read(buf, 0, Math.min(buf.length, dst.remaining()));
        if (n < 0) {
          throw new IOException(
              copy + ": body of tensor \"" + name + "\" ended " + dst.remaining() + " bytes early");
        }
        dst.put(buf, 0, n);
      }
      if (in.read() >= 0) {
        throw new IOException(copy + ": body of tensor \"" + name + "\" is longer than announced");
      }
    }
  }

  static String describe(InetSocketAddress a) {
    return Objects.toString(a.getHostString()) + ":" + a.getPort();
  }
}
