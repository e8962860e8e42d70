package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.FaultInjectingProxy.RecordedRequest;
import io.tensorcast.testing.S3MockServer;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A peer-to-peer load under a sustained throttling storm: two {@code serve} members on loopback
 * load a corpus artifact from S3Mock, each through a {@link FaultInjectingProxy} of its own that
 * admits one request in three and answers the others {@code 429 SlowDown} with {@code Retry-After:
 * 1}, from the first request on. Every request a member makes to the source — listing, {@code
 * HEAD}s, header reads and the swarm's source reads of pieces — is paced by that member's one
 * throttling gate: after a refusal, no request of the member reaches the source until the server's
 * {@code Retry-After} has passed, a throttled source read uses up none of its attempts (so no load
 * fails and is loaded again, with only 2 attempts per read), and the swarm still reads the artifact
 * about once from the source.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class ThrottledSwarmIT {
  private static final String BUCKET = "p2p-throttled-it";
  private static final String PREFIX = "model/";
  private static final String ID = "throttled";
  private static final Duration READY = Duration.ofSeconds(150);
  private static final Duration RETRY_AFTER = Duration.ofSeconds(1);
  private static final byte[] SECRET = new SecureRandom().generateSeed(32);

  private static S3MockServer s3;
  private static final Map<String, Path> files = new TreeMap<>();
  private static long total;
  private static ServeMembers.Swarm swarm;

  private final ServeMembers members = new ServeMembers("throttled-it", files, READY);
  private final List<DataPlaneServer> servers = members.servers;

  @BeforeAll
  static void seed() throws Exception {
    swarm = ServeMembers.Swarm.write("throttled-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
    files.putAll(SwarmArtifacts.twoMnist());
    files.put("config.json", Corpus.dir().resolve("index/falcon-180b-chat/config.json"));
    s3 = S3MockServer.shared();
    total = SwarmArtifacts.upload(s3, BUCKET, PREFIX, files, null);
  }

  @BeforeEach
  void setUp() {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
  }

  @AfterEach
  void tearDown() throws Exception {
    members.close();
  }

  @Test
  void everySourceRequestOfAMemberWaitsOutTheRetryAfterOfItsLastRefusal() throws Exception {
    List<String> ids = List.of("m0", "m1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 221);
    String peers = peersSpec(addresses);
    List<FaultInjectingProxy> proxies = new ArrayList<>();
    for (String id : ids) {
      FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint()).admitOneIn(3, RETRY_AFTER);
      members.closeables.add(proxy);
      proxies.add(proxy);
      servers.add(
          ServeMembers.startInProcess(
              swarm
                  .member(proxy.endpoint(), members.newRoot(), id, addresses.get(id))
                  .option("--peers", peers)
                  .option("--peer-timeout", "30s")
                  .option("--range-size", "256Ki")
                  .option("--max-attempts", "2")
                  .args()));
    }

    members.awaitReady(servers);
    long wire = 0;
    for (DataPlaneServer s : servers) {
      DataPlaneStatus st = s.status();
      members.assertByteIdentical(st);
      wire += st.bytesFromSourceOnWire();
    }
    assertThat(wire)
        .as("bytes the swarm received from the source on the wire, S = %d", total)
        .isLessThanOrEqualTo((long) (1.05 * total));

    long dataRangesRefused = 0;
    for (int m = 0; m < ids.size(); m++) {
      FaultInjectingProxy proxy = proxies.get(m);
      List<RecordedRequest> refused = proxy.throttled();
      dataRangesRefused += refused.stream().filter(ThrottledSwarmIT::isPieceRead).count();
      assertThat(refused).as("requests of %s refused by the storm", ids.get(m)).isNotEmpty();
      // A request the member had sent before the refusal reached it may arrive just after; from
      // then on until Retry-After has passed, nothing.
      long from = TimeUnit.MILLISECONDS.toNanos(150);
      long to = RETRY_AFTER.toNanos() - TimeUnit.MILLISECONDS.toNanos(150);
      List<String> early = new ArrayList<>();
      for (RecordedRequest r : refused) {
        for (RecordedRequest q : proxy.requests()) {
          long after = q.receivedNanos() - r.receivedNanos();
          if (after > from && after < to) {
            early.add(
                String.format(
                    "%s %s %s %d ms after the refusal of %s %s %s",
                    q.method(),
                    q.path(),
                    q.range().orElse(""),
                    TimeUnit.NANOSECONDS.toMillis(after),
                    r.method(),
                    r.path(),
                    r.range().orElse("")));
          }
        }
      }
      assertThat(early)
          .as(
              "requests of %s that reached the source within the Retry-After of a refusal (of %d"
                  + " requests, %d refused)",
              ids.get(m), proxy.requests().size(), refused.size())
          .isEmpty();
      double loadRetries =
          PrometheusText.sample(
              members.get(servers.get(m).address().getPort(), "/metrics").body(),
              "tensorcast_dataplane_load_retries_total");
      assertThat(loadRetries)
          .as("loads of %s that failed and were loaded again", ids.get(m))
          .isZero();
    }
    assertThat(dataRangesRefused)
        .as("the swarm's source reads of pieces refused by the storm and read later")
        .isPositive();
  }

  /** A ranged GET of pieces: not a safetensors header's length prefix or JSON. */
  private static boolean isPieceRead(RecordedRequest r) {
    if (!r.method().equals("GET") || r.rangeStart().isEmpty() || r.rangeLength().isEmpty()) {
      return false;
    }
    long start = r.rangeStart().get();
    return !(start == 0 && r.rangeLength().get() == 8) && start != 8;
  }
}
