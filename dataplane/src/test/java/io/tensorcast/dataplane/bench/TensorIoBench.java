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

    Map<String, Double> cpu = cpuTimes(iterations);
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
    System.out.printf(
        Locale.ROOT,
        "%-44s %22s %12s  %s%n",
        "benchmark",
        "wall time/op (JMH)",
        "cpu/op",
        "derived");
    line(byName, cpu, "parse", "100k-tensor header", v -> "");
    line(byName, cpu, "planTp4Exact", "per plan, 70B TP=4 -> TP=4 (exact)", v -> "");
    line(
        byName,
        cpu,
        "planTp8FromTp4",
        "per plan, 70B TP=4 -> TP=8",
        v ->
            String.format(
                Locale.ROOT,
                "whole model (8 ranks): %.0f ms wall, %.0f ms cpu",
                v * 8 * RangePlanBenchmark.TENSORS / 1000,
                cpu.get("planTp8FromTp4") * 8 * RangePlanBenchmark.TENSORS / 1000));
    for (String dim : new String[] {"0", "1"}) {
      String rk = "reconstructFull[splitDim=" + dim + "]";
      String ck = "memoryCopy[splitDim=" + dim + "]";
      double[] rec = byName.get(rk);
      double[] cpy = byName.get(ck);
      if (rec == null || cpy == null) {
        continue;
      }
      double recGbs = ReconstructBenchmark.BYTES / (rec[0] * 1e3);
      double cpyGbs = ReconstructBenchmark.BYTES / (cpy[0] * 1e3);
      double recCpu = ReconstructBenchmark.BYTES / (cpu.get(rk) * 1e3);
      double cpyCpu = ReconstructBenchmark.BYTES / (cpu.get(ck) * 1e3);
      System.out.printf(
          Locale.ROOT,
          "%-44s %10.1f ± %7.1f us %9.1f us  %.2f GB/s wall, %.2f GB/s cpu%n",
          "reconstruct 64 MiB from 4 shards, dim " + dim,
          rec[0],
          rec[1],
          cpu.get(rk),
          recGbs,
          recCpu);
      System.out.printf(
          Locale.ROOT,
          "%-44s %10.1f ± %7.1f us %9.1f us  %.2f GB/s wall, %.2f GB/s cpu%n",
          "memory copy 64 MiB (same run)",
          cpy[0],
          cpy[1],
          cpu.get(ck),
          cpyGbs,
          cpyCpu);
      System.out.printf(
          Locale.ROOT,
          "%-44s %22s %12s  %.2f (wall), %.2f (cpu)%n",
          "  ratio reconstruct / memory copy",
          "",
          "",
          recGbs / cpyGbs,
          recCpu / cpyCpu);
    }
  }

  /**
   * Thread CPU time per operation of each benchmark body (minimum over {@code reps} calls after 2 s
   * of warm-up), measured in this process after a warm-up: on a shared machine wall time includes
   * time spent waiting for a core, CPU time does not.
   */
  private static Map<String, Double> cpuTimes(int reps) throws Exception {
    Map<String, Double> out = new TreeMap<>();
    HeaderParseBenchmark h = new HeaderParseBenchmark();
    h.setup();
    out.put("parse", cpuPerOp(reps, 1, h::parse));
    RangePlanBenchmark p = new RangePlanBenchmark();
    p.setup();
    org.openjdk.jmh.infra.Blackhole bh =
        new org.openjdk.jmh.infra.Blackhole(
            "Today's password is swordfish. I understand instantiating Blackholes directly is"
                + " dangerous.");
    out.put(
        "planTp4Exact",
        cpuPerOp(
            reps,
            4 * RangePlanBenchmark.TENSORS,
            () -> {
              p.planTp4Exact(bh);
              return null;
            }));
    out.put(
        "planTp8FromTp4",
        cpuPerOp(
            reps,
            8 * RangePlanBenchmark.TENSORS,
            () -> {
              p.planTp8FromTp4(bh);
              return null;
            }));
    for (int dim = 0; dim < 2; dim++) {
      ReconstructBenchmark r = new ReconstructBenchmark();
      r.splitDim = dim;
      r.setup();
      out.put("reconstructFull[splitDim=" + dim + "]", cpuPerOp(reps * 5, 1, r::reconstructFull));
      out.put("memoryCopy[splitDim=" + dim + "]", cpuPerOp(reps * 5, 1, r::memoryCopy));
    }
    return out;
  }

  @FunctionalInterface
  private interface Op {
    Object run() throws Exception;
  }

  private static double cpuPerOp(int reps, int opsPerCall, Op op) throws Exception {
    java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
    long warmUntil = System.nanoTime() + 2_000_000_000L; // 2 s of warm-up so C2 has compiled
    for (int i = 0; i < reps || System.nanoTime() < warmUntil; i++) {
      op.run();
    }
    double best = Double.MAX_VALUE;
    for (int i = 0; i < reps; i++) {
      long c = mx.getCurrentThreadCpuTime();
      op.run();
      best = Math.min(best, (mx.getCurrentThreadCpuTime() - c) / 1e3 / opsPerCall);
    }
    return best;
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
      Map<String, Double> cpu,
      String key,
      String label,
      java.util.function.DoubleFunction<String> derived) {
    double[] v = byName.get(key);
    if (v != null) {
      System.out.printf(
          Locale.ROOT,
          "%-44s %10.2f ± %7.2f us %9.2f us  %s%n",
          label,
          v[0],
          v[1],
          cpu.get(key),
          derived.apply(v[0]));
    }
  }
}
