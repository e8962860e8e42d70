package io.tensorcast.dataplane.store;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The per-artifact state file {@code <root>/.tensorcast/<artifactId>.json}: the artifact's files
 * and, for each complete file, the {@link ContentDigest} it was completed with. Kept outside the
 * artifact directory so that directory holds exactly the artifact's files. Written atomically
 * (temporary file, then rename). Format 1 records each complete file's {@code sha256}; format 2,
 * written only when some file was completed with another digest, each file's {@code digest} (in
 * {@link ContentDigest}'s written form). A copy whose files all have a SHA-256 keeps format 1,
 * which data planes and CSI drivers from before format 2 read.
 *
 * @param formatVersion {@value #FORMAT_VERSION}
 * @param artifactId the artifact id; must equal the file's name
 * @param files every file of the artifact, in allocation order
 */
record ArtifactState(int formatVersion, String artifactId, List<FileState> files) {
  static final int FORMAT_VERSION = 2;
  private static final Pattern SHA256_HEX = Pattern.compile("[0-9a-f]{64}");

  /**
   * @param digest the file's {@link ContentDigest} in its written form once the file is complete;
   *     null while it is not
   */
  record FileState(String path, long size, String digest) {
    boolean complete() {
      return digest != null;
    }
  }

  /** A state file as written, format 1 or 2; every field checked by {@link #read}. */
  private record Written(Integer formatVersion, String artifactId, List<WrittenFile> files) {}

  private record WrittenFile(String path, Long size, String sha256, String digest) {}

  /**
   * The reader, built on first read only: a cold load writes its state file while the bytes wait
   * for the allocation, and the data-binding classes (~600) take a few hundred milliseconds to load
   * on a cold JVM; writing needs only the streaming generator.
   */
  private static final class Reader {
    static final ObjectMapper JSON =
        new ObjectMapper()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
  }

  private static final JsonFactory WRITER = new JsonFactory();

  ArtifactState {
    Objects.requireNonNull(artifactId, "artifactId");
    files = List.copyOf(files);
  }

  static Path pathFor(Path stateDir, String artifactId) {
    return stateDir.resolve(artifactId + ".json");
  }

  /**
   * Writes {@code state} to {@code target} durably and atomically ({@link DurableFiles#replace}).
   */
  static void writeAtomically(Path target, ArtifactState state) throws IOException {
    DurableFiles.replace(target, toJson(state));
  }

  /**
   * The file's bytes: the fields {@link #read} binds, pretty-printed, written by the generator; in
   * format 1 unless a file was completed with another digest than SHA-256.
   */
  static byte[] toJson(ArtifactState state) throws IOException {
    boolean onlySha256 =
        state.files().stream()
            .allMatch(f -> f.digest() == null || ContentDigest.parse(f.digest()).isSha256());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = WRITER.createGenerator(out)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeNumberField("formatVersion", onlySha256 ? 1 : 2);
      g.writeStringField("artifactId", state.artifactId());
      g.writeArrayFieldStart("files");
      for (FileState f : state.files()) {
        g.writeStartObject();
        g.writeStringField("path", f.path());
        g.writeNumberField("size", f.size());
        g.writeStringField(onlySha256 ? "sha256" : "digest", f.digest());
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    }
    return out.toByteArray();
  }

  /**
   * Reads and checks a state file: strict JSON (no duplicate keys, no unknown fields), the format
   * version, the id against the file name, and every path and size by the allocation rules.
   *
   * @throws IOException naming the file and what is wrong
   */
  static ArtifactState read(Path file, String expectedId) throws IOException {
    Written w;
    try {
      w = Reader.JSON.readValue(file.toFile(), Written.class);
    } catch (IOException e) {
      throw new IOException("state file " + file + " is not valid: " + e.getMessage(), e);
    }
    if (w.formatVersion() == null || (w.formatVersion() != 1 && w.formatVersion() != 2)) {
      throw new IOException(
          "state file "
              + file
              + " has formatVersion "
              + w.formatVersion()
              + ", expected 1 or "
              + FORMAT_VERSION);
    }
    if (w.artifactId() == null || !w.artifactId().equals(expectedId)) {
      throw new IOException(
          "state file " + file + " names artifact '" + w.artifactId() + "', not " + expectedId);
    }
    if (w.files() == null) {
      throw new IOException("state file " + file + " has no files");
    }
    List<FileState> files = new ArrayList<>();
    for (WrittenFile f : w.files()) {
      if (f == null || f.path() == null) {
        throw new IOException("state file " + file + " lists a file without a path");
      }
      if (f.size() == null) {
        throw new IOException("state file " + file + ": '" + f.path() + "' has no size");
      }
      files.add(new FileState(f.path(), f.size(), digestOf(file, w.formatVersion(), f)));
    }
    try {
      StorePaths.checkFiles(
          expectedId, files.stream().map(f -> new StoreFile(f.path(), f.size())).toList());
    } catch (StoreException e) {
      throw new IOException("state file " + file + ": " + e.getMessage(), e);
    }
    return new ArtifactState(FORMAT_VERSION, w.artifactId(), files);
  }

  /** A file's recorded digest: format 1's {@code sha256}, format 2's {@code digest}, checked. */
  private static String digestOf(Path file, int version, WrittenFile f) throws IOException {
    String other = version == 1 ? f.digest() : f.sha256();
    if (other != null) {
      throw new IOException(
          "state file "
              + file
              + ": '"
              + f.path()
              + "' has a "
              + (version == 1 ? "digest" : "sha256")
              + " field, which format "
              + version
              + " does not have");
    }
    if (version == 1) {
      if (f.sha256() != null && !SHA256_HEX.matcher(f.sha256()).matches()) {
        throw new IOException(
            "state file " + file + ": sha256 of '" + f.path() + "' is not 64 lowercase hex digits");
      }
      return f.sha256();
    }
    if (f.digest() == null) {
      return null;
    }
    try {
      ContentDigest d = ContentDigest.parse(f.digest());
      if (!d.toString().equals(f.digest())) {
        throw new IllegalArgumentException(
            "'" + f.digest() + "' is not in its written form '" + d + "'");
      }
      return f.digest();
    } catch (IllegalArgumentException e) {
      throw new IOException(
          "state file " + file + ": digest of '" + f.path() + "' is not valid: " + e.getMessage(),
          e);
    }
  }
}
