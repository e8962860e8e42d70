package io.tensorcast.dataplane.bench;

import java.util.Collection;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * Runs the parallel tensor IO benchmarks (JMH, few forks/iterations so the run takes a few minutes
 * on 2 cores) and prints one table: header parse of 100k tensors, range planning per plan on the
 * 70B layout, reconstruction throughput against a plain memory copy measured in the same run, as a
 * ratio. Not a test; nothing asserts on time. See bench/README.md.
 *
 * <p>Arguments: {@code [forks] [warmupIterations] [measurementIterations]} (defaults 1 2 3, one
 * second each).
 */
public final class TensorIoBench {

  private TensorIoBench() {}

  public static void main(String[] args) throws Exception {
    int forks = args.length > 0 ? Integer.parseInt(args[0]) : 1;
    int warmups = args.length > 1 ? Integer.parseInt(args[1]) : 2;
    int iterations = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    String corpus = RangePlanBenchmark.corpus().toString();
    String loadBefore = loadAverage();
    ChainedOptionsBuilder opts =
        new OptionsBuilder()
            .include(HeaderParseBenchmark.class.getName())
            .include(RangePlanBenchmark.class.getName())
            .include(ReconstructBenchmark.class.getName())
            .mode(Mode.AverageTime)
            .timeUnit(TimeUnit.MICROSECONDS)
            .forks(forks)
            .warmupIterations(warmups)
            .warmupTime(TimeValue.seconds(1))
            .measurementIterations(iterations)
            .measurementTime(TimeValue.seconds(1))
            .jvmArgsAppend(
                "-Xms1g", "-Xmx2g", "-XX:MaxDirectMemorySize=1g", "-Dtensorcast.corpus=" + corpus);
    Collection<RunResult> results = new Runner(opts.build()).run();

    Map<String, double[]> byName = new TreeMap<>();
    for (RunResult r : results) {
      String method = r.getParams().getBenchmark().replaceFirst(".*\\.", "");
      String param = r.getParams().getParam("splitDim");
      String key = method + (param == null ? "" : "[splitDim=" + param + "]");
      byName.put(
          key,
          new double[] {r.getPrimaryResult().getScore(), r.getPrimaryResult().getScoreError()});
    }
    System.out.println();
    System.out.println(
        "Parallel tensor IO benchmarks (JMH "
            + forks
            + " fork(s), "
            + warmups
            + "x1s warm-up, "
            + iterations
            + "x1s measurement; ± is JMH's 99.9% error)");
    System.out.println(
        "cores: "
            + Runtime.getRuntime().availableProcessors()
            + "; load average before: "
            + loadBefore
            + ", after: "
            + loadAverage()
            + " (other processes share the machine)");
    System.out.printf(Locale.ROOT, "%-44s %16s  %s%n", "benchmark", "time/op", "derived");
    line(byName, "parse", "100k-tensor header", v -> "");
    line(byName, "planTp4Exact", "per plan, 70B TP=4 -> TP=4 (exact)", v -> "");
    line(
        byName,
        "planTp8FromTp4",
        "per plan, 70B TP=4 -> TP=8",
        v ->
            String.format(
                Locale.ROOT,
                "whole model (8 ranks): %.1f ms",
                v * 8 * RangePlanBenchmark.TENSORS / 1000));
    for (String dim : new String[] {"0", "1"}) {
      double[] rec = byName.get("reconstructFull[splitDim=" + dim + "]");
      double[] cpy = byName.get("memoryCopy[splitDim=" + dim + "]");
      if (rec == null || cpy == null) {
        continue;
      }
      double recGbs = ReconstructBenchmark.BYTES / (rec[0] * 1e3);
      double cpyGbs = ReconstructBenchmark.BYTES / (cpy[0] * 1e3);
      System.out.printf(
          Locale.ROOT,
          "%-44s %10.1f ± %4.1f us  %.2f GB/s%n",
          "reconstruct 64 MiB from 4 shards, dim " + dim,
          rec[0],
          rec[1],
          recGbs);
      System.out.printf(
          Locale.ROOT,
          "%-44s %10.1f ± %4.1f us  %.2f GB/s%n",
          "memory copy 64 MiB (same run)",
          cpy[0],
          cpy[1],
          cpyGbs);
      System.out.printf(
          Locale.ROOT,
          "%-44s %16s  %.2f%n",
          "  ratio reconstruct / memory copy",
          "",
          recGbs / cpyGbs);
    }
  }

  private static String loadAverage() {
    try {
      String[] f =
          java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).split(" ");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (java.io.IOException | RuntimeException e) {
      return "unknown";
    }
  }

  private static void line(
      Map<String, double[]> byName,
      String key,
      String label,
      java.util.function.DoubleFunction<String> derived) {
    double[] v = byName.get(key);
    if (v != null) {
      System.out.printf(
          Locale.ROOT, "%-44s %10.2f ± %4.2f us  %s%n", label, v[0], v[1], derived.apply(v[0]));
    }
  }
}
