package io.tensorcast.dataplane.format.safetensors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsWriterTest {

  @TempDir Path dir;

  private static TensorDeclaration decl(String name, Dtype dtype, long... shape) {
    return new TensorDeclaration(name, dtype, shape);
  }

  private static byte[] toBytes(
      List<TensorDeclaration> tensors, Map<String, String> metadata, List<ByteBuffer> data)
      throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (WritableByteChannel ch = Channels.newChannel(out)) {
      SafetensorsWriter.write(ch, tensors, metadata, data);
    }
    return out.toByteArray();
  }

  private static ByteBuffer pattern(long length, int seed) {
    ByteBuffer b = ByteBuffer.allocate((int) length);
    for (int i = 0; i < length; i++) {
      b.put((byte) (seed * 31 + i * 7));
    }
    return b.flip();
  }

  private static String headerText(byte[] file) {
    long n = ByteBuffer.wrap(file, 0, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
    return new String(file, 8, (int) n, StandardCharsets.UTF_8);
  }

  // Known answers from the reference's own unit tests (safetensors/src/tensor.rs:
  // test_serialization, test_serialization_forced_alignement, test_empty).

  @Test
  void referenceKnownAnswerOneF32Tensor() throws IOException {
    ByteBuffer data = ByteBuffer.allocate(24).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    for (float f : new float[] {0, 1, 2, 3, 4, 5}) {
      data.putFloat(f);
    }
    byte[] file = toBytes(List.of(decl("attn.0", Dtype.F32, 1, 2, 3)), null, List.of(data.flip()));
    assertThat(Arrays.copyOf(file, 8)).containsExactly(64, 0, 0, 0, 0, 0, 0, 0);
    assertThat(headerText(file))
        .isEqualTo("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}");
    assertThat(file).hasSize(8 + 64 + 24);
    assertThat(Arrays.copyOfRange(file, 72, 80)).containsExactly(0, 0, 0, 0, 0, 0, (byte) 128, 63);
  }

  @Test
  void referenceKnownAnswerPadsWithSpacesToEightBytes() throws IOException {
    byte[] file =
        toBytes(List.of(decl("attn0", Dtype.F32, 1, 1, 2, 3)), null, List.of(pattern(24, 1)));
    assertThat(Arrays.copyOf(file, 8)).containsExactly(72, 0, 0, 0, 0, 0, 0, 0);
    assertThat(headerText(file))
        .isEqualTo(
            "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}"
                + "       ");
  }

  @Test
  void referenceKnownAnswerEmptyFiles() throws IOException {
    byte[] empty = toBytes(List.of(), null, List.of());
    assertThat(empty)
        .containsExactly(8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' ');
    byte[] withMetadata = toBytes(List.of(), Map.of("framework", "pt"), List.of());
    assertThat(withMetadata[0]).isEqualTo((byte) 40);
    assertThat(headerText(withMetadata))
        .isEqualTo("{\"__metadata__\":{\"framework\":\"pt\"}}     ");
  }

  @Test
  void roundTripKeepsTensorsMetadataAndBytes() throws Exception {
    List<TensorDeclaration> decls =
        List.of(
            decl("embed", Dtype.BF16, 5, 3),
            decl("step", Dtype.I64),
            decl("empty", Dtype.F32, 0, 4),
            decl("packed", Dtype.F4, 2, 3),
            decl("scale", Dtype.F8_E8M0, 7),
            decl("mask", Dtype.BOOL, 3));
    Map<String, String> metadata = new LinkedHashMap<>();
    metadata.put("format", "pt");
    metadata.put("note", "quote \" backslash \\ tab \t é");
    List<ByteBuffer> data = new ArrayList<>();
    for (int i = 0; i < decls.size(); i++) {
      data.add(pattern(decls.get(i).byteLength(), i));
    }
    Path file = dir.resolve("rt.safetensors");
    SafetensorsHeader written = SafetensorsWriter.write(file, decls, metadata, data);

    SafetensorsHeader read = SafetensorsHeader.read(file);
    assertThat(read).isEqualTo(written);
    assertThat(read.headerLength() % 8).isZero();
    assertThat(read.fileSize()).isEqualTo(Files.size(file));
    assertThat(read.metadata()).containsExactlyEntriesOf(metadata);
    assertThat(read.tensors().stream().map(TensorInfo::declaration).toList()).isEqualTo(decls);
    byte[] bytes = Files.readAllBytes(file);
    for (int i = 0; i < decls.size(); i++) {
      TensorInfo t = read.tensor(decls.get(i).name()).orElseThrow();
      int from = (int) (read.dataOffset() + t.begin());
      assertThat(ByteBuffer.wrap(bytes, from, (int) t.byteLength()))
          .as(t.name())
          .isEqualTo(data.get(i));
    }
    // The caller's buffers are not consumed.
    assertThat(data.get(0).remaining()).isEqualTo(30);
    // headerBytes is exactly what precedes the data.
    byte[] head = SafetensorsWriter.headerBytes(decls, metadata);
    assertThat(head).hasSize((int) read.dataOffset()).isEqualTo(Arrays.copyOf(bytes, head.length));
    assertThat(SafetensorsWriter.layout(decls, metadata)).isEqualTo(read);
  }

  @Test
  void emptyMetadataIsWrittenAndNullIsOmitted() throws Exception {
    assertThat(headerText(toBytes(List.of(), Map.of(), List.of())))
        .startsWith("{\"__metadata__\":{}}");
    SafetensorsHeader none = SafetensorsWriter.layout(List.of(), null);
    assertThat(none.hasMetadata()).isFalse();
    assertThat(SafetensorsWriter.layout(List.of(), Map.of()).hasMetadata()).isTrue();
  }

  @Test
  void stringsAreEscapedLikeSerdeJson() throws Exception {
    String name = "a\"b\\c\u0001\u001f\n\u007f/é\u5c42\ud83d\ude00";
    byte[] file = toBytes(List.of(decl(name, Dtype.U8, 1)), null, List.of(pattern(1, 0)));
    // serde_json: \" \\ \n short forms, other controls as 6-char escapes with lowercase hex, DEL,
    // '/' and non-ASCII raw.
    assertThat(headerText(file))
        .startsWith("{\"a\\\"b\\\\c\\u0001\\u001f\\n\u007f/é\u5c42\ud83d\ude00\":");
    Path p = dir.resolve("esc.safetensors");
    Files.write(p, file);
    assertThat(SafetensorsHeader.read(p).tensor(name)).isPresent();
  }

  @Test
  void streamingWriterChecksEachTensorsByteCount() throws Exception {
    List<TensorDeclaration> decls = List.of(decl("a", Dtype.F32, 4), decl("b", Dtype.U8, 3));
    Path file = dir.resolve("short.safetensors");
    assertThatThrownBy(
            () ->
                SafetensorsWriter.write(
                    file,
                    decls,
                    null,
                    (t, out) -> out.write(pattern(t.name().equals("b") ? 2 : t.byteLength(), 0))))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("tensor \"b\"")
        .hasMessageContaining("supplied 2 bytes")
        .hasMessageContaining("takes 3");
    assertThat(file).as("partial file removed").doesNotExist();

    assertThatThrownBy(
            () ->
                SafetensorsWriter.write(
                    file, decls, null, (t, out) -> out.write(pattern(t.byteLength() + 1, 0))))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("tensor \"a\"")
        .hasMessageContaining("write 17 bytes")
        .hasMessageContaining("takes 16");
    assertThat(file).doesNotExist();
  }

  @Test
  void streamingWriterWritesInPiecesWithoutHoldingTheData() throws Exception {
    // 8 MiB tensor supplied in 64 KiB pieces.
    List<TensorDeclaration> decls =
        List.of(decl("big", Dtype.U8, 8 << 20), decl("tail", Dtype.I32, 3));
    Path file = dir.resolve("stream.safetensors");
    SafetensorsHeader h =
        SafetensorsWriter.write(
            file,
            decls,
            Map.of("format", "pt"),
            (t, out) -> {
              ByteBuffer piece = ByteBuffer.allocate(64 << 10);
              for (long done = 0; done < t.byteLength(); ) {
                piece.clear().limit((int) Math.min(piece.capacity(), t.byteLength() - done));
                while (piece.hasRemaining()) {
                  piece.put((byte) ((done + piece.position()) % 251));
                }
                done += out.write(piece.flip());
              }
            });
    assertThat(Files.size(file)).isEqualTo(h.fileSize());
    assertThat(SafetensorsHeader.read(file)).isEqualTo(h);
    try (FileChannel ch = FileChannel.open(file)) {
      ByteBuffer probe = ByteBuffer.allocate(1);
      ch.read(probe, h.dataOffset() + 1_000_003);
      assertThat(probe.get(0)).isEqualTo((byte) (1_000_003 % 251));
    }
  }

  @Test
  void bufferCountsAndSizesAreCheckedBeforeWriting() {
    Path file = dir.resolve("never.safetensors");
    List<TensorDeclaration> decls = List.of(decl("w", Dtype.F16, 2, 2));
    assertThatThrownBy(() -> SafetensorsWriter.write(file, decls, null, List.of(pattern(7, 0))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tensor \"w\"")
        .hasMessageContaining("holds 7 bytes")
        .hasMessageContaining("takes 8");
    assertThatThrownBy(() -> SafetensorsWriter.write(file, decls, null, List.of()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("1 tensors declared but 0 data buffers");
    assertThat(file).doesNotExist();
  }

  @Test
  void badDeclarationsAreRefused() {
    assertThatThrownBy(
            () ->
                SafetensorsWriter.layout(
                    List.of(decl("w", Dtype.U8, 1), decl("w", Dtype.U8, 2)), null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"w\" is declared twice");
    assertThatThrownBy(
            () -> SafetensorsWriter.layout(List.of(decl("__metadata__", Dtype.U8, 1)), null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("__metadata__");
    assertThatThrownBy(() -> decl("w", Dtype.F4, 3))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tensor \"w\"")
        .hasMessageContaining("12 bits");
    assertThatThrownBy(() -> decl("w", Dtype.U8, -1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("negative dimension");
    assertThatThrownBy(() -> decl("w", Dtype.F32, 1L << 62))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("overflows");
    assertThatThrownBy(
            () -> SafetensorsWriter.layout(List.of(decl("bad\ud800", Dtype.U8, 1)), null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unpaired surrogate");
  }

  @Test
  void referenceOrderIsDtypeDescendingThenName() {
    List<TensorDeclaration> decls =
        List.of(
            decl("b", Dtype.F32, 1),
            decl("z", Dtype.U8, 1),
            decl("a", Dtype.F32, 1),
            decl("step", Dtype.I64),
            decl("B", Dtype.F32, 1),
            decl("m", Dtype.BF16, 1),
            decl("\ud83d\ude00", Dtype.U8, 1),
            decl("\uffff", Dtype.U8, 1));
    assertThat(SafetensorsWriter.referenceOrder(decls))
        .extracting(TensorDeclaration::name)
        // Code point order, as Rust's str: U+FFFF sorts before U+1F600 (UTF-16 order would differ).
        .containsExactly("step", "B", "a", "b", "m", "z", "\uffff", "\ud83d\ude00");
  }
}
