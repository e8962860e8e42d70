package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.format.FormatLimits;
import picocli.CommandLine.Option;

/**
 * The format readers' bounds ({@link FormatLimits}) as {@code --max-…} flags, shared by {@code
 * load}, {@code inspect} and {@code serve}. Byte bounds take Kubernetes quantities ({@code 64Mi}).
 */
final class FormatLimitArgs {
  @Option(
      names = "--max-header-bytes",
      paramLabel = "BYTES",
      description =
          "Longest safetensors header (default "
              + FormatLimits.DEFAULT_MAX_HEADER_BYTES
              + ", the reference reader's cap).")
  String maxHeaderBytes;

  @Option(
      names = "--max-tensors",
      paramLabel = "N",
      description =
          "Most tensors per file: safetensors header entries, torch tensors, index weight_map"
              + " entries (default "
              + FormatLimits.DEFAULT_MAX_TENSORS
              + ").")
  Integer maxTensors;

  @Option(
      names = "--max-rank",
      paramLabel = "N",
      description =
          "Most dimensions of one tensor (default " + FormatLimits.DEFAULT_MAX_RANK + ").")
  Integer maxRank;

  @Option(
      names = "--max-pickle-bytes",
      paramLabel = "BYTES",
      description =
          "Longest torch pickle (data.pkl) (default "
              + FormatLimits.DEFAULT_MAX_PICKLE_BYTES
              + ").")
  String maxPickleBytes;

  @Option(
      names = "--max-pickle-objects",
      paramLabel = "N",
      description =
          "Most values one torch pickle builds, and steps of the walk over its objects (default "
              + FormatLimits.DEFAULT_MAX_PICKLE_OBJECTS
              + ").")
  Integer maxPickleObjects;

  @Option(
      names = "--max-nesting",
      paramLabel = "N",
      description =
          "Deepest nesting of a torch checkpoint's objects (default "
              + FormatLimits.DEFAULT_MAX_NESTING
              + ").")
  Integer maxNesting;

  @Option(
      names = "--max-reuse",
      paramLabel = "N",
      description =
          "Most paths to one shared torch container or tensor (memo reuse), and most times the"
              + " listed tensors' bytes may exceed their storages' (default "
              + FormatLimits.DEFAULT_MAX_REUSE
              + ").")
  Integer maxReuse;

  @Option(
      names = "--max-zip-entries",
      paramLabel = "N",
      description =
          "Most entries in a torch zip archive's directory (default "
              + FormatLimits.DEFAULT_MAX_ZIP_ENTRIES
              + ").")
  Integer maxZipEntries;

  @Option(
      names = "--max-zip-ratio",
      paramLabel = "N",
      description =
          "Most inflated bytes per compressed byte a compressed zip entry over 1 MiB may declare"
              + " (default "
              + FormatLimits.DEFAULT_MAX_ZIP_RATIO
              + ").")
  Integer maxZipRatio;

  @Option(
      names = "--max-index-bytes",
      paramLabel = "BYTES",
      description =
          "Longest index file (*.safetensors.index.json, *.bin.index.json) (default "
              + FormatLimits.DEFAULT_MAX_INDEX_BYTES
              + ").")
  String maxIndexBytes;

  /**
   * @throws IllegalArgumentException naming the flag whose value is out of range or not a number
   */
  FormatLimits limits() {
    FormatLimits d = FormatLimits.DEFAULT;
    return new FormatLimits(
        maxHeaderBytes == null
            ? d.maxHeaderBytes()
            : Quantities.bytes(maxHeaderBytes, "--max-header-bytes"),
        maxTensors == null ? d.maxTensors() : maxTensors,
        maxRank == null ? d.maxRank() : maxRank,
        maxPickleBytes == null
            ? d.maxPickleBytes()
            : Quantities.bytes(maxPickleBytes, "--max-pickle-bytes"),
        maxPickleObjects == null ? d.maxPickleObjects() : maxPickleObjects,
        maxNesting == null ? d.maxNesting() : maxNesting,
        maxReuse == null ? d.maxReuse() : maxReuse,
        maxZipEntries == null ? d.maxZipEntries() : maxZipEntries,
        maxZipRatio == null ? d.maxZipRatio() : maxZipRatio,
        maxIndexBytes == null
            ? d.maxIndexBytes()
            : Quantities.bytes(maxIndexBytes, "--max-index-bytes"));
  }
}
