package io.tensorcast.dataplane.format.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Index files parsed strictly, and checked against the shards they name. */
class ShardIndexTest {
  private static final String INDEX = "model.safetensors.index.json";

  private static ShardIndex parse(String json) throws IndexFormatException {
    return ShardIndex.parse(INDEX, json.getBytes(StandardCharsets.UTF_8), 1000);
  }

  private static IndexFormatException refused(String json) {
    IndexFormatException e = catchThrowableOfType(() -> parse(json), IndexFormatException.class);
    assertThat(e).as("refused").isNotNull();
    assertThat(e).hasMessageStartingWith(INDEX + ": ");
    return e;
  }

  @Test
  void aValidIndexIsRead() throws Exception {
    ShardIndex i =
        ShardIndex.parse(
            "sub/" + INDEX,
            ("{\"metadata\": {\"total_size\": 24, \"format\": \"pt\"},"
                    + " \"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-2.safetensors\","
                    + " \"c\": \"m-1.safetensors\"}}")
                .getBytes(StandardCharsets.UTF_8),
            10);

    assertThat(i.totalSize()).hasValue(24);
    assertThat(i.weightMap())
        .containsExactly(
            Map.entry("a", "m-1.safetensors"),
            Map.entry("b", "m-2.safetensors"),
            Map.entry("c", "m-1.safetensors"));
    assertThat(i.shardPaths()).containsExactly("sub/m-1.safetensors", "sub/m-2.safetensors");
  }

  @Test
  void mergeConflictMarkersAreNamedWithTheirLine() {
    String json =
        "{\n"
            + "  \"metadata\": {\"total_size\": 24},\n"
            + "<<<<<<< HEAD\n"
            + "  \"weight_map\": {\"a\": \"m-1.safetensors\"}\n"
            + "=======\n"
            + "  \"weight_map\": {\"a\": \"m-2.safetensors\"}\n"
            + ">>>>>>> upstream/main\n"
            + "}\n";

    IndexFormatException e = refused(json);

    assertThat(e.rule()).isEqualTo(IndexFormatException.MERGE_CONFLICT);
    assertThat(e)
        .hasMessageContaining(
            "is not JSON: line 3, column 1 holds the git merge-conflict marker \"<<<<<<< HEAD\"");
  }

  @Test
  void invalidJsonIsNamedWithLineAndColumn() {
    IndexFormatException e = refused("{\n  \"weight_map\": {\"a\": \"m.safetensors\",}\n}");

    assertThat(e.rule()).isEqualTo(IndexFormatException.INVALID_JSON);
    assertThat(e)
        .hasMessageContaining("is not valid JSON")
        .hasMessageContaining("at line 2, column");
  }

  /** Found by the format fuzzer: bytes that looked like UCS-4 escaped as an I/O error. */
  @Test
  void bytesThatAreNotUtf8AreRefusedAsInvalidJson() {
    byte[] json = {0, 0, 1, 0, 't', 'a', '"', ':', ' ', '{', '}'};

    IndexFormatException e =
        catchThrowableOfType(() -> ShardIndex.parse(INDEX, json, 10), IndexFormatException.class);
    IndexFormatException latin1 =
        catchThrowableOfType(
            () -> ShardIndex.parse(INDEX, new byte[] {'{', '"', (byte) 0xe9, '"', '}'}, 10),
            IndexFormatException.class);

    assertThat(e.rule()).isEqualTo(IndexFormatException.INVALID_JSON);
    assertThat(e).hasMessageContaining("is not valid JSON");
    assertThat(latin1.rule()).isEqualTo(IndexFormatException.INVALID_JSON);
    assertThat(latin1).hasMessageContaining("is not valid UTF-8");
  }

  @Test
  void aRepeatedTensorIsRefused() {
    IndexFormatException e =
        refused("{\"weight_map\": {\"a\": \"m-1.safetensors\", \"a\": \"m-2.safetensors\"}}");

    assertThat(e.rule()).isEqualTo(IndexFormatException.DUPLICATE_KEY);
    assertThat(e).hasMessageContaining("Duplicate field 'a'").hasMessageContaining("line 1");
  }

  @Test
  void anIndexWithoutAWeightMapIsRefused() {
    IndexFormatException e = refused("{\"metadata\": {\"total_size\": 1}}");

    assertThat(e.rule()).isEqualTo(IndexFormatException.INVALID_STRUCTURE);
    assertThat(e).hasMessageContaining("has no \"weight_map\" object");
  }

