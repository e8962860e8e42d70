package io.tensorcast.dataplane.bench;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Parse + validate a generated safetensors header of 100,000 tensors (Llama-style names, mixed
 * dtypes and 1-/2-D shapes) with the data plane's {@code HeaderParser}.
 */
@State(Scope.Benchmark)
public class HeaderParseBenchmark {

  /** Tensors in the generated header. */
  public static final int TENSORS = 100_000;

  byte[] json;
  long fileSize;

  @Setup
  public void setup() {
    List<TensorDeclaration> decls = new ArrayList<>(TENSORS);
    Dtype[] dtypes = {Dtype.BF16, Dtype.F32, Dtype.F8_E4M3, Dtype.I64};
    for (int i = 0; i < TENSORS; i++) {
      long[] shape = i % 3 == 0 ? new long[] {64 + i % 7} : new long[] {16 + i % 5, 32};
      decls.add(
          new TensorDeclaration(
              "model.layers." + i / 10 + ".block_" + i % 10 + ".weight", dtypes[i % 4], shape));
    }
    byte[] all = SafetensorsWriter.headerBytes(decls, Map.of("format", "pt"));
    json = Arrays.copyOfRange(all, SafetensorsHeader.LENGTH_PREFIX_BYTES, all.length);
    fileSize = SafetensorsWriter.layout(decls, Map.of("format", "pt")).fileSize();
  }

  /** One full parse of the header. */
  @Benchmark
  public SafetensorsHeader parse() throws SafetensorsFormatException {
    return SafetensorsHeader.parse("bench-100k.safetensors", fileSize, json);
  }
}
