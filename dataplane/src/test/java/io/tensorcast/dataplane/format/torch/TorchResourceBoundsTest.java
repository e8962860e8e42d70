package io.tensorcast.dataplane.format.torch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.Timeout.ThreadMode;

/**
 * Small checkpoints that would grow into very much more than they hold (memo reuse, zip entries
 * that inflate past what their directory declares, nesting that would exhaust the stack): each is
 * refused by a named bound, quickly. The timeouts run in a separate thread so that a reader that
 * does expand fails the test instead of hanging the build.
 */
@Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = ThreadMode.SEPARATE_THREAD)
class TorchResourceBoundsTest {
  private static final String FILE = "bomb.pt";

  static byte[] checkpoint(byte[] pickle, int storageElements) throws Exception {
    return PickleBytes.zip(
        "bomb/data.pkl",
        pickle,
        "bomb/byteorder",
        "little",
        "bomb/data/0",
        new byte[storageElements * 4],
        "bomb/version",
        "3\n");
  }

  private static TorchFormatException refusal(byte[] file, TorchLimits limits) {
    TorchFormatException e =
        catchThrowableOfType(
            () -> TorchCheckpointReader.read(FILE, ByteSource.of(file), limits),
            TorchFormatException.class);
    assertThat(e).as("refused").isNotNull();
    assertThat(e).hasMessageStartingWith(FILE + ": ");
    return e;
  }

  private static TorchFormatException refusal(byte[] file) {
    return refusal(file, TorchLimits.DEFAULT);
  }

  /**
   * {@code l0 = [tensor]; l(i+1) = [l(i), l(i)]}: {@code levels} lists, 2^levels paths to the one
   * tensor. About 8 bytes of pickle per level.
   */
  static byte[] doublingLists(int levels) {
    PickleBytes p = new PickleBytes().proto();
    p.tensor("0", 4, 0, new long[] {4}, new long[] {1}).put(0).op('0');
    for (int i = 1; i <= levels; i++) {
      p.mark().get(i - 1).get(i - 1).op('l').put(i).op('0');
    }
    return p.get(levels).stop().bytes();
  }

  @Test
  void memoReuseThatWouldListAMillionTensorsIsRefused() throws Exception {
    byte[] pickle = doublingLists(20);
    assertThat(pickle.length).isLessThan(1024);

    TorchFormatException e = refusal(checkpoint(pickle, 4));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageContaining("is reached by more than 16 paths")
        .hasMessageContaining("--max-reuse");
  }

