package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * A small client of the write API ({@link WriteHandler}) for JVM writers, the CLI and tests:
 * HTTP/1.1 over the unix socket (or TCP), one keep-alive connection, bodies streamed from the
 * caller's buffers. Not thread-safe; one per writer thread.
 */
public final class WriteClient implements AutoCloseable {
  private final SocketAddress address;
  private final String token;
  private SocketChannel channel;
  private OutputStream out;
  private InputStream in;

  private WriteClient(SocketAddress address, String token) {
    this.address = address;
    this.token = Objects.requireNonNull(token, "token");
  }

  /** A client of the write API's unix socket. */
  public static WriteClient unix(Path socket, String token) {
    return new WriteClient(UnixDomainSocketAddress.of(socket), token);
  }

  /** A client of the write API over TCP. */
  public static WriteClient tcp(InetSocketAddress address, String token) {
    return new WriteClient(address, token);
  }

  /**
   * An answer.
   *
   * @param status HTTP status
   * @param headers lower-case names
   * @param body the body
   */
  public record Response(int status, Map<String, String> headers, byte[] body) {
    /** The body as JSON. */
    public JsonNode json() {
      try {
        return WriteJson.JSON.readTree(body);
      } catch (IOException e) {
        throw new IllegalStateException(
            "not JSON (HTTP " + status + "): " + new String(body, StandardCharsets.UTF_8), e);
      }
    }

    /** The body as text. */
    public String text() {
      return new String(body, StandardCharsets.UTF_8);
    }

    /** The error reason of a JSON error body, or null. */
    public String reason() {
      try {
        JsonNode r = WriteJson.JSON.readTree(body).get("reason");
        return r == null ? null : r.asText();
      } catch (IOException e) {
        return null;
      }
    }

    /** Throws unless the status is 2xx. */
    public Response ok() {
      if (status / 100 != 2) {
        throw new IllegalStateException("HTTP " + status + ": " + text());
      }
      return this;
    }
  }

  /** Writes a request body. */
  @FunctionalInterface
  public interface Body {
    void writeTo(OutputStream out) throws IOException;
  }

  /** Sends a request with a body of {@code length} bytes that {@code body} writes. */
  public Response request(String method, String path, long length, Body body) throws IOException {
    connect();
    StringBuilder h = new StringBuilder();
    h.append(method).append(' ').append(path).append(" HTTP/1.1\r\n");
    h.append("Host: tensorcast\r\n");
    h.append("Authorization: Bearer ").append(token).append("\r\n");
    h.append("Content-Length: ").append(length).append("\r\n");
    if (length > 0) {
      h.append("Content-Type: application/octet-stream\r\n");
    }
    h.append("\r\n");
    try {
      out.write(h.toString().getBytes(StandardCharsets.ISO_8859_1));
      if (body != null) {
        body.writeTo(out);
      }
      out.flush();
    } catch (IOException e) {
      // The server may have answered and closed early (a refused put): read what it said.
      Response early = tryRead();
      if (early != null) {
        return early;
      }
      throw e;
    }
    return read();
  }

  /** Sends a JSON request (or none for a null body). */
  public Response json(String method, String path, JsonNode body) throws IOException {
    byte[] b = body == null ? new byte[0] : WriteJson.JSON.writeValueAsBytes(body);
    return request(method, path, b.length, o -> o.write(b));
  }

  private Response tryRead() {
    try {
      return read();
    } catch (IOException e) {
      return null;
    }
  }

  private Response read() throws IOException {
    String status = line();
    if (!status.startsWith("HTTP/1.1 ") || status.length() < 12) {
      throw new IOException("bad status line: " + status);
    }
    int code = Integer.parseInt(status.substring(9, 12));
    Map<String, String> headers = new LinkedHashMap<>();
    for (String l = line(); !l.isEmpty(); l = line()) {
      int c = l.indexOf(':');
      headers.put(l.substring(0, c).trim().toLowerCase(Locale.ROOT), l.substring(c + 1).trim());
    }
    if (code == 100) {
      return read();
    }
    long len = Long.parseLong(headers.getOrDefault("content-length", "0"));
    byte[] body = in.readNBytes((int) len);
    if (body.length != len) {
      throw new EOFException("body ended after " + body.length + " of " + len + " bytes");
    }
    if ("close".equalsIgnoreCase(headers.get("connection"))) {
      close();
    }
    return new Response(code, headers, body);
  }

