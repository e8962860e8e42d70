package io.tensorcast.dataplane.format;

import io.tensorcast.dataplane.format.index.IndexFormatException;
import io.tensorcast.dataplane.format.index.ShardIndex;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchCheckpointReader;
import io.tensorcast.dataplane.format.torch.TorchFormatException;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import java.util.zip.ZipOutputStream;

/**
 * A seeded random mutator over seed files for the safetensors, torch and index readers: byte flips,
 * interesting integers, chunk deletion, duplication and splicing, and structure-aware mutations
 * (numbers and keys in a safetensors header with its length prefix fixed up, opcodes in a torch
 * archive's pickle re-zipped around the same storages, tokens of an index file). Each input is
 * read; the only outcome allowed besides success is the reader's own refusal ({@link
 * SafetensorsFormatException}, {@link TorchFormatException}, {@link IndexFormatException}). A
 * checkpoint that is accepted must also give every tensor's bytes. Deterministic for a seed.
 */
final class FormatFuzzer {
  /** Kind of reader a seed is for. */
  enum Kind {
    SAFETENSORS,
    TORCH,
    INDEX
  }

  /** One seed file. */
  record Seed(String name, Kind kind, byte[] bytes) {}

  /** One generated input. */
  record Input(Seed seed, String mutation, byte[] bytes) {}

  private static final long[] INTERESTING = {
    0,
    1,
    -1,
    2,
    7,
    8,
    63,
    64,
    65,
    127,
    128,
    255,
    256,
    1023,
    1024,
    4096,
    65535,
    65536,
    Integer.MAX_VALUE,
    1L << 31,
    0xffffffffL,
    1L << 32,
    1L << 40,
    Long.MAX_VALUE,
    Long.MIN_VALUE,
    100_000_000,
    100_000_001
  };
  private static final Pattern NUMBER = Pattern.compile("-?\\d+");
  private static final Pattern STRING = Pattern.compile("\"(?:[^\"\\\\]++|\\\\.)*+\"");
  private static final byte[] OPCODES = {
    '(',
    ')',
    '.',
    '0',
    '1',
    '2',
    'N',
    'J',
    'K',
    'M',
    'X',
    'h',
    'j',
    'q',
    'r',
    'c',
    'R',
    'b',
    't',
    'l',
    ']',
    '}',
    'd',
    's',
    'u',
    'a',
    'e',
    'Q',
    (byte) 0x80,
    (byte) 0x85,
    (byte) 0x86,
    (byte) 0x87,
    (byte) 0x88,
    (byte) 0x89,
    (byte) 0x8a,
    (byte) 0x8c,
    (byte) 0x8f,
    (byte) 0x90,
    (byte) 0x91,
    (byte) 0x93,
    (byte) 0x94,
    (byte) 0x95,
    (byte) 0x81,
    'G',
    'T',
    'U',
    'B',
    'C'
  };

  private final List<Seed> seeds;
  private final Random random;
  private final FormatLimits limits;

  FormatFuzzer(List<Seed> seeds, long seed, FormatLimits limits) {
    this.seeds = List.copyOf(seeds);
    this.random = new Random(seed);
    this.limits = limits;
  }

  /** The next mutated input. */
  Input next() {
    Seed s = seeds.get(random.nextInt(seeds.size()));
    int rounds = 1 + random.nextInt(3);
    byte[] b = s.bytes();
    StringBuilder what = new StringBuilder();
    for (int i = 0; i < rounds; i++) {
      String m;
      int choice = random.nextInt(10);
      if (choice < 4) {
        m = structural(s.kind());
        b = structural(s.kind(), b, m);
      } else {
        m = "raw";
        b = raw(b);
      }
      what.append(i == 0 ? "" : "+").append(m);
    }
    return new Input(s, what.toString(), b);
  }

  /**
   * Reads {@code input} with its seed's reader.
   *
   * @return the reader's refusal, or null when the input was accepted
   * @throws Exception anything but a refusal: a crash of the reader (also Errors, by the caller)
   */
  Exception read(Input input) throws Exception {
    byte[] b = input.bytes();
    String name = input.seed().name();
    try {
      switch (input.seed().kind()) {
        case SAFETENSORS -> readSafetensors(name, b);
        case TORCH -> readTorch(name, b);
        case INDEX -> {
          ShardIndex.checkSize(name, b.length, limits.maxIndexBytes());
          ShardIndex.parse(name, b, limits.maxTensors());
        }
      }
      return null;
    } catch (SafetensorsFormatException | TorchFormatException | IndexFormatException e) {
      return e;
    }
  }

  private void readSafetensors(String name, byte[] b) throws SafetensorsFormatException {
    if (b.length < 8) {
      SafetensorsHeader.parse(name, b.length, b, limits.safetensors());
      return;
    }
    long n =
        SafetensorsHeader.readHeaderLength(
            name, Arrays.copyOf(b, 8), b.length, limits.safetensors());
    SafetensorsHeader.parse(
        name, b.length, Arrays.copyOfRange(b, 8, 8 + (int) n), limits.safetensors());
  }

