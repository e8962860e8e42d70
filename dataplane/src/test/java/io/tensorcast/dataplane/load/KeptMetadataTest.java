package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.source.SourceFile;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A read of one file version's metadata still running when its load ended (the bytes failed while
 * the headers were read alongside) is waited for by the next load, not asked of the source again.
 */
class KeptMetadataTest {
  private static final SourceFile FILE =
      new SourceFile("a.safetensors", 10, "\"etag-1\"", Optional.empty());
  private static final PublishedDigest DIGEST =
      PublishedDigest.hex(
          PublishedDigest.Algorithm.SHA256,
          "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
          "test");

  @Test
  void aSecondLoadWaitsForTheReadInFlightInsteadOfAskingAgain() throws Exception {
    KeptMetadata kept = new KeptMetadata();
    AtomicInteger reads = new AtomicInteger();
    CountDownLatch inFlight = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    CompletableFuture<PublishedDigest> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return kept.digest(
                    FILE,
                    () -> {
                      reads.incrementAndGet();
                      inFlight.countDown();
                      try {
                        answer.await(10, TimeUnit.SECONDS);
                      } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                      }
                      return DIGEST;
                    });
              } catch (LoadFailure e) {
                throw new IllegalStateException(e);
              }
            });
    assertThat(inFlight.await(10, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<PublishedDigest> second =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return kept.digest(
                    FILE,
                    () -> {
                      reads.incrementAndGet();
                      return DIGEST;
                    });
              } catch (LoadFailure e) {
                throw new IllegalStateException(e);
              }
            });
    Thread.sleep(200); // the second caller is waiting, not reading
    assertThat(second).isNotDone();
    answer.countDown();
    assertThat(second.get(10, TimeUnit.SECONDS)).isEqualTo(DIGEST);
    assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo(DIGEST);
    assertThat(reads.get()).as("reads of the file's metadata").isEqualTo(1);
    assertThat(kept.digest(FILE, () -> null)).as("kept for later loads").isEqualTo(DIGEST);
  }

  @Test
  void aReadThatFailedIsNotKeptAndTheNextCallerReadsItself() throws Exception {
    KeptMetadata kept = new KeptMetadata();
    assertThatThrownBy(
            () ->
                kept.digest(
                    FILE,
                    () -> {
                      throw new LoadFailure(Reason.SourceUnavailable, "the origin answered 503");
                    }))
        .isInstanceOf(LoadFailure.class)
        .hasMessageContaining("503");
    assertThat(kept.digest(FILE, () -> DIGEST)).isEqualTo(DIGEST);
  }

  @Test
  void aFileWithoutAnEtagIsReadEveryTime() throws Exception {
    KeptMetadata kept = new KeptMetadata();
    SourceFile unversioned = new SourceFile("b.safetensors", 10, "", Optional.empty());
    AtomicInteger reads = new AtomicInteger();
    kept.digest(
        unversioned,
        () -> {
          reads.incrementAndGet();
          return DIGEST;
        });
    kept.digest(
        unversioned,
        () -> {
          reads.incrementAndGet();
          return DIGEST;
        });
    assertThat(reads.get()).isEqualTo(2);
  }
}
