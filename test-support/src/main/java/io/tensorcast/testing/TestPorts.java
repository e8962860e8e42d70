package io.tensorcast.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Ports for processes a test starts and that bind them later. {@code new ServerSocket(0)} hands out
 * a port of the kernel's ephemeral range (32768–60999 by default), which the kernel may give to any
 * client socket before the process binds it (the test's own HTTP clients included): the process
 * then fails with "Address already in use". These ports are chosen below that range, each at most
 * once per JVM.
 */
public final class TestPorts {
  private static final int FROM = 20_000;
  private static final int COUNT = 12_000;
  private static final Set<Integer> handedOut = new HashSet<>();

  private TestPorts() {}

  /** A port in 20000–31999 that binds now on every address and was not handed out before. */
  public static int freePort() throws IOException {
    return freePort(null);
  }

  /**
   * A port in 20000–31999 that binds now on {@code address} (every address when null) and was not
   * handed out before in this JVM.
   */
  public static synchronized int freePort(InetAddress address) throws IOException {
    for (int i = 0; i < 1_000; i++) {
      int port = FROM + ThreadLocalRandom.current().nextInt(COUNT);
      if (handedOut.contains(port)) {
        continue;
      }
      try (ServerSocket s = new ServerSocket(port, 1, address)) {
        handedOut.add(port);
        return port;
      } catch (IOException busy) {
        // taken: try another
      }
    }
    throw new IOException("no free port in " + FROM + "-" + (FROM + COUNT - 1));
  }
}