  @ParameterizedTest
  @ValueSource(strings = {"../x.safetensors", "/etc/passwd", "a/../../b", "", "a\\\\b", "./a"})
  void shardNamesOutsideTheIndexFolderAreRefused(String shard) {
    IndexFormatException e = refused("{\"weight_map\": {\"w\": \"" + shard + "\"}}");

    assertThat(e.rule()).isEqualTo(IndexFormatException.UNSAFE_SHARD_PATH);
    assertThat(e).hasMessageContaining("weight_map[\"w\"] names shard");
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {"-1", "1.5", "\"12\"", "true", "1e40"})
  void aTotalSizeThatIsNoByteCountIsRefused(String value) {
    IndexFormatException e =
        refused("{\"metadata\": {\"total_size\": " + value + "}, \"weight_map\": {}}");

    assertThat(e.rule()).isEqualTo(IndexFormatException.INVALID_STRUCTURE);
    assertThat(e)
        .hasMessageContaining("\"total_size\" is ")
        .hasMessageContaining("not a byte count");
  }

  @Test
  void aTotalSizeWrittenAsAWholeFloatIsRead() throws Exception {
    assertThat(parse("{\"metadata\": {\"total_size\": 2.4E1}, \"weight_map\": {}}").totalSize())
        .hasValue(24);
  }

  @Test
  void moreEntriesThanTheLimitAreRefused() {
    StringBuilder sb = new StringBuilder("{\"weight_map\": {");
    for (int i = 0; i < 1001; i++) {
      sb.append(i == 0 ? "" : ",").append("\"t").append(i).append("\": \"m.safetensors\"");
    }
    IndexFormatException e = refused(sb.append("}}").toString());

    assertThat(e.rule()).isEqualTo(IndexFormatException.LIMIT_EXCEEDED);
    assertThat(e).hasMessageContaining("\"weight_map\" has more than 1000 entries (--max-tensors)");
  }

  @Test
  void aLargeIndexIsRefusedBeforeItIsRead() {
    IndexFormatException e =
        catchThrowableOfType(
            () -> ShardIndex.checkSize(INDEX, 1L << 30, 64L << 20), IndexFormatException.class);

    assertThat(e.rule()).isEqualTo(IndexFormatException.TOO_LARGE);
    assertThat(e).hasMessageContaining("is 1073741824 bytes, more than the limit of 67108864");
  }

  @ParameterizedTest
  @CsvSource({
    "model.safetensors.index.json, true",
    "pytorch_model.bin.index.json, true",
    "unet/diffusion_pytorch_model.safetensors.index.json, true",
    "unet/diffusion_pytorch_model.safetensors.index.fp16.json, true",
    "model.safetensors, false",
    "config.json, false",
    "tf_model.h5.index.json, false"
  })
  void indexFilesAreRecognisedByName(String path, boolean index) {
    assertThat(ShardIndex.isIndexPath(path)).isEqualTo(index);
  }

  // ------------------------------------------------------------------------- check

  private static final Map<String, IndexCheck.Shard> SHARDS = new LinkedHashMap<>();

  static {
    SHARDS.put("m-1.safetensors", new IndexCheck.Shard(Map.of("a", 8L, "c", 4L), 12));
    SHARDS.put("m-2.safetensors", new IndexCheck.Shard(Map.of("b", 12L), 12));
  }

  private static IndexCheck.Artifact artifact(Set<String> listed, Set<String> excluded) {
    return new IndexCheck.Artifact(
        listed::contains,
        excluded::contains,
        "include=[] exclude=[m-2*]",
        SHARDS::get,
        name ->
            SHARDS.entrySet().stream()
                .filter(e -> e.getValue().tensorBytes().containsKey(name))
                .map(Map.Entry::getKey)
                .findFirst()
                .orElse(null));
  }

  private static IndexFormatException checkRefused(String json, IndexCheck.Artifact a) {
    IndexFormatException e =
        catchThrowableOfType(() -> IndexCheck.check(parse(json), a), IndexFormatException.class);
    assertThat(e).as("refused").isNotNull();
    return e;
  }

  private static final Set<String> BOTH = Set.of("m-1.safetensors", "m-2.safetensors");