  private void readTorch(String name, byte[] b) throws TorchFormatException, IOException {
    ByteSource src = ByteSource.of(b);
    TorchCheckpoint c = TorchCheckpointReader.read(name, src, limits.torch());
    for (TorchTensor t : c.tensors()) {
      if (t.byteLength() <= 1 << 20) {
        byte[] bytes = t.contiguousBytes(src);
        if (bytes.length != t.byteLength()) {
          throw new AssertionError(
              t.name() + ": " + bytes.length + " bytes read, " + t.byteLength() + " declared");
        }
      }
    }
  }

  // ------------------------------------------------------------------------ raw mutations

  private byte[] raw(byte[] in) {
    byte[] b = in.clone();
    if (b.length == 0) {
      return new byte[] {(byte) random.nextInt(256)};
    }
    switch (random.nextInt(7)) {
      case 0 -> {
        for (int i = 1 + random.nextInt(8); i > 0; i--) {
          int at = random.nextInt(b.length);
          b[at] ^= (byte) (1 << random.nextInt(8));
        }
      }
      case 1 -> {
        byte[] values = {0, (byte) 0xff, 0x7f, (byte) 0x80, 1, '.', '(', '"', '[', '{'};
        for (int i = 1 + random.nextInt(4); i > 0; i--) {
          b[random.nextInt(b.length)] = values[random.nextInt(values.length)];
        }
      }
      case 2 -> {
        int width = random.nextBoolean() ? 4 : 8;
        if (b.length >= width) {
          int at = random.nextInt(b.length - width + 1);
          ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
          long v = INTERESTING[random.nextInt(INTERESTING.length)];
          if (width == 4) {
            bb.putInt(at, (int) v);
          } else {
            bb.putLong(at, v);
          }
        }
      }
      case 3 -> {
        int from = random.nextInt(b.length);
        int to = Math.min(b.length, from + 1 + random.nextInt(Math.min(b.length, 4096)));
        b = concat(Arrays.copyOf(b, from), Arrays.copyOfRange(b, to, b.length));
      }
      case 4 -> {
        int from = random.nextInt(b.length);
        int to = Math.min(b.length, from + 1 + random.nextInt(Math.min(b.length, 4096)));
        int at = random.nextInt(b.length + 1);
        byte[] chunk = Arrays.copyOfRange(b, from, to);
        b = concat(Arrays.copyOf(b, at), chunk, Arrays.copyOfRange(b, at, b.length));
      }
      case 5 -> b = Arrays.copyOf(b, random.nextInt(b.length));
      default -> {
        byte[] other = seeds.get(random.nextInt(seeds.size())).bytes();
        int cut = random.nextInt(b.length);
        int from = other.length == 0 ? 0 : random.nextInt(other.length);
        b = concat(Arrays.copyOf(b, cut), Arrays.copyOfRange(other, from, other.length));
      }
    }
    return b;
  }

  // ----------------------------------------------------------------- structural mutations

  private String structural(Kind kind) {
    return switch (kind) {
      case SAFETENSORS -> "header";
      case TORCH -> "pickle";
      case INDEX -> "json";
    };
  }

  private byte[] structural(Kind kind, byte[] b, String m) {
    try {
      return switch (kind) {
        case SAFETENSORS -> mutateSafetensorsHeader(b);
        case TORCH -> mutatePickle(b);
        case INDEX -> mutateJson(b);
      };
    } catch (IOException | RuntimeException e) {
      return raw(b); // not structured enough for this mutation: fall back to bytes
    }
  }

