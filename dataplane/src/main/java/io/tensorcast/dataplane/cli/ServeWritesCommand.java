package io.tensorcast.dataplane.cli;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.p2p.PeerSecret;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.write.WriteNode;
import io.tensorcast.dataplane.write.WriteNodeSettings;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code dataplane serve-writes}: the data-plane pod of an artifact that is written, not loaded. On
 * a writer node ({@code --writer}) it serves the put API on a unix socket under the store root; on
 * every node it follows the writers ({@code --writers}) and keeps each version sealed by all of
 * them as {@code --want} says, fetched peer to peer, replacing the previous one once complete.
 */
@Command(
    name = "serve-writes",
    mixinStandardHelpOptions = true,
    description =
        "Serve an artifact that processes on the nodes write: the put API on writer nodes, every"
            + " sealed version fetched peer to peer onto the reader nodes, saves to object"
            + " storage.")
final class ServeWritesCommand implements Callable<Integer> {
  @Mixin StoreArgs store;

  @Option(
      names = "--artifact-id",
      required = true,
      description = "The node's id in status and metrics.")
  String artifactId;

  @Option(
      names = "--listen",
      description = "HOST:PORT of the control endpoint (default $POD_IP:8471, else 0.0.0.0:8471).")
  String listen;

  @Option(
      names = "--admin-token-file",
      required = true,
      description =
          "File holding the admin bearer token of the control endpoint (PUT /v1/peers, POST"
              + " /v1/versions/{v}/save, and every read).")
  Path adminTokenFile;

  @Option(
      names = "--read-token-file",
      required = true,
      description =
          "File holding the read bearer token (GET /status, /v1/tensors, /v1/writes,"
              + " /v1/versions); also what this node presents to the writers' control endpoints,"
              + " so every node of the artifact holds the same one.")
  Path readTokenFile;

  @Option(
      names = "--peer-secret-file",
      required = true,
      description =
          "File holding the artifact's peer secret (base64 of >= 32 random bytes, e.g. `head -c 32"
              + " /dev/urandom | base64`, the same on every node): members prove it before any"
              + " piece moves, and writers tag their seal records with it.")
  Path peerSecretFile;

  @Option(names = "--writer", description = "Processes on this node write versions here.")
  boolean writer;

  @Option(
      names = "--write-token-file",
      description = "The write token the put API requires (writer nodes; a mounted Secret key).")
  Path writeTokenFile;

  @Option(
      names = "--write-listen",
      description =
          "HOST:PORT to serve the put API on over TCP as well as on its unix socket"
              + " (<store-root>/.writes/write.sock).")
  String writeListen;

  @Option(
      names = "--writers",
      required = true,
      description =
          "The artifact's writers: ID=HOST:PORT,... of their control endpoints, or their ids alone"
              + " (ID,...: reached at their peer-membership address on --writer-control-port).")
  String writers;

  @Option(
      names = "--writer-control-port",
      defaultValue = "8471",
      description = "Control port of writers named by id alone (default ${DEFAULT-VALUE}).")
  int writerControlPort;

  @Option(
      names = "--want",
      defaultValue = "all",
      description =
          "What this node keeps of each version: own (a writer's part), all (a full copy, can be"
              + " saved), or tp:RANKS/SIZE (e.g. tp:0/2: the shards of tp rank 0 of 2). Default"
              + " ${DEFAULT-VALUE} (writers: own).")
  String want;

  @Option(
      names = "--peer-listen",
      description = "HOST:PORT of the peer transport (default $POD_IP:8472, else 0.0.0.0:8472).")
  String peerListen;

  @Option(
      names = "--peer-id",
      description = "This member's id (default $POD_NAME, else host name).")
  String peerId;

  @Option(
      names = "--piece-size",
      defaultValue = "1Mi",
      description = "Piece size (default ${DEFAULT-VALUE}).")
  String pieceSize;

  @Option(
      names = "--peers",
      description = "Static membership ID=HOST:PORT,... of every member (else PUT /v1/peers).")
  String peers;

  @Option(names = "--peer-timeout", defaultValue = "10s", description = "Default ${DEFAULT-VALUE}.")
  String peerTimeout;

  @Option(
      names = "--follow-interval",
      defaultValue = "1s",
      description =
          "How often the writers are asked for new sealed versions (default ${DEFAULT-VALUE}).")
  String followInterval;

  @Option(
      names = "--retain",
      defaultValue = "2",
      description = "Versions kept (default ${DEFAULT-VALUE}).")
  int retain;

