package io.tensorcast.dataplane.store;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The per-artifact state file {@code <root>/.tensorcast/<artifactId>.json}: the artifact's files
 * and, for each complete file, its SHA-256. Kept outside the artifact directory so that directory
 * holds exactly the artifact's files. Written atomically (temporary file, then rename).
 *
 * @param formatVersion {@value #FORMAT_VERSION}
 * @param artifactId the artifact id; must equal the file's name
 * @param files every file of the artifact, in allocation order
 */
record ArtifactState(int formatVersion, String artifactId, List<FileState> files) {
  static final int FORMAT_VERSION = 1;
  private static final Pattern SHA256_HEX = Pattern.compile("[0-9a-f]{64}");

  /**
   * @param sha256 lowercase hex SHA-256 once the file is complete; null while it is not
   */
  record FileState(String path, long size, String sha256) {
    boolean complete() {
      return sha256 != null;
    }
  }

  /**
   * The reader, built on first read only: a cold load writes its state file while the bytes wait
   * for the allocation, and the data-binding classes (~600) take a few hundred milliseconds to load
   * on a cold JVM; writing needs only the streaming generator.
   */
  private static final class Reader {
    static final ObjectMapper JSON =
        new ObjectMapper()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .enable(DeserializationFeature.FAIL_ON_MISSING_CREATOR_PROPERTIES);
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

  /** The file's bytes: the fields {@link #read} binds, pretty-printed, written by the generator. */
  static byte[] toJson(ArtifactState state) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = WRITER.createGenerator(out)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeNumberField("formatVersion", state.formatVersion());
      g.writeStringField("artifactId", state.artifactId());
      g.writeArrayFieldStart("files");
      for (FileState f : state.files()) {
        g.writeStartObject();
        g.writeStringField("path", f.path());
        g.writeNumberField("size", f.size());
        g.writeStringField("sha256", f.sha256());
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
    ArtifactState s;
    try {
      s = Reader.JSON.readValue(file.toFile(), ArtifactState.class);
    } catch (IOException e) {
      throw new IOException("state file " + file + " is not valid: " + e.getMessage(), e);
    }
    if (s.formatVersion() != FORMAT_VERSION) {
      throw new IOException(
          "state file " + file + " has formatVersion " + s.formatVersion() + ", expected 1");
    }
    if (!s.artifactId().equals(expectedId)) {
      throw new IOException(
          "state file " + file + " names artifact '" + s.artifactId() + "', not " + expectedId);
    }
    for (FileState f : s.files()) {
      if (f == null || f.path() == null) {
        throw new IOException("state file " + file + " lists a file without a path");
      }
      if (f.sha256() != null && !SHA256_HEX.matcher(f.sha256()).matches()) {
        throw new IOException(
            "state file " + file + ": sha256 of '" + f.path() + "' is not 64 lowercase hex digits");
      }
    }
    try {
      StorePaths.checkFiles(
          expectedId, s.files().stream().map(f -> new StoreFile(f.path(), f.size())).toList());
    } catch (StoreException e) {
      throw new IOException("state file " + file + ": " + e.getMessage(), e);
    }
    return s;
  }
}
