package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A unix socket under a directory whose path is longer than {@code sockaddr_un} holds. */
@Timeout(30)
class UnixSocketPathsTest {
  @TempDir Path tmp;

  @Test
  void bindsAndConnectsAtAPathOverTheKernelLimit() throws Exception {
    Path dir =
        tmp.resolve("n".repeat(60)).resolve("tensorcast." + "a".repeat(60)).resolve(".writes");
    Files.createDirectories(dir);
    Path socket = dir.resolve("write.sock");
    assertThat(UnixSocketPaths.fits(socket)).isFalse();

    try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      UnixSocketPaths.through(socket, p -> server.bind(UnixDomainSocketAddress.of(p)));
      assertThat(socket).exists();
      CompletableFuture<String> received =
          CompletableFuture.supplyAsync(
              () -> {
                try (SocketChannel c = server.accept()) {
                  ByteBuffer b = ByteBuffer.allocate(256);
                  while (b.position() < 4
                      || !new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII)
                          .contains("\r\n\r\n")) {
                    if (c.read(b) < 0) {
                      break;
                    }
                  }
                  c.write(
                      ByteBuffer.wrap(
                          "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
                              .getBytes(StandardCharsets.US_ASCII)));
                  return new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII);
                } catch (java.io.IOException e) {
                  throw new java.io.UncheckedIOException(e);
                }
              });
      try (WriteClient client = WriteClient.unix(socket, "token-0123456789")) {
        assertThat(client.request("GET", "/v1/writes", 0, o -> {}).status()).isEqualTo(204);
      }
      assertThat(received.get(10, TimeUnit.SECONDS)).startsWith("GET /v1/writes HTTP/1.1");
    }
    // The short link is gone; the socket file is where it was asked for.
    assertThat(socket).exists();
  }

  @Test
  void aShortPathIsUsedAsItIs() throws Exception {
    Path socket = tmp.resolve("w.sock");
    Path used = UnixSocketPaths.through(socket, p -> p);
    assertThat(used).isEqualTo(socket.toAbsolutePath());
  }
}
