package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import io.tensorcast.dataplane.load.HeaderFetcher;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.ShardIndexes;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import java.io.PrintWriter;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code dataplane inspect URI}: files, tensors, dtypes and sizes, reading headers only; index
 * files are checked against the shards. The URI may name a folder or one local file.
 */
@Command(
    name = "inspect",
    mixinStandardHelpOptions = true,
    description =
        "List an artifact's files and the tensors of its safetensors files and torch checkpoints"
            + " (.pt/.pth/.bin, read with weights_only rules) without loading their data, and check"
            + " its index files (*.safetensors.index.json, *.bin.index.json) against the shards."
            + " URI names a folder, a bucket prefix, a Hub repository, or one local file.")
final class InspectCommand implements Callable<Integer> {
  @Mixin SourceArgs source;
  @Mixin FormatLimitArgs formatLimits;

  @Option(names = "--tensors", description = "Print every tensor (name, dtype, shape, bytes).")
  boolean tensors;

  @Spec CommandSpec spec;

  private void printTorch(PrintWriter out, SourceFile f, TorchCheckpoint c) {
    Map<String, Integer> dtypes = new TreeMap<>();
    for (TorchTensor t : c.tensors()) {
      dtypes.merge(t.dtype().torchName(), 1, Integer::sum);
    }
    out.printf(
        "  %-50s %12s  %d tensors  %s  (torch %s)%n",
        f.path(),
        Quantities.human(f.size()),
        c.tensors().size(),
        dtypes,
        c.format().name().toLowerCase(java.util.Locale.ROOT));
    if (tensors) {
      for (TorchTensor t : c.tensors()) {
        out.printf(
            "      %-60s %-8s %-20s %12d%n",
            displayName(t.name()),
            t.safetensorsDtype().map(Enum::name).orElse(t.dtype().torchName()),
            Arrays.toString(t.shape()),
            t.byteLength());
      }
    }
  }

  /** A tensor name as printed: the empty name (a checkpoint that is one bare tensor) as "". */
  private static String displayName(String name) {
    return name.isEmpty() ? "\"\"" : name;
  }

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    var limits = formatLimits.limits();
    int attempts = source.readOptions().maxAttempts();
    try (ArtifactSource src = source.openFileOrFolder()) {
      List<SourceFile> files = src.list();
      long total = 0;
      long tensorCount = 0;
      Map<String, SafetensorsHeader> headers = new LinkedHashMap<>();
      Map<String, TorchCheckpoint> checkpoints = new LinkedHashMap<>();
      out.printf("%s%n", src.describe());
      for (SourceFile f : files) {
        total += f.size();
        if (HeaderFetcher.isTorchPath(f.path())) {
          Optional<TorchCheckpoint> c =
              HeaderFetcher.fetchTorch(src, f, limits.torch(), attempts, () -> {});
          if (c.isPresent()) {
            checkpoints.put(f.path(), c.get());
            tensorCount += c.get().tensors().size();
            printTorch(out, f, c.get());
            continue;
          }
        }
        if (!f.path().endsWith(".safetensors")) {
          out.printf("  %-50s %12s%n", f.path(), Quantities.human(f.size()));
          continue;
        }
        SafetensorsHeader h = HeaderFetcher.fetch(src, f, limits.safetensors(), attempts, () -> {});
        headers.put(f.path(), h);
        tensorCount += h.tensors().size();
        Map<Dtype, Integer> dtypes = new TreeMap<>();
        for (TensorInfo t : h.tensors()) {
          dtypes.merge(t.dtype(), 1, Integer::sum);
        }
        out.printf(
            "  %-50s %12s  %d tensors  %s%n",
            f.path(), Quantities.human(f.size()), h.tensors().size(), dtypes);
        if (tensors) {
          for (TensorInfo t : h.tensors()) {
            out.printf(
                "      %-60s %-8s %-20s %12d%n",
                t.name(), t.dtype(), Arrays.toString(t.shape()), t.byteLength());
          }
        }
      }
      out.flush();
      ShardIndexes.validate(
          files,
          src.filter(),
          headers,
          checkpoints,
          limits,
          f -> HeaderFetcher.fetchBytes(src, f, attempts, () -> {}));
      out.printf(
          "%d files, %d tensors, %s (%d bytes)%n",
          files.size(), tensorCount, Quantities.human(total), total);
      out.flush();
      return 0;
    } catch (SourceException e) {
      err.printf("inspect failed: %s: %s%n", e.reason(), e.getMessage());
      return 1;
    } catch (LoadFailure e) {
      err.printf("inspect failed: %s: %s%n", e.reason(), e.getMessage());
      return 1;
    }
  }
}
