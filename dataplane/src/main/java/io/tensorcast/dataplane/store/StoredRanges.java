package io.tensorcast.dataplane.store;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The byte ranges of one stored file that hold bytes of one source object version: sorted,
 * disjoint, adjacent ranges merged. Thread-safe.
 */
final class StoredRanges {
  private static final Logger log = LoggerFactory.getLogger(StoredRanges.class);
  private final String version;
  private final TreeMap<Long, Long> ranges = new TreeMap<>(); // start → end (exclusive)

  /** Built on first read only (a restart's resumption), as {@link ArtifactState}'s reader. */
  private static final class Reader {
    static final ObjectMapper JSON = new ObjectMapper();
  }

  private static final JsonFactory WRITER = new JsonFactory();
  static final String SUFFIX = ".stored";

  /** The file form: per incomplete file, the source version and the {@code [start, end)} ranges. */
  record FileEntry(String path, String version, List<long[]> ranges) {}

  record FileForm(int formatVersion, List<FileEntry> files) {}

  static Path pathFor(Path stateDir, String artifactId) {
    return stateDir.resolve(artifactId + SUFFIX);
  }

  /**
   * Writes {@code byPath} to {@code target} durably and atomically ({@link DurableFiles#replace}).
   */
  static void write(Path target, Map<String, StoredRanges> byPath) throws IOException {
    List<FileEntry> entries = new ArrayList<>();
    byPath.forEach((p, r) -> entries.add(new FileEntry(p, r.version(), r.ranges())));
    DurableFiles.replace(target, toJson(new FileForm(1, entries)));
  }

  /** The file's bytes: the fields {@link #read} binds, written by the streaming generator. */
  static byte[] toJson(FileForm form) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = WRITER.createGenerator(out)) {
      g.writeStartObject();
      g.writeNumberField("formatVersion", form.formatVersion());
      g.writeArrayFieldStart("files");
      for (FileEntry e : form.files()) {
        g.writeStartObject();
        g.writeStringField("path", e.path());
        g.writeStringField("version", e.version());
        g.writeArrayFieldStart("ranges");
        for (long[] r : e.ranges()) {
          g.writeArray(r, 0, r.length);
        }
        g.writeEndArray();
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    }
    return out.toByteArray();
  }

  /**
   * Reads a ranges file, keeping only entries of {@code sizes}' paths whose ranges lie inside the
   * file; empty when the file is missing or unreadable — torn, truncated, not this format — (the
   * copy is then not resumable: nothing of it is trusted).
   */
  static Map<String, StoredRanges> read(Path file, Map<String, Long> sizes) {
    Map<String, StoredRanges> out = new LinkedHashMap<>();
    if (!Files.isRegularFile(file)) {
      return out;
    }
    try {
      FileForm form = Reader.JSON.readValue(file.toFile(), FileForm.class);
      if (form.formatVersion() != 1 || form.files() == null) {
        return Map.of();
      }
      for (FileEntry e : form.files()) {
        Long size = e.path() == null ? null : sizes.get(e.path());
        if (size == null || e.ranges() == null) {
          continue;
        }
        StoredRanges r = new StoredRanges(e.version());
        for (long[] range : e.ranges()) {
          if (range.length == 2 && range[0] >= 0 && range[0] < range[1] && range[1] <= size) {
            r.add(range[0], range[1]);
          }
        }
        out.put(e.path(), r);
      }
      return out;
    } catch (IOException | RuntimeException e) {
      log.warn(
          "{} is unreadable ({}); no stored range of it is trusted, the files are read again",
          file,
          e.getMessage());
      return Map.of();
    }
  }

  StoredRanges(String version) {
    this.version = version;
  }

  String version() {
    return version;
  }

  boolean isVersion(String v) {
    return Objects.equals(version, v);
  }

  /** A copy of these ranges as they are now. */
  synchronized StoredRanges copy() {
    StoredRanges c = new StoredRanges(version);
    c.ranges.putAll(ranges);
    return c;
  }

  /** Adds {@code [start, end)}, merging it with the ranges it overlaps or touches. */
  synchronized void add(long start, long end) {
    if (end <= start) {
      return;
    }
    Map.Entry<Long, Long> before = ranges.floorEntry(start);
    if (before != null && before.getValue() >= start) {
      start = before.getKey();
      end = Math.max(end, before.getValue());
    }
    Map.Entry<Long, Long> next = ranges.ceilingEntry(start);
    while (next != null && next.getKey() <= end) {
      end = Math.max(end, next.getValue());
      ranges.remove(next.getKey());
      next = ranges.ceilingEntry(start);
    }
    ranges.put(start, end);
  }

  /** The ranges as {@code [start, end)} pairs, in order. */
  synchronized List<long[]> ranges() {
    List<long[]> out = new ArrayList<>(ranges.size());
    ranges.forEach((s, e) -> out.add(new long[] {s, e}));
    return out;
  }
}