  private String line() throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int c;
    while ((c = in.read()) != '\n') {
      if (c < 0) {
        throw new EOFException("connection closed inside a response head");
      }
      if (c != '\r') {
        b.write(c);
      }
    }
    return b.toString(StandardCharsets.ISO_8859_1);
  }

  private void connect() throws IOException {
    if (channel != null && channel.isOpen()) {
      return;
    }
    if (address instanceof UnixDomainSocketAddress unix) {
      SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX);
      channel = c;
      try {
        UnixSocketPaths.through(unix.getPath(), p -> c.connect(UnixDomainSocketAddress.of(p)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.io.InterruptedIOException("interrupted while connecting to " + unix);
      }
    } else {
      channel = SocketChannel.open();
      channel.connect(address);
    }
    out = new java.io.BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16);
    in = new BufferedInputStream(Channels.newInputStream(channel), 1 << 16);
  }

  @Override
  public void close() {
    if (channel != null) {
      try {
        channel.close();
      } catch (IOException ignored) {
        // closing
      }
      channel = null;
    }
  }

  // ------------------------------------------------------------------ the API

  /** {@code POST /v1/writes}: creates a version. */
  public Response create(String name, String kind, Map<String, String> metadata)
      throws IOException {
    ObjectNode o = WriteJson.JSON.createObjectNode().put("name", name);
    if (kind != null) {
      o.put("kind", kind);
    }
    if (metadata != null) {
      ObjectNode m = o.putObject("metadata");
      metadata.forEach(m::put);
    }
    return json("POST", "/v1/writes", o);
  }

  /** One tensor to put: bytes from {@code data}'s position to its limit. */
  public record Tensor(
      String name,
      String dtype,
      long[] shape,
      String parallelism,
      String writerPartition,
      ByteBuffer data) {}

  /** {@code POST} (put) or {@code PUT} (upsert) {@code /v1/writes/{v}/tensors/{name}}. */
  public Response putTensor(String version, Tensor t, boolean upsert) throws IOException {
    StringBuilder path =
        new StringBuilder("/v1/writes/")
            .append(version)
            .append("/tensors/")
            .append(encode(t.name()))
            .append("?dtype=")
            .append(t.dtype())
            .append("&shape=")
            .append(shape(t.shape()));
    if (t.parallelism() != null) {
      path.append("&parallelism=").append(encode(t.parallelism()));
    }
    if (t.writerPartition() != null) {
      path.append("&writer_partition=").append(encode(t.writerPartition()));
    }
    ByteBuffer d = t.data().duplicate();
    return request(upsert ? "PUT" : "POST", path.toString(), d.remaining(), o -> write(o, d));
  }

  /** {@code POST} (put) or {@code PUT} (upsert) {@code /v1/writes/{v}/batches}. */
  public Response putBatch(String version, List<Tensor> tensors, boolean upsert)
      throws IOException {
    byte[] header = WriteJson.JSON.writeValueAsBytes(declarations(tensors, null));
    long total = 4L + header.length;
    for (Tensor t : tensors) {
      total += t.data().remaining();
    }
    return request(
        upsert ? "PUT" : "POST",
        "/v1/writes/" + version + "/batches",
        total,
        o -> {
          o.write(
              ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(header.length).array());
          o.write(header);
          for (Tensor t : tensors) {
            write(o, t.data().duplicate());
          }
        });
  }

  /**
   * The zero-copy way in: reserves the batch's segment, writes every tensor's bytes into it through
   * the shared writes directory ({@code writesDirectory}, as the writer sees it), and commits (with
   * each tensor's SHA-256 for the data plane to check). A writer partition's tensor must be given
   * as its shard here (the writer cuts it).
   */
  public Response putReserved(
      String version, List<Tensor> tensors, boolean upsert, Path writesDirectory)
      throws IOException {
    return putReserved(version, tensors, upsert, writesDirectory, true);
  }

  /**
   * As {@link #putReserved(String, List, boolean, Path)}; {@code checkDigests} false commits
   * without the tensors' SHA-256 (the data plane then cannot check what it did not see).
   */
  public Response putReserved(
      String version,
      List<Tensor> tensors,
      boolean upsert,
      Path writesDirectory,
      boolean checkDigests)
      throws IOException {
    ObjectNode decl = declarations(tensors, upsert);
    Response r = json("POST", "/v1/writes/" + version + "/reservations", decl);
    if (r.status() != 201) {
      return r;
    }
    JsonNode ans = r.json();
    Path file = writesDirectory.resolve(ans.get("file").asText());
    ObjectNode commit = WriteJson.JSON.createObjectNode();
    ObjectNode sums = commit.putObject("sha256");
    try (FileChannel ch =
        FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      int i = 0;
      for (JsonNode slot : ans.get("tensors")) {
        Tensor t = tensors.get(i++);
        ByteBuffer d = t.data().duplicate();
        long off = slot.get("offset").asLong();
        if (d.remaining() != slot.get("length").asLong()) {
          throw new IllegalArgumentException(
              "tensor "
                  + t.name()
                  + ": "
                  + d.remaining()
                  + " bytes given for a slot of "
                  + slot.get("length"));
        }
        if (checkDigests) {
          sums.put(t.name(), sha256(d.duplicate()));
        }
        while (d.hasRemaining()) {
          off += ch.write(d, off);
        }
      }
    }
    return json(
        "POST",
        "/v1/writes/" + version + "/reservations/" + ans.get("id").asInt() + "/commit",
        commit);
  }

  /** {@code POST /v1/writes/{v}/seal}. */
  public Response seal(String version) throws IOException {
    return json("POST", "/v1/writes/" + version + "/seal", null);
  }

  /** {@code GET /v1/writes/{v}}. */
  public Response get(String version) throws IOException {
    return json("GET", "/v1/writes/" + version, null);
  }

  private static ObjectNode declarations(List<Tensor> tensors, Boolean upsert) {
    ObjectNode o = WriteJson.JSON.createObjectNode();
    if (upsert != null) {
      o.put("upsert", upsert);
    }
    ArrayNode arr = o.putArray("tensors");
    for (Tensor t : tensors) {
      ObjectNode d = arr.addObject().put("name", t.name()).put("dtype", t.dtype());
      ArrayNode s = d.putArray("shape");
      for (long x : t.shape()) {
        s.add(x);
      }
      if (t.parallelism() != null) {
        d.put("parallelism", t.parallelism());
      }
      if (t.writerPartition() != null) {
        d.put("writer_partition", t.writerPartition());
      }
    }
    return o;
  }

  private static void write(OutputStream o, ByteBuffer b) throws IOException {
    if (b.hasArray()) {
      o.write(b.array(), b.arrayOffset() + b.position(), b.remaining());
      b.position(b.limit());
      return;
    }
    byte[] chunk = new byte[64 * 1024];
    while (b.hasRemaining()) {
      int n = Math.min(chunk.length, b.remaining());
      b.get(chunk, 0, n);
      o.write(chunk, 0, n);
    }
  }

  private static String shape(long[] shape) {
    List<String> parts = new ArrayList<>();
    for (long d : shape) {
      parts.add(Long.toString(d));
    }
    return String.join(",", parts);
  }

  /** Percent-encodes every byte outside {@code A-Za-z0-9-._~} (so '/' and ':' too). */
  public static String encode(String s) {
    StringBuilder b = new StringBuilder();
    for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
      char c = (char) (x & 0xff);
      if ((c >= 'A' && c <= 'Z')
          || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')
          || "-._~".indexOf(c) >= 0) {
        b.append(c);
      } else {
        b.append('%').append(String.format("%02X", x & 0xff));
      }
    }
    return b.toString();
  }

  static String sha256(ByteBuffer b) {
    try {
      java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
      md.update(b);
      return java.util.HexFormat.of().formatHex(md.digest());
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
