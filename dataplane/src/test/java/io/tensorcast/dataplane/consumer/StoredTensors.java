package io.tensorcast.dataplane.consumer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The test's own reading of a safetensors file, independent of the production parser: the 8-byte
 * little-endian prefix, the JSON header through a plain Jackson tree, and the tensors' bytes read
 * with positional reads of the file.
 */
final class StoredTensors {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** One tensor: where its bytes are in the file, and what it is. */
  record Tensor(String name, String dtype, List<Long> shape, long fileOffset, long length) {}

  private StoredTensors() {}

  static List<Tensor> read(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      ByteBuffer prefix = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      ch.read(prefix, 0);
      long n = prefix.flip().getLong();
      ByteBuffer json = ByteBuffer.allocate(Math.toIntExact(n));
      while (json.hasRemaining() && ch.read(json, 8 + json.position()) > 0) {}
      JsonNode root = JSON.readTree(json.array());
      List<Tensor> out = new ArrayList<>();
      for (Map.Entry<String, JsonNode> e : root.properties()) {
        if (e.getKey().equals("__metadata__")) {
          continue;
        }
        JsonNode v = e.getValue();
        List<Long> shape = new ArrayList<>();
        v.get("shape").forEach(d -> shape.add(d.asLong()));
        long begin = v.get("data_offsets").get(0).asLong();
        long end = v.get("data_offsets").get(1).asLong();
        out.add(new Tensor(e.getKey(), v.get("dtype").asText(), shape, 8 + n + begin, end - begin));
      }
      return out;
    }
  }

  static byte[] bytes(Path file, long offset, long length) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(length));
      while (b.hasRemaining()) {
        if (ch.read(b, offset + b.position()) < 0) {
          throw new IOException(file + " ends before byte " + (offset + length));
        }
      }
      return b.array();
    }
  }
}
