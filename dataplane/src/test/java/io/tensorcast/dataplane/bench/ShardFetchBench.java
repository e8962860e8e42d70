package io.tensorcast.dataplane.bench;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.shards.BuiltinRules;
import io.tensorcast.dataplane.shards.FetchPlanner;
import io.tensorcast.dataplane.shards.Parallelism;
import io.tensorcast.dataplane.shards.ShardSetLoader;
import io.tensorcast.dataplane.shards.ShardSetPlan;
import io.tensorcast.dataplane.shards.ShardSettings;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.StoredFiles;
import io.tensorcast.dataplane.tensor.StoredTensor;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * TP=4 on one node: a TensorShardSet's ranked reads against loading the whole ModelArtifact and
 * slicing it on the node, same S3-compatible server, same run, rounds back to back; plus one rank
 * of four alone (what a node holding one rank reads) under the cost model's defaults and with no
 * request latency (one read per row). Prints bytes from the source, seconds and amplification. Not
 * a test: run by {@code bench/shard-fetch.sh}.
 */
public final class ShardFetchBench {
  static final int HIDDEN = 1024;
  static final int INTER = 2816;
  static final int VOCAB = 16384;
  static final int LAYERS = 8;

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
    Path work = Files.createTempDirectory("shard-fetch-bench");
    Path model = work.resolve("model");
    long size = writeModel(model);
    Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "shard-fetch-bench");
    try (S3MockServer s3 = S3MockServer.start()) {
      s3.createBucket("bench");
      try (var files = Files.list(model)) {
        for (Path p : files.sorted().toList()) {
          s3.putFile("bench", "llama/" + p.getFileName(), p);
        }
      }
      String uri = "s3://bench/llama/";
      System.out.printf(
          Locale.ROOT,
          "model: Llama-shaped, %d layers, hidden %d, intermediate %d, vocab %d, BF16, %d bytes"
              + " (%.1f MiB) in 2 safetensors files; S3Mock in its own JVM; 2 CPUs%n",
          LAYERS,
          HIDDEN,
          INTER,
          VOCAB,
          size,
          size / 1048576.0);
      System.out.println(
          "| round | case | bytes from source | / model size | seconds | amplification | requests |");
      System.out.println("|---:|---|---:|---:|---:|---:|---:|");
      Parallelism tp4 = new Parallelism(1, 1, 1, 4);
      for (int round = 1; round <= rounds; round++) {
        // (a) whole artifact, then slice all four ranks on the node
        Path rootA = shm.resolve("a" + round);
        long t0 = System.nanoTime();
        long fromSource;
        try (ArtifactSource src = Sources.open(uri, S3Options.direct(s3).build());
            PinnedStore store = new PinnedStore(rootA, 2L << 30, LockPolicy.BEST_EFFORT)) {
          ArtifactLoader loader =
              new ArtifactLoader(
                  src,
                  store,
                  new ArtifactLoader.Options("full", 0, ReadOptions.DEFAULTS),
                  new LoadMetrics(new SimpleMeterRegistry()));
          DataPlaneStatus s = loader.load();
          fromSource = s.bytesFromSource();
          StoredArtifact a = store.get("full").orElseThrow();
          sliceAll(a, tp4);
          store.unload("full");
        }
        double secondsA = (System.nanoTime() - t0) / 1e9;
        row(round, "whole artifact, then slice 4 ranks", fromSource, size, secondsA, -1, -1);
        // (b) TensorShardSet, ranks 0..3 on one node
        shard(
            uri,
            s3,
            shm.resolve("b" + round),
            tp4,
            List.of(0, 1, 2, 3),
            FetchPlanner.Costs.DEFAULTS,
            round,
            "TensorShardSet TP=4, ranks 0-3 on the node",
            size);
        // (c) one rank of four, defaults and one read per row
        shard(
            uri,
            s3,
            shm.resolve("c" + round),
            tp4,
            List.of(0),
            FetchPlanner.Costs.DEFAULTS,
            round,
            "TensorShardSet TP=4, rank 0 alone (defaults)",
            size);
        shard(
            uri,
            s3,
            shm.resolve("d" + round),
            tp4,
            List.of(0),
            new FetchPlanner.Costs(Duration.ZERO, 200_000_000L, 8 << 20),
            round,
            "TensorShardSet TP=4, rank 0 alone (latency 0: a read per row)",
            size);
      }
    } finally {
      TestFiles.deleteTree(shm);
      TestFiles.deleteTree(work);
    }
  }

  static void shard(
      String uri,
      S3MockServer s3,
      Path root,
      Parallelism p,
      List<Integer> ranks,
      FetchPlanner.Costs costs,
      int round,
      String label,
      long size)
      throws Exception {
    long t0 = System.nanoTime();
    DataPlaneStatus s;
    try (ArtifactSource src = Sources.open(uri, S3Options.direct(s3).build());
        PinnedStore store = new PinnedStore(root, 2L << 30, LockPolicy.BEST_EFFORT)) {
      s =
          new ShardSetLoader(
                  src,
                  store,
                  "tss",
                  0,
                  ReadOptions.DEFAULTS,
                  new ShardSettings(p, ranks, List.of(), costs, List.of(), null, Duration.ZERO),
                  List::of)
              .load();
      store.unload("tss");
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    long needed = s.shards().ranks().stream().mapToLong(ShardReport.Rank::bytesNeeded).sum();
    long requests = s.shards().ranks().stream().mapToLong(ShardReport.Rank::requests).sum();
    long fromSource = s.bytesFromSource() + s.shards().metadataBytes();
    row(round, label, fromSource, size, seconds, (double) s.bytesFromSource() / needed, requests);
  }

  static void row(int round, String label, long bytes, long size, double s, double amp, long req) {
    System.out.printf(
        Locale.ROOT,
        "| %d | %s | %d | %.3f | %.2f | %s | %s |%n",
        round,
        label,
        bytes,
        (double) bytes / size,
        s,
        amp < 0 ? "-" : String.format(Locale.ROOT, "%.3f", amp),
        req < 0 ? "-" : Long.toString(req));
  }

  /** Slices every rank from the stored copy into heap buffers (what a node would do). */
  static void sliceAll(StoredArtifact a, Parallelism p) throws Exception {
    List<StoredTensor> tensors = new ArrayList<>();
    for (String f :
        List.of("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")) {
      byte[] prefix = new byte[8];
      a.read(f, 0, ByteBuffer.wrap(prefix));
      long n = ByteBuffer.wrap(prefix).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
      byte[] json = new byte[(int) n];
      a.read(f, 8, ByteBuffer.wrap(json));
      long fileSize =
          a.files().stream().filter(x -> x.path().equals(f)).findFirst().orElseThrow().size();
      SafetensorsHeader h = SafetensorsHeader.parse(f, fileSize, json);
      for (TensorInfo t : h.tensors()) {
        tensors.add(
            new StoredTensor(
                t.name(),
                t.dtype(),
                t.shape(),
                null,
                List.of(
                    new StoredTensor.Piece(
                        f, h.dataOffset() + t.begin(), new long[t.shape().length], t.shape()))));
      }
    }
    ShardSetPlan plan =
        ShardSetPlan.plan(
            tensors, BuiltinRules.forArchitectures(List.of("LlamaForCausalLM")).orElseThrow(), p);
    StoredFiles src = (file, offset, dst) -> a.read(file, offset, dst);
    for (int r = 0; r < p.worldSize(); r++) {
      ShardSetPlan.RankFile f = plan.rankFile(r);
      ByteBuffer out = ByteBuffer.allocate((int) f.fileBytes());
      for (ShardSetPlan.Need n : plan.needs(r)) {
        src.read(
            n.sourceFile(),
            n.sourceOffset(),
            out.duplicate()
                .position((int) n.fileOffset())
                .limit((int) (n.fileOffset() + n.length())));
      }
    }
  }

  static long writeModel(Path dir) throws Exception {
    Files.createDirectories(dir);
    Map<String, long[]> shapes = new LinkedHashMap<>();
    shapes.put("model.embed_tokens.weight", new long[] {VOCAB, HIDDEN});
    for (int l = 0; l < LAYERS; l++) {
      String p = "model.layers." + l + ".";
      shapes.put(p + "input_layernorm.weight", new long[] {HIDDEN});
      shapes.put(p + "post_attention_layernorm.weight", new long[] {HIDDEN});
      for (String x : List.of("q", "k", "v", "o")) {
        shapes.put(p + "self_attn." + x + "_proj.weight", new long[] {HIDDEN, HIDDEN});
      }
      shapes.put(p + "mlp.gate_proj.weight", new long[] {INTER, HIDDEN});
      shapes.put(p + "mlp.up_proj.weight", new long[] {INTER, HIDDEN});
      shapes.put(p + "mlp.down_proj.weight", new long[] {HIDDEN, INTER});
    }
    shapes.put("model.norm.weight", new long[] {HIDDEN});
    shapes.put("lm_head.weight", new long[] {VOCAB, HIDDEN});
    List<String> names = new ArrayList<>(shapes.keySet());
    long total = 0;
    for (int f = 0; f < 2; f++) {
      List<TensorDeclaration> decls = new ArrayList<>();
      List<ByteBuffer> data = new ArrayList<>();
      for (int i = f * names.size() / 2; i < (f + 1) * names.size() / 2; i++) {
        TensorDeclaration d =
            new TensorDeclaration(names.get(i), Dtype.BF16, shapes.get(names.get(i)));
        decls.add(d);
        byte[] b = new byte[(int) d.byteLength()];
        java.util.concurrent.ThreadLocalRandom.current().nextBytes(b);
        data.add(ByteBuffer.wrap(b));
      }
      Path p = dir.resolve(String.format("model-%05d-of-00002.safetensors", f + 1));
      SafetensorsWriter.write(p, decls, Map.of("format", "pt"), data);
      total += Files.size(p);
    }
    Files.writeString(
        dir.resolve("config.json"),
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": " + HIDDEN + "}",
        StandardCharsets.UTF_8);
    return total + Files.size(dir.resolve("config.json"));
  }
}