  @Option(
      names = "--max-versions",
      defaultValue = "8",
      description = "Most versions the put API holds at once (default ${DEFAULT-VALUE}).")
  int maxVersions;

  @Option(
      names = "--reservation-timeout",
      defaultValue = "10m",
      description =
          "A reservation not committed within this is dropped (default ${DEFAULT-VALUE}).")
  String reservationTimeout;

  @Option(
      names = "--kind",
      description =
          "The artifact's kind (spec.kind: ModelWeights, KVCache, RLCheckpoint): a version created"
              + " without a kind gets it, one of another kind is refused. Default: not bound"
              + " (ModelWeights when a version names none).")
  String kind;

  @Override
  public Integer call() throws Exception {
    WriteNode node = WriteNode.start(settings(System.getenv()));
    CountDownLatch closed = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  node.close();
                  closed.countDown();
                },
                "close-on-exit"));
    closed.await();
    return 0;
  }

  private static ControlToken token(Path file, String option) {
    try {
      return new ControlToken(file);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(option + ": " + e.getMessage(), e);
    }
  }

  WriteNodeSettings settings(Map<String, String> env) {
    String podIp = env.get("POD_IP");
    String host = podIp == null || podIp.isBlank() ? "0.0.0.0" : podIp;
    InetSocketAddress control =
        Membership.address(
            listen != null ? listen : host + ":" + ServeCommand.DEFAULT_PORT, "--listen");
    String id = peerId;
    if (id == null || id.isBlank()) {
      id = env.get("POD_NAME");
    }
    if (id == null || id.isBlank()) {
      id = env.get("HOSTNAME");
    }
    if (id == null || id.isBlank()) {
      throw new IllegalArgumentException("--peer-id not given and POD_NAME not set");
    }
    long piece = Quantities.bytes(pieceSize, "--piece-size");
    if (piece < 1 || piece > PieceMap.MAX_PIECE_SIZE) {
      throw new IllegalArgumentException(
          "--piece-size must be between 1 byte and 64Mi, got " + pieceSize);
    }
    PeerSecret secret;
    try {
      secret = PeerSecret.fromFile(peerSecretFile);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--peer-secret-file: " + e.getMessage(), e);
    }
    ControlAuth auth;
    try {
      auth =
          new ControlAuth(
              token(readTokenFile, "--read-token-file"),
              token(adminTokenFile, "--admin-token-file"));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "--read-token-file and --admin-token-file: " + e.getMessage(), e);
    }
    PeerSettings peer =
        new PeerSettings(
            id,
            Membership.address(
                peerListen != null ? peerListen : host + ":" + PeerSettings.DEFAULT_PORT,
                "--peer-listen"),
            (int) piece,
            peers == null || peers.isBlank() ? null : Membership.parseStatic(peers),
            java.time.Duration.ZERO,
            ServeCommand.duration(peerTimeout, "--peer-timeout"),
            PeerSettings.DEFAULT_MAX_IN_FLIGHT,
            secret);
    Map<String, String> w = new LinkedHashMap<>();
    for (String part : writers.split(",")) {
      int eq = part.indexOf('=');
      if (eq < 0 && !part.isBlank()) {
        w.put(part.strip(), ""); // resolved from the peer membership
        continue;
      }
      if (eq <= 0 || eq == part.length() - 1) {
        throw new IllegalArgumentException("--writers: '" + part + "' is not ID or ID=HOST:PORT");
      }
      Membership.address(part.substring(eq + 1).strip(), "--writers " + part.substring(0, eq));
      w.put(part.substring(0, eq).strip(), part.substring(eq + 1).strip());
    }
    String b = store.budget != null ? store.budget : env.get(StoreArgs.BUDGET_ENV);
    return new WriteNodeSettings(
        artifactId,
        control,
        auth,
        store.root,
        b == null || b.isBlank() ? 0 : Quantities.bytes(b, "--budget"),
        store.lockPolicy,
        writer,
        writeTokenFile,
        writeListen == null ? null : Membership.address(writeListen, "--write-listen"),
        peer,
        w,
        writerControlPort,
        WriteNodeSettings.Want.parse(writer ? "own" : want),
        ServeCommand.duration(followInterval, "--follow-interval"),
        retain,
        maxVersions,
        ServeCommand.duration(reservationTimeout, "--reservation-timeout"),
        kind,
        env::get);
  }
}
