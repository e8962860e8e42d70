package io.tensorcast.dataplane.format.safetensors;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;

/** The shared corpus of real files and its MANIFEST.tsv, read in place (never copied). */
final class Corpus {

  private static final Path FALLBACK = Path.of("/work/shared/corpus");
  private static final Pattern LEADING_INT = Pattern.compile("^(\\d+)");

  private Corpus() {}

  /**
   * The corpus directory: the {@code tensorcast.corpus} property if that directory exists, else
   * {@code /work/shared/corpus}; aborts (skips) the test with a message when neither exists.
   */
  static Path root() {
    String prop = System.getProperty("tensorcast.corpus");
    if (prop != null && Files.isDirectory(Path.of(prop))) {
      return Path.of(prop);
    }
    if (Files.isDirectory(FALLBACK)) {
      return FALLBACK;
    }
    Assumptions.abort(
        "corpus not found: neither -Dtensorcast.corpus="
            + prop
            + " nor "
            + FALLBACK
            + " exists; corpus tests skipped");
    throw new AssertionError("unreachable");
  }

  /** One row of MANIFEST.tsv. */
  record Entry(
      String path,
      String sha256,
      long bytes,
      String kind,
      String writer,
      String source,
      String notes) {

    /**
     * {@code key=value} fields of the notes column ({@code tensors=20; dtypes=F32x18,I64x2; …}), in
     * order; parts without {@code =} are prose and skipped.
     */
    Map<String, String> noteFields() {
      Map<String, String> fields = new LinkedHashMap<>();
      for (String part : notes.split(";")) {
        int eq = part.indexOf('=');
        if (eq > 0) {
          String key = part.substring(0, eq).trim();
          if (key.matches("[A-Za-z0-9_]+")) {
            fields.put(key, part.substring(eq + 1).trim());
          }
        }
      }
      return fields;
    }

    /** The leading integer of a note field ({@code header_len=81 (NOT 8-aligned)} gives 81). */
    OptionalLong noteLong(String key) {
      String v = noteFields().get(key);
      if (v == null) {
        return OptionalLong.empty();
      }
      Matcher m = LEADING_INT.matcher(v);
      if (!m.find()) {
        throw new IllegalStateException(path + ": note " + key + "=" + v + " is not a number");
      }
      return OptionalLong.of(Long.parseLong(m.group(1)));
    }
  }

  static List<Entry> manifest() throws IOException {
    Path file = root().resolve("MANIFEST.tsv");
    List<String> lines = Files.readAllLines(file);
    if (!lines.get(0).startsWith("relative_path\tsha256\tbytes\tkind\twriter\tsource\tnotes")) {
      throw new IllegalStateException(file + ": unexpected header line " + lines.get(0));
    }
    List<Entry> entries = new ArrayList<>();
    for (String line : lines.subList(1, lines.size())) {
      if (line.isBlank()) {
        continue;
      }
      String[] c = line.split("\t", -1);
      if (c.length != 7) {
        throw new IllegalStateException(file + ": expected 7 columns in " + line);
      }
      entries.add(new Entry(c[0], c[1], Long.parseLong(c[2]), c[3], c[4], c[5], c[6]));
    }
    return entries;
  }
}