  @Test
  void memoReuseOfDictsIsRefusedBeforeTheNamesGrow() throws Exception {
    // d0 = {"w": tensor}; d(i+1) = {"a": d(i), "b": d(i)}: 2^60 names of length 120.
    PickleBytes p = new PickleBytes().proto().op('}').str("w");
    p.tensor("0", 4, 0, new long[] {4}, new long[] {1}).op('s').put(0).op('0');
    for (int i = 1; i <= 60; i++) {
      p.op('}').mark().str("a").get(i - 1).str("b").get(i - 1).op('u').put(i).op('0');
    }
    byte[] pickle = p.get(60).stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 4));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("is reached by more than 16 paths");
  }

  @Test
  void aSharedTensorUpToTheBoundIsListedOncePerPath() throws Exception {
    // {"a": t, "b": t}: tied weights; both names are listed, sharing one storage.
    PickleBytes p = new PickleBytes().proto().op('}').mark().str("a");
    p.tensor("0", 4, 0, new long[] {4}, new long[] {1}).put(0).str("b").get(0).op('u');
    byte[] file = checkpoint(p.stop().bytes(), 4);

    TorchCheckpoint c = TorchCheckpointReader.read(FILE, ByteSource.of(file), TorchLimits.DEFAULT);

    assertThat(c.tensors()).extracting(TorchTensor::name).containsExactly("a", "b");
    assertThat(c.storages()).hasSize(1);
  }

  @Test
  void manyTensorsOverOneSmallStorageAreRefusedByTheirTotalSize() throws Exception {
    // 40 distinct tensors, each the whole 1024-element storage: 40 × 4 KiB listed over 4 KiB.
    PickleBytes p = new PickleBytes().proto().op(']').mark();
    p.global("torch._utils", "_rebuild_tensor_v2").put(0).op('0');
    p.mark()
        .mark()
        .str("storage")
        .global("torch", "FloatStorage")
        .str("0")
        .str("cpu")
        .integer(1024)
        .tuple()
        .op('Q')
        .integer(0)
        .ints(1024)
        .ints(1)
        .op(0x89)
        .global("collections", "OrderedDict")
        .op(')', 'R')
        .tuple()
        .put(1)
        .op('0');
    for (int i = 0; i < 40; i++) {
      p.get(0).get(1).op('R');
    }
    byte[] pickle = p.op('e').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 1024));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageContaining("40 tensors listed hold 163840 bytes")
        .hasMessageContaining("more than 16 × the 4096 bytes of its storages");
  }

  @Test
  void moreTensorsThanTheLimitAreRefused() throws Exception {
    PickleBytes p = new PickleBytes().proto().op(']').mark();
    for (int i = 0; i < 11; i++) {
      p.tensor("0", 4, 0, new long[] {4}, new long[] {1});
    }
    byte[] pickle = p.op('e').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 4), TorchLimits.DEFAULT.withMaxTensors(10));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("more than 10 tensors (--max-tensors)");
  }

  @Test
  void morePickleObjectsThanTheLimitAreRefused() throws Exception {
    PickleBytes p = new PickleBytes().proto().op(']').mark();
    for (int i = 0; i < 100; i++) {
      p.integer(i);
    }
    byte[] pickle = p.op('e').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 0), TorchLimits.DEFAULT.withMaxObjects(50));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("more than 50 objects (--max-pickle-objects)");
  }

  @Test
  void aDictKeyThatDoublesThroughTheMemoIsRefused() throws Exception {
    // t0 = ("x",); t(i+1) = (t(i), t(i)); {t(24): None} would hash 2^24 values.
    PickleBytes p = new PickleBytes().proto().str("x").op(0x85).put(0).op('0');
    for (int i = 1; i <= 24; i++) {
      p.get(i - 1).get(i - 1).op(0x86).put(i).op('0');
    }
    byte[] pickle = p.op('}').get(24).op('N', 's').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 0));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("dict key or set item holds more than 4096 values");
  }

  @Test
  void aCyclicPersistentIdIsRefusedWithABoundedMessage() throws Exception {
    // l = []; pid = ("storage", l, "0", "cpu", 4, None); l.append(pid); load(pid)
    byte[] pickle =
        new PickleBytes()
            .proto()
            .op(']')
            .put(0)
            .mark()
            .str("storage")
            .get(0)
            .str("0")
            .str("cpu")
            .integer(4)
            .op('N')
            .tuple()
            .put(1)
            .op('a', '0')
            .get(1)
            .op('Q')
            .stop()
            .bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 4));

    assertThat(e.rule()).isEqualTo(TorchFormatException.MALFORMED_PICKLE);
    assertThat(e)
        .hasMessageContaining("persistent id ('storage', [(...)], '0', 'cpu', 4, None)")
        .hasMessageContaining("is not ('storage', type, key, location, numel)");
    assertThat(e.getMessage()).hasSizeLessThan(600);
  }

  @Test
  void aDeeplyNestedPersistentIdIsRefusedWithABoundedMessage() throws Exception {
    // l0 = []; l(i+1) = [l(i)] for 200,000 levels, kept shallow on the stack through the memo.
    PickleBytes p = new PickleBytes().proto().op(']').put(0).op('0');
    for (int i = 1; i <= 200_000; i++) {
      p.op(']').put(1).get(0).op('a', '0').get(1).put(0).op('0');
    }
    p.mark().str("storage").get(0).str("0").str("cpu").integer(4).op('N').tuple().op('Q');
    byte[] pickle = p.stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 4));

    assertThat(e.rule()).isEqualTo(TorchFormatException.MALFORMED_PICKLE);
    assertThat(e).hasMessageContaining("persistent id ('storage', [[[[...]]]], '0'");
  }

  @Test
  void nestedRebuildFromTypeCallsAreRefusedAtTheNestingLimit() throws Exception {
    // a(0) = (); a(i+1) = (_rebuild_from_type_v2, Tensor, a(i), {}); _rebuild_from_type_v2(*a(N))
    PickleBytes p = new PickleBytes().proto();
    p.global("torch._tensor", "_rebuild_from_type_v2").put(0).op('0');
    p.global("torch", "Tensor").put(1).op('0');
    p.op(')').put(2).op('0');
    int levels = 100_000;
    for (int i = 1; i <= levels; i++) {
      p.mark().get(0).get(1).get(i + 1).op('}').tuple().put(i + 2).op('0');
    }
    byte[] pickle = p.get(0).get(levels + 2).op('R').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 0));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("_rebuild_from_type_v2 nested deeper than 200 calls");
  }

  @Test
  void keysThatFlattenToTheSameNameAreRefused() throws Exception {
    // {"a.b": t1, "a": {"b": t2}}: both would be named "a.b".
    PickleBytes p = new PickleBytes().proto().op('}').mark().str("a.b");
    p.tensor("0", 4, 0, new long[] {2}, new long[] {1});
    p.str("a").op('}').str("b").tensor("0", 4, 2, new long[] {2}, new long[] {1}).op('s');
    byte[] pickle = p.op('u').stop().bytes();

    TorchFormatException e = refusal(checkpoint(pickle, 4));

    assertThat(e.rule()).isEqualTo(TorchFormatException.DUPLICATE_TENSOR_NAME);
    assertThat(e)
        .hasMessageContaining(
            "the tensors at ['a.b'] and ['a']['b'] are both named \"a.b\" once keys are joined"
                + " with '.'");
  }

  // ------------------------------------------------------------------------------ zip

  /** 64 MiB of zeros that deflate to about 64 KiB, declared in the directory as 2 bytes. */
  @Test
  void aPickleThatInflatesPastItsDeclaredSizeIsRefusedAtThatSize() throws Exception {
    byte[] zip =
        PickleBytes.zipDeflating(
            Set.of("bomb/data.pkl"), "bomb/data.pkl", new byte[64 << 20], "bomb/version", "3\n");
    byte[] bomb = PickleBytes.withDeclaredSize(zip, "bomb/data.pkl", 2);

    TorchFormatException e = refusal(bomb);

    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_ARCHIVE);
    assertThat(e)
        .hasMessageContaining(
            "bomb/data.pkl inflates to more than the 2 bytes its central directory record"
                + " declares");
  }

  @Test
  void aPickleWhoseDeclaredRatioIsOverTheLimitIsRefusedBeforeInflating() throws Exception {
    byte[] zip =
        PickleBytes.zipDeflating(
            Set.of("bomb/data.pkl"), "bomb/data.pkl", new byte[8 << 20], "bomb/version", "3\n");

    TorchFormatException e = refusal(zip);

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageMatching(
            "(?s).*bomb/data\\.pkl declares 8388608 bytes inflated from \\d+ compressed: a ratio"
                + " of \\d+:1, over the limit of 100:1 \\(--max-zip-ratio\\).*");
  }

  @Test
  void aCompressedPickleWithinTheBoundsIsRead() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 4, 0, new long[] {4}, new long[] {1});
    byte[] zip =
        PickleBytes.zipDeflating(
            Set.of("p/data.pkl"), "p/data.pkl", pickle, "p/data/0", new byte[16], "p/version", "3");

    TorchCheckpoint c = TorchCheckpointReader.read(FILE, ByteSource.of(zip), TorchLimits.DEFAULT);

    assertThat(c.tensor("w")).isPresent();
  }

  /** Found by the format fuzzer: a corrupt deflate stream escaped as an I/O error. */
  @Test
  void aCompressedPickleWithCorruptDataIsRefusedAsAnInvalidArchive() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 4, 0, new long[] {4}, new long[] {1});
    byte[] zip =
        PickleBytes.zipDeflating(
            Set.of("p/data.pkl"), "p/data.pkl", pickle, "p/data/0", new byte[16], "p/version", "3");
    // The deflate stream starts right after the first local header (30 bytes + the name).
    int data = 30 + "p/data.pkl".length();
    for (int i = data; i < data + 6; i++) {
      zip[i] = (byte) 0xff;
    }

    TorchFormatException e = refusal(zip);

    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_ARCHIVE);
    assertThat(e).hasMessageContaining("p/data.pkl: its compressed data is corrupt after 0 bytes");
  }

  @Test
  void moreZipEntriesThanTheLimitAreRefusedBeforeTheDirectoryIsRead() throws Exception {
    Object[] entries = new Object[2 * 30];
    entries[0] = "p/data.pkl";
    entries[1] = new PickleBytes().proto().op('N').stop().bytes();
    for (int i = 1; i < 30; i++) {
      entries[2 * i] = "p/extra/" + i;
      entries[2 * i + 1] = "x";
    }
    byte[] zip = PickleBytes.zip(entries);

    TorchFormatException e = refusal(zip, TorchLimits.DEFAULT.withMaxZipEntries(20));

    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageContaining(
            "zip central directory holds more than 20 entries (--max-zip-entries)");
  }

  @Test
  void anEntryWithACompressionMethodTorchDoesNotUseIsRefused() throws Exception {
    byte[] pickle = new PickleBytes().proto().op('N').stop().bytes();
    byte[] zip = PickleBytes.zip("p/data.pkl", pickle);
    // Patch the method of the central directory record and the local header to 12 (bzip2).
    java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(zip).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    for (int at = 0; at + 4 <= zip.length; at++) {
      if (b.getInt(at) == 0x02014b50) {
        b.putShort(at + 10, (short) 12);
      } else if (b.getInt(at) == 0x04034b50) {
        b.putShort(at + 8, (short) 12);
      }
    }

    TorchFormatException e = refusal(zip);

    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_ARCHIVE);
    assertThat(e).hasMessageContaining("p/data.pkl uses compression method 12");
  }
}
