package io.tensorcast.dataplane.format.torch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Hostile and malformed checkpoints, written by the test: each must be refused with an error that
 * names the file and the rule broken, and nothing named in the file is ever run.
 */
class TorchHostileInputTest {
  private static final String FILE = "evil.pt";

  /** A zip checkpoint with {@code pickle} as data.pkl and one float32 storage "0" of n elements. */
  private static byte[] checkpoint(byte[] pickle, int storageElements) throws Exception {
    return PickleBytes.zip(
        "evil/data.pkl",
        pickle,
        "evil/byteorder",
        "little",
        "evil/data/0",
        new byte[storageElements * 4],
        "evil/version",
        "3\n");
  }

  private static TorchFormatException refusal(byte[] file) {
    return refusal(file, TorchLimits.DEFAULT);
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

  @ParameterizedTest
  @CsvSource({"os,system", "builtins,eval", "posix,system", "__builtin__,eval", "__main__,Foo"})
  void aForeignGlobalIsRefusedByName(String module, String name) throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .global(module, name)
            .str("touch /tmp/pwned")
            .op(0x85, 'R', '.')
            .bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.DISALLOWED_GLOBAL);
    assertThat(e.global()).contains(module + "." + name);
    assertThat(e).hasMessageContaining("global " + module + "." + name + " is not allowed");
  }

  @Test
  void stackGlobalIsCheckedLikeGlobal() throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .str("torch.nn.modules.linear")
            .str("Linear")
            .op(0x93, ')', 'R', '.')
            .bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.global()).contains("torch.nn.modules.linear.Linear");
  }

  @Test
  void reduceOnAnAllowedButNonCallableGlobalIsRefused() throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .global("torch", "FloatStorage")
            .integer(5)
            .op(0x85, 'R', '.')
            .bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.DISALLOWED_CALL);
    assertThat(e).hasMessageContaining("REDUCE calls torch.FloatStorage");
  }

  @Test
  void reduceOnAStringIsRefused() throws Exception {
    byte[] pickle = new PickleBytes().proto().str("os.system").op(')', 'R', '.').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.DISALLOWED_CALL);
    assertThat(e).hasMessageContaining("REDUCE on str");
  }

  @Test
  void buildOnATensorWithStateIsRefused() throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .tensor("0", 4, 0, new long[] {4}, new long[] {1})
            .op('}')
            .str("__class__")
            .str("x")
            .op('s', 'b', '.')
            .bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e.rule()).isEqualTo(TorchFormatException.DISALLOWED_CALL);
    assertThat(e).hasMessageContaining("BUILD (setstate) on tensor is not allowed");
  }

  @Test
  void quantizedTensorsAreRefusedAsUnsupported() throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .global("torch._utils", "_rebuild_qtensor")
            .op(')', 'R', '.')
            .bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.UNSUPPORTED_FEATURE);
    assertThat(e.global()).contains("torch._utils._rebuild_qtensor");
  }

  @Test
  void anOversizedStringLengthIsRefusedBeforeAllocating() throws Exception {
    byte[] pickle = new PickleBytes().proto().op('X').le4(0xFFFFFFF0).op('.').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageContaining(
            "BINUNICODE at evil/data.pkl byte 2 claims 4294967280 bytes; 1 remain");
  }

  @Test
  void anOversizedIntegerIsRefused() throws Exception {
    byte[] pickle = new PickleBytes().proto().op(0x8b).le4(1 << 30).op('.').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("LONG4").hasMessageContaining("1073741824 bytes");
  }

  @Test
  void aStorageKeyMissingFromTheArchiveIsRefused() throws Exception {
    byte[] pickle = PickleBytes.stateDict("7", 4, 0, new long[] {4}, new long[] {1});
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e.rule()).isEqualTo(TorchFormatException.MISSING_STORAGE);
    assertThat(e).hasMessageContaining("storage key \"7\" has no record evil/data/7");
  }

  @Test
  void aStorageWhoseRecordIsShorterThanItsElementCountIsRefused() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 1L << 40, 0, new long[] {4}, new long[] {1});
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e.rule()).isEqualTo(TorchFormatException.STORAGE_SIZE);
    assertThat(e)
        .hasMessageContaining(
            "declares 1099511627776 float32 elements but its record holds 16 bytes");
  }

  @Test
  void aNegativeSizeIsRefused() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 4, 0, new long[] {-2, 2}, new long[] {2, 1});
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_TENSOR);
    assertThat(e).hasMessageContaining("size -2 / stride 2 of dim 0 is negative");
  }

  @Test
  void aNegativeStrideIsRefused() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 4, 3, new long[] {4}, new long[] {-1});
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e).hasMessageContaining("size 4 / stride -1 of dim 0 is negative");
  }

  @Test
  void anOverflowingShapeIsRefused() throws Exception {
    long big = 1L << 62;
    byte[] pickle = PickleBytes.stateDict("0", 4, 0, new long[] {big, 8}, new long[] {1, 1});
    TorchFormatException e = refusal(checkpoint(pickle, 4));
    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_TENSOR);
    assertThat(e).hasMessageContaining("overflows 64 bits");
  }

  @Test
  void aViewReachingPastItsStorageIsRefused() throws Exception {
    // 2x3 at offset 1 with row stride 3 reaches element 1 + 3 + 2 = 6 of a 6-element storage.
    byte[] pickle = PickleBytes.stateDict("0", 6, 1, new long[] {2, 3}, new long[] {3, 1});
    TorchFormatException e = refusal(checkpoint(pickle, 6));
    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_TENSOR);
    assertThat(e)
        .hasMessageContaining("offset 1 reaches element 6, outside the storage's 6 elements");
  }

  @Test
  void aViewThatFitsIsRead() throws Exception {
    byte[] storage = new byte[6 * 4];
    ByteBuffer b = ByteBuffer.wrap(storage).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < 6; i++) {
      b.putFloat(i);
    }
    // The transpose of [[0,1,2],[3,4,5]]: shape 3x2, strides (1, 3).
    byte[] pickle = PickleBytes.stateDict("0", 6, 0, new long[] {3, 2}, new long[] {1, 3});
    byte[] file =
        PickleBytes.zip("p/data.pkl", pickle, "p/byteorder", "little", "p/data/0", storage);
    TorchCheckpoint c =
        TorchCheckpointReader.read("t.pt", ByteSource.of(file), TorchLimits.DEFAULT);
    TorchTensor t = c.tensor("w").orElseThrow();
    assertThat(t.isContiguous()).isFalse();
    ByteBuffer got =
        ByteBuffer.wrap(t.contiguousBytes(ByteSource.of(file))).order(ByteOrder.LITTLE_ENDIAN);
    float[] values = new float[6];
    for (int i = 0; i < 6; i++) {
      values[i] = got.getFloat();
    }
    assertThat(values).containsExactly(0f, 3f, 1f, 4f, 2f, 5f);
  }

  @Test
  void aBigEndianArchiveIsConvertedToLittleEndian() throws Exception {
    byte[] storage =
        ByteBuffer.allocate(8).order(ByteOrder.BIG_ENDIAN).putFloat(1.5f).putFloat(-2f).array();
    byte[] pickle = PickleBytes.stateDict("0", 2, 0, new long[] {2}, new long[] {1});
    byte[] file = PickleBytes.zip("p/data.pkl", pickle, "p/byteorder", "big", "p/data/0", storage);
    TorchCheckpoint c =
        TorchCheckpointReader.read("be.pt", ByteSource.of(file), TorchLimits.DEFAULT);
    assertThat(c.byteOrder()).isEqualTo(ByteOrder.BIG_ENDIAN);
    byte[] le = c.tensors().get(0).contiguousBytes(ByteSource.of(file));
    assertThat(le)
        .containsExactly(
            ByteBuffer.allocate(8)
                .order(ByteOrder.LITTLE_ENDIAN)
                .putFloat(1.5f)
                .putFloat(-2f)
                .array());
  }

  @Test
  void aMisalignedStorageIsRefusedWhenTheArchiveDeclaresAnAlignment() throws Exception {
    byte[] pickle = PickleBytes.stateDict("0", 1, 0, new long[] {1}, new long[] {1});
    byte[] file =
        PickleBytes.zip(
            "p/data.pkl", pickle, "p/.storage_alignment", "64", "p/data/0", new byte[4]);
    TorchFormatException e = refusal(file);
    assertThat(e.rule()).isEqualTo(TorchFormatException.INVALID_ARCHIVE);
    assertThat(e).hasMessageContaining("not a multiple of .storage_alignment 64");
  }

  @ParameterizedTest
  @CsvSource({"p/../../etc/passwd", "/p/data.pkl", "p\\..\\x"})
  void unsafeZipEntryNamesAreRefused(String name) throws Exception {
    byte[] pickle = new PickleBytes().proto().op('N', '.').bytes();
    TorchFormatException e = refusal(PickleBytes.zip("p/data.pkl", pickle, name, "x"));
    assertThat(e.rule()).isEqualTo(TorchFormatException.UNSAFE_ENTRY_NAME);
    // commons-compress reports a backslash as "/"; either way the name is refused.
    assertThat(e)
        .hasMessageContaining(
            "zip entry \"" + name.replace('\\', '/') + "\" is absolute or escapes");
  }

  @Test
  void aTorchScriptArchiveIsRefused() throws Exception {
    byte[] file =
        PickleBytes.zip(
            "m/data.pkl", new PickleBytes().proto().op('N', '.').bytes(), "m/constants.pkl", "");
    TorchFormatException e = refusal(file);
    assertThat(e.rule()).isEqualTo(TorchFormatException.TORCHSCRIPT);
    assertThat(e)
        .hasMessageContaining(
            "TorchScript archive (has \"m/constants.pkl\"); not a weights checkpoint");
  }

  @Test
  void deepNestingWithAShallowStackIsRefused() throws Exception {
    // L0 = []; memo; repeat: L_i+1 = []; L_i.append(L_i+1); keep only L_i+1 -> constant stack.
    PickleBytes p = new PickleBytes().proto().op(']', 'q', 0);
    for (int i = 1; i <= 300; i++) {
      p.op('j').le4(i - 1).op(']', 'r').le4(i).op('a', '0');
    }
    p.op('0', 'h', 0, '.');
    TorchFormatException e = refusal(checkpoint(p.bytes(), 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("object tree nested deeper than 200 levels");
  }

  @Test
  void aDeepStackIsRefused() throws Exception {
    PickleBytes p = new PickleBytes().proto();
    for (int i = 0; i < 100; i++) {
      p.op('(');
    }
    TorchLimits small = TorchLimits.DEFAULT.withMaxStackDepth(50);
    TorchFormatException e = refusal(checkpoint(p.op('N', '.').bytes(), 0), small);
    assertThat(e.rule()).isEqualTo(TorchFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("pickle stack deeper than 50 entries");
  }

  @Test
  void tooManyMemoEntriesAreRefused() throws Exception {
    PickleBytes p = new PickleBytes().proto().op('N');
    for (int i = 0; i < 20; i++) {
      p.op(0x94);
    }
    TorchLimits small = TorchLimits.DEFAULT.withMaxMemoEntries(10);
    TorchFormatException e = refusal(checkpoint(p.op('.').bytes(), 0), small);
    assertThat(e).hasMessageContaining("more than 10 memo entries");
  }

  @Test
  void aCycleIsRefused() throws Exception {
    // l = []; l.append(l)
    byte[] pickle = new PickleBytes().proto().op(']', 'q', 0, 'h', 0, 'a', '.').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e).hasMessageContaining("object tree contains itself");
  }

  @Test
  void aTruncatedPickleIsRefused() throws Exception {
    byte[] pickle = new PickleBytes().proto().op(']').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.MALFORMED_PICKLE);
    assertThat(e)
        .hasMessageContaining("pickle ends at evil/data.pkl byte 3 before its STOP opcode");
  }

  @Test
  void anOpcodeTorchNeverWritesIsRefused() throws Exception {
    byte[] pickle = new PickleBytes().proto().op('i').bytes();
    TorchFormatException e = refusal(checkpoint(pickle, 0));
    assertThat(e.rule()).isEqualTo(TorchFormatException.UNSUPPORTED_OPCODE);
    assertThat(e).hasMessageContaining("pickle opcode 0x69 (INST) at evil/data.pkl byte 2");
  }

  @Test
  void aFileThatIsNoCheckpointIsRefused() {
    TorchFormatException e = refusal("hello, world".getBytes());
    assertThat(e.rule()).isEqualTo(TorchFormatException.NOT_A_CHECKPOINT);
  }

  @Test
  void primitivesAndContainersRoundTrip() throws Exception {
    byte[] p2 =
        new PickleBytes()
            .proto()
            .op('}')
            .mark()
            .str("lr")
            .op('G', 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a)
            .str("steps")
            .op(']')
            .mark()
            .integer(1)
            .integer(-2)
            .op('e')
            .str("ok")
            .op(0x88)
            .op('u', '.')
            .bytes();
    TorchCheckpoint c =
        TorchCheckpointReader.read("p.pt", ByteSource.of(checkpoint(p2, 0)), TorchLimits.DEFAULT);
    assertThat(c.root()).isEqualTo(Map.of("lr", 0.1, "steps", List.of(1L, -2L), "ok", true));
    assertThat(c.tensors()).isEmpty();
  }
}