  @Test
  void anIndexThatDescribesItsShardsPasses() throws Exception {
    IndexCheck.check(
        parse(
            "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"a\": \"m-1.safetensors\","
                + " \"b\": \"m-2.safetensors\", \"c\": \"m-1.safetensors\"}}"),
        artifact(BOTH, Set.of()));
  }

  @Test
  void aShardMissingFromTheSourceIsNamed() {
    IndexFormatException e =
        checkRefused(
            "{\"weight_map\": {\"a\": \"m-1.safetensors\", \"z\": \"m-9.safetensors\"}}",
            artifact(BOTH, Set.of()));

    assertThat(e.rule()).isEqualTo(IndexFormatException.MISSING_SHARD);
    assertThat(e)
        .hasMessageContaining("names shard \"m-9.safetensors\", which the source does not hold");
  }

  @Test
  void aShardLeftOutByTheFiltersIsNamedWithTheFilters() {
    IndexFormatException e =
        checkRefused(
            "{\"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-2.safetensors\"}}",
            artifact(Set.of("m-1.safetensors"), Set.of("m-2.safetensors")));

    assertThat(e.rule()).isEqualTo(IndexFormatException.EXCLUDED_SHARD);
    assertThat(e)
        .hasMessageContaining(
            "names shard \"m-2.safetensors\", which the include/exclude filters leave out"
                + " (include=[] exclude=[m-2*]); include the shard, or exclude the index too");
  }

  @Test
  void aTensorTheShardDoesNotDeclareIsNamedWithWhereItIs() {
    IndexFormatException e =
        checkRefused(
            "{\"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-1.safetensors\"}}",
            artifact(BOTH, Set.of()));

    assertThat(e.rule()).isEqualTo(IndexFormatException.TENSOR_NOT_IN_SHARD);
    assertThat(e)
        .hasMessageContaining(
            "maps tensor \"b\" to \"m-1.safetensors\", which does not declare it; it is in"
                + " \"m-2.safetensors\"");
  }

  @Test
  void aTensorDeclaredByTwoShardsIsRefused() {
    Map<String, IndexCheck.Shard> shards =
        Map.of(
            "m-1.safetensors", new IndexCheck.Shard(Map.of("a", 8L), 8),
            "m-2.safetensors", new IndexCheck.Shard(Map.of("a", 8L), 8));
    IndexFormatException e =
        checkRefused(
            "{\"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-2.safetensors\"}}",
            new IndexCheck.Artifact(BOTH::contains, s -> false, "", shards::get, n -> null));

    assertThat(e.rule()).isEqualTo(IndexFormatException.DUPLICATE_TENSOR);
    assertThat(e)
        .hasMessageContaining(
            "its shards \"m-1.safetensors\" and \"m-2.safetensors\" both declare tensor \"a\"");
  }

  @Test
  void aTotalSizeThatDisagreesWithTheHeadersIsRefused() {
    IndexFormatException e =
        checkRefused(
            "{\"metadata\": {\"total_size\": 25}, \"weight_map\": {\"a\": \"m-1.safetensors\","
                + " \"b\": \"m-2.safetensors\", \"c\": \"m-1.safetensors\"}}",
            artifact(BOTH, Set.of()));

    assertThat(e.rule()).isEqualTo(IndexFormatException.TOTAL_SIZE_MISMATCH);
    assertThat(e)
        .hasMessageContaining(
            "\"metadata\".\"total_size\" is 25 bytes but the 3 tensors it maps hold 24 bytes by"
                + " their shards' headers (a difference of 1)");
  }

  @Test
  void aTotalSizeCountingSharedStoragesOnceIsAccepted() throws Exception {
    // A torch shard with tied weights: two 8-byte tensors over one 8-byte storage.
    Map<String, IndexCheck.Shard> shards =
        Map.of("pytorch_model.bin", new IndexCheck.Shard(Map.of("emb", 8L, "head", 8L), 8));
    IndexCheck.check(
        parse(
            "{\"metadata\": {\"total_size\": 8}, \"weight_map\": {\"emb\": \"pytorch_model.bin\","
                + " \"head\": \"pytorch_model.bin\"}}"),
        new IndexCheck.Artifact(
            Set.of("pytorch_model.bin")::contains, s -> false, "", shards::get, n -> null));
  }
}
