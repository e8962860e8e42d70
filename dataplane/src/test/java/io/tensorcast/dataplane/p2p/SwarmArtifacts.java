package io.tensorcast.dataplane.p2p;

import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.IntPredicate;
import java.util.stream.Stream;

/**
 * The corpus artifacts the peer-to-peer ITs load, their upload to S3Mock, and the true and forged
 * pieces a rogue member announces and serves.
 */
final class SwarmArtifacts {

  /** The MNIST weights burn wrote (1.5 MB), under the corpus. */
  private static final String BURN_MNIST =
      "safetensors/burn__examples_import-model-weights_mnist.safetensors";

  /** The MNIST weights tinygrad wrote (0.4 MB), under the corpus. */
  private static final String TINYGRAD_MNIST = "safetensors/mnist-tinygrad__model.safetensors";

  private SwarmArtifacts() {}

  /**
   * Four safetensors files of different header sizes, a config and a tiny sharded checkpoint with
   * its index: 5.9 MB, key (path under the artifact's prefix) to corpus file.
   */
  static Map<String, Path> mixed() throws IOException {
    Path corpus = Corpus.dir();
    Map<String, Path> files = new TreeMap<>();
    files.put("a/mnist.safetensors", corpus.resolve(BURN_MNIST));
    files.put(
        "b/pokemon.safetensors",
        corpus.resolve("safetensors/pokemon-diffusers__pytorch_lora_weights.safetensors"));
    files.put(
        "c/peft.safetensors", corpus.resolve("safetensors/peft-gpt2__adapter_model.safetensors"));
    files.put(
        "d/mlx.safetensors",
        corpus.resolve("safetensors/mlx-examples__0000100_adapters.safetensors"));
    files.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    try (Stream<Path> shards = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      shards.forEach(p -> files.put("shards/" + p.getFileName(), p));
    }
    return files;
  }

  /**
   * Two small MNIST safetensors files, written by burn and by tinygrad: 1.9 MB, 31 pieces of 64
   * KiB; a new, mutable map so that a test can add files of its own.
   */
  static Map<String, Path> twoMnist() {
    Path corpus = Corpus.dir();
    Map<String, Path> files = new TreeMap<>();
    files.put("a/mnist.safetensors", corpus.resolve(BURN_MNIST));
    files.put("b/tinygrad.safetensors", corpus.resolve(TINYGRAD_MNIST));
    return files;
  }

  /**
   * Files with small safetensors headers (each member reads every header from the source, so a
   * bound on source bytes is about pieces): 4.3 MB, 70 pieces of 64 KiB.
   */
  static Map<String, Path> smallHeaders() {
    Path corpus = Corpus.dir();
    Map<String, Path> files = new TreeMap<>();
    files.put("a/mnist.safetensors", corpus.resolve(BURN_MNIST));
    files.put(
        "b/peft.safetensors", corpus.resolve("safetensors/peft-gpt2__adapter_model.safetensors"));
    files.put(
        "c/mlx.safetensors",
        corpus.resolve("safetensors/mlx-examples__0000100_adapters.safetensors"));
    files.put("d/tinygrad.safetensors", corpus.resolve(TINYGRAD_MNIST));
    files.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    return files;
  }

  /**
   * Creates {@code bucket} and puts every file under {@code prefix}; records each key's ETag in
   * {@code etags} when given.
   *
   * @return the artifact's size in bytes
   */
  static long upload(
      S3MockServer s3,
      String bucket,
      String prefix,
      Map<String, Path> files,
      Map<String, String> etags)
      throws IOException {
    s3.createBucket(bucket);
    long total = 0;
    for (Map.Entry<String, Path> e : files.entrySet()) {
      String etag = s3.putFile(bucket, prefix + e.getKey(), e.getValue());
      if (etags != null) {
        etags.put(e.getKey(), etag);
      }
      total += Files.size(e.getValue());
    }
    return total;
  }

  /** The bytes of piece {@code i} as the source holds them. */
  static byte[] truePiece(Map<String, Path> files, PieceMap map, int i) {
    PieceMap.Piece p = map.piece(i);
    try {
      byte[] all = Files.readAllBytes(files.get(p.path()));
      return Arrays.copyOfRange(all, (int) p.offset(), (int) p.offset() + p.length());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The true piece with every byte inverted: same length, other content. */
  static byte[] forgedPiece(Map<String, Path> files, PieceMap map, int i) {
    byte[] b = truePiece(files, map, i);
    for (int k = 0; k < b.length; k++) {
      b[k] = (byte) ~b[k];
    }
    return b;
  }

  /** The SHA-256 of each piece as announced: of the forged bytes where {@code forged} holds. */
  static byte[][] pieceHashes(Map<String, Path> files, PieceMap map, IntPredicate forged)
      throws NoSuchAlgorithmException {
    byte[][] out = new byte[map.size()][];
    for (PieceMap.Piece p : map.pieces()) {
      int i = p.index();
      byte[] bytes = forged.test(i) ? forgedPiece(files, map, i) : truePiece(files, map, i);
      out[i] = MessageDigest.getInstance("SHA-256").digest(bytes);
    }
    return out;
  }
}