  /** Mutates the JSON header's text and writes a length prefix that fits the new header. */
  private byte[] mutateSafetensorsHeader(byte[] b) {
    if (b.length < 8) {
      return raw(b);
    }
    long n = ByteBuffer.wrap(b, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    if (n < 2 || n > b.length - 8) {
      return raw(b);
    }
    byte[] json = Arrays.copyOfRange(b, 8, 8 + (int) n);
    byte[] data = Arrays.copyOfRange(b, 8 + (int) n, b.length);
    byte[] mutated = mutateJson(json);
    ByteBuffer out = ByteBuffer.allocate(8 + mutated.length + data.length);
    out.order(ByteOrder.LITTLE_ENDIAN).putLong(mutated.length).put(mutated).put(data);
    return out.array();
  }

  /** Replaces a number or string token, duplicates a member, or nests a value. */
  private byte[] mutateJson(byte[] json) {
    String s = new String(json, StandardCharsets.UTF_8);
    switch (random.nextInt(5)) {
      case 0, 1 -> {
        List<int[]> spans = spans(NUMBER, s);
        if (!spans.isEmpty()) {
          int[] sp = spans.get(random.nextInt(spans.size()));
          long v = INTERESTING[random.nextInt(INTERESTING.length)];
          String r =
              random.nextInt(8) == 0
                  ? v + ".5"
                  : random.nextInt(8) == 0 ? "1" + "0".repeat(30) : Long.toString(v);
          s = s.substring(0, sp[0]) + r + s.substring(sp[1]);
        }
      }
      case 2 -> {
        List<int[]> spans = spans(STRING, s);
        if (!spans.isEmpty()) {
          int[] sp = spans.get(random.nextInt(spans.size()));
          String[] r = {
            "\"\"",
            "\"F32\"",
            "\"BF16\"",
            "\"__metadata__\"",
            "\"\\ud800\"",
            "\"a.b\"",
            "\"../x.safetensors\"",
            "\"shape\"",
            "\"data_offsets\"",
            "\"dtype\"",
            "\"weight_map\""
          };
          s = s.substring(0, sp[0]) + r[random.nextInt(r.length)] + s.substring(sp[1]);
        }
      }
      case 3 -> {
        List<int[]> spans = spans(STRING, s);
        if (!spans.isEmpty()) {
          int[] sp = spans.get(random.nextInt(spans.size()));
          int close = s.indexOf(',', sp[1]);
          if (close > sp[1]) {
            String member = s.substring(sp[0], close);
            s = s.substring(0, close) + "," + member + s.substring(close);
          }
        }
      }
      default -> {
        List<int[]> spans = spans(NUMBER, s);
        if (!spans.isEmpty()) {
          int[] sp = spans.get(random.nextInt(spans.size()));
          int depth = 1 + random.nextInt(random.nextBoolean() ? 8 : 400);
          s =
              s.substring(0, sp[0])
                  + "[".repeat(depth)
                  + s.substring(sp[0], sp[1])
                  + "]".repeat(depth)
                  + s.substring(sp[1]);
        }
      }
    }
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static List<int[]> spans(Pattern p, String s) {
    List<int[]> out = new ArrayList<>();
    Matcher m = p.matcher(s);
    while (m.find() && out.size() < 10_000) {
      out.add(new int[] {m.start(), m.end()});
    }
    return out;
  }

  /**
   * Mutates the pickle of a zip checkpoint (opcodes inserted, duplicated, replaced; memo indexes
   * changed) and re-zips it, stored, with the other entries unchanged; a legacy checkpoint's bytes
   * are the pickle itself.
   */
  private byte[] mutatePickle(byte[] b) throws IOException {
    if (b.length < 4 || b[0] != 'P' || b[1] != 'K') {
      return mutatePickleBytes(b);
    }
    Map<String, byte[]> entries = new LinkedHashMap<>();
    try (ZipInputStream z = new ZipInputStream(new ByteArrayInputStream(b))) {
      ZipEntry e;
      while ((e = z.getNextEntry()) != null) {
        entries.put(e.getName(), z.readNBytes(16 << 20));
      }
    }
    String pkl =
        entries.keySet().stream().filter(k -> k.endsWith("/data.pkl")).findFirst().orElse(null);
    if (pkl == null) {
      return raw(b);
    }
    entries.put(pkl, mutatePickleBytes(entries.get(pkl)));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ZipOutputStream z = new ZipOutputStream(out)) {
      for (Map.Entry<String, byte[]> e : entries.entrySet()) {
        ZipEntry ze = new ZipEntry(e.getKey());
        ze.setMethod(ZipEntry.STORED);
        ze.setSize(e.getValue().length);
        ze.setCompressedSize(e.getValue().length);
        CRC32 crc = new CRC32();
        crc.update(e.getValue());
        ze.setCrc(crc.getValue());
        z.putNextEntry(ze);
        z.write(e.getValue());
        z.closeEntry();
      }
    }
    return out.toByteArray();
  }

  private byte[] mutatePickleBytes(byte[] p) {
    if (p.length < 2) {
      return raw(p);
    }
    byte[] b = p.clone();
    switch (random.nextInt(5)) {
      case 0 -> b[1 + random.nextInt(b.length - 1)] = OPCODES[random.nextInt(OPCODES.length)];
      case 1 -> {
        int at = 1 + random.nextInt(b.length - 1);
        byte[] ops = new byte[1 + random.nextInt(6)];
        for (int i = 0; i < ops.length; i++) {
          ops[i] =
              random.nextInt(3) == 0
                  ? (byte) random.nextInt(8)
                  : OPCODES[random.nextInt(OPCODES.length)];
        }
        b = concat(Arrays.copyOf(b, at), ops, Arrays.copyOfRange(b, at, b.length));
      }
      case 2 -> {
        // Repeat a run of the pickle: memo gets and containers built twice.
        int from = 1 + random.nextInt(b.length - 1);
        int to = Math.min(b.length - 1, from + 1 + random.nextInt(64));
        if (to > from) {
          byte[] run = Arrays.copyOfRange(b, from, to);
          b = concat(Arrays.copyOf(b, to), run, run, Arrays.copyOfRange(b, to, b.length));
        }
      }
      case 3 -> {
        for (int i = 0; i < b.length - 1; i++) {
          if ((b[i] == 'h' || b[i] == 'q') && random.nextInt(4) == 0) {
            b[i + 1] = (byte) random.nextInt(8);
          }
        }
      }
      default -> {
        return raw(b);
      }
    }
    return b;
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }
}
