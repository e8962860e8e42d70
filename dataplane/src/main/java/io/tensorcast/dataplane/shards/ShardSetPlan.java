package io.tensorcast.dataplane.shards;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.tensor.RangeCopy;
import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.ShardLayoutException;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.StoredTensor;
import io.tensorcast.dataplane.tensor.TensorIoException;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlan;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The plan of a whole TensorShardSet layout, from the source's tensors (names, dtypes, shapes and
 * where their bytes are), the split rules and the parallelism: which tensors every rank's file
 * holds, their shapes and offsets, each layout's {@code manifest.json}, and for any rank the byte
 * ranges of the source that fill its file. Pure: reads no bytes.
 *
 * <p>Per tensor, in order: the rule (first found in the name; none under explicit rules is an
 * error, under a built-in set the tensor is replicated); the owning expert of an expert-owned rule
 * ({@code ep} rank {@code expert / (experts / ep)} holds it); the layer index ({@code layers.N.},
 * {@code h.N.} or {@code blocks.N.}: stage {@code N × pp / layers} holds it; a tensor outside the
 * layers is held by every stage); then the tp slice along the split dim, or the whole tensor.
 *
 * <p>Every rule is checked against every rank before anything is loaded ({@link #plan} throws
 * {@link ShardPlanException}): a split dim outside a tensor, a dimension that does not divide by
 * tp, an explicit rule that matches nothing, a tensor no explicit rule covers, an ep size that does
 * not divide the expert count, a pp size above the layer count.
 *
 * <p>Rank file: {@code <layout dir>rank_<tp rank, 5 digits>.safetensors}, tensors in the reference
 * writer's order, {@code __metadata__} {@code format=pt}, {@code tp_rank}, {@code tp_size}, {@code
 * rank}, {@code world_size}, {@code coordinates} and, when scope axes exist, {@code layout_axes}.
 * The layout directory is empty for pure tp layouts, else e.g. {@code ep1/} (see {@link
 * Parallelism#layoutDirectory}); its {@code manifest.json} lists the layout's tensors with global
 * shape, dtype, split dim and shard count.
 */
public final class ShardSetPlan {

  private static final Pattern LAYER =
      Pattern.compile("(?:^|\\.)(?:layers|h|blocks)\\.([0-9]+)\\.");

  /**
   * One source tensor and what the rules decided for it.
   *
   * @param tensor the source tensor (one whole piece)
   * @param rule the deciding rule, or null (replicated under a built-in set)
   * @param splitDim split dim, or null when replicated
   * @param expert owning expert, or -1
   * @param layer layer index, or -1
   */
  public record Decision(
      StoredTensor tensor, ShardRules.Rule rule, Integer splitDim, int expert, int layer) {}

  /**
   * One tensor of one rank file.
   *
   * @param decision what the rules decided
   * @param info name, dtype, local shape and data offsets in the rank file
   */
  public record Slice(Decision decision, TensorInfo info) {}

  /**
   * What one rank stores.
   *
   * @param rank global rank
   * @param coordinates its position on every axis
   * @param layoutDirectory e.g. {@code ""} or {@code "ep1/"}
   * @param file the rank file's path relative to the set's directory
   * @param header the rank file's header bytes (prefix included)
   * @param slices the tensors, in file order
   * @param manifest the manifest of the rank's layout
   * @param manifestBytes the manifest's JSON
   */
  public record RankFile(
      int rank,
      Parallelism.Coordinates coordinates,
      String layoutDirectory,
      String file,
      byte[] header,
      List<Slice> slices,
      ShardManifest manifest,
      byte[] manifestBytes) {

    /** Size of the rank file: header plus tensor bytes. */
    public long fileBytes() {
      return header.length + tensorBytes();
    }

    /** Tensor bytes of the rank file. */
    public long tensorBytes() {
      return slices.isEmpty() ? 0 : slices.get(slices.size() - 1).info().end();
    }

    /** Path of the layout's manifest relative to the set's directory. */
    public String manifestFile() {
      return layoutDirectory + ShardManifest.FILE_NAME;
    }
  }

  /**
   * One byte range the rank file needs from the source.
   *
   * @param rank the rank
   * @param sourceFile source file
   * @param sourceOffset absolute offset in the source file
   * @param length bytes
   * @param file the rank file (relative path)
   * @param fileOffset absolute offset in the rank file
   * @param tensor the tensor's name
   */
  public record Need(
      int rank,
      String sourceFile,
      long sourceOffset,
      long length,
      String file,
      long fileOffset,
      String tensor) {}

  private final Parallelism parallelism;
  private final ShardRules rules;
  private final StoredLayout source;
  private final List<Decision> decisions;
  private final int experts;
  private final int layers;
  private final Map<Integer, RankFile> cache = new HashMap<>();

  private ShardSetPlan(
      Parallelism parallelism,
      ShardRules rules,
      StoredLayout source,
      List<Decision> decisions,
      int experts,
      int layers) {
    this.parallelism = parallelism;
    this.rules = rules;
    this.source = source;
    this.decisions = decisions;
    this.experts = experts;
    this.layers = layers;
  }

  /**
   * Plans and checks the layout for every rank.
   *
   * @param tensors the source's tensors, each one whole piece, in source order
   * @throws ShardPlanException naming the tensor, rule and numbers when anything does not fit
   */
  public static ShardSetPlan plan(
      List<StoredTensor> tensors, ShardRules rules, Parallelism parallelism)
      throws ShardPlanException {
    if (tensors.isEmpty()) {
      throw new ShardPlanException(
          Reason.InvalidShardRules,
          "the artifact has no tensors (no safetensors or torch checkpoint files); nothing to"
              + " shard");
    }
    StoredLayout layout;
    try {
      layout = StoredLayout.ofTensors(tensors);
    } catch (ShardLayoutException e) {
      throw new ShardPlanException(Reason.InvalidShardRules, e.getMessage());
    }
    List<Decision> decisions = new ArrayList<>();
    List<String> uncovered = new ArrayList<>();
    boolean[] used = new boolean[rules.rules().size()];
    TreeSet<Integer> expertIndexes = new TreeSet<>();
    int maxLayer = -1;
    for (StoredTensor t : tensors) {
      Optional<ShardRules.Match> m;
      try {
        m = rules.match(t.name());
      } catch (IllegalArgumentException e) {
        throw new ShardPlanException(Reason.InvalidShardRules, e.getMessage());
      }
      if (m.isEmpty() && rules.explicit()) {
        uncovered.add(t.name());
        continue;
      }
      ShardRules.Rule rule = m.map(ShardRules.Match::rule).orElse(null);
      if (rule != null) {
        used[rule.index()] = true;
      }
      Integer dim = rule == null ? null : rule.splitDim();
      long[] g = t.globalShape();
      if (dim != null && dim >= g.length) {
        throw new ShardPlanException(
            Reason.SplitDimOutOfRange,
            "tensor \""
                + t.name()
                + "\" "
                + t.dtype()
                + Arrays.toString(g)
                + " has "
                + g.length
                + (g.length == 1 ? " dimension" : " dimensions")
                + " but "
                + rule.describe(where(rules))
                + " splits dimension "
                + dim
                + "; use a dimension in [0, "
                + g.length
                + ") or replicate: true");
      }
      if (dim != null && g[dim] % parallelism.tp() != 0) {
        throw new ShardPlanException(
            Reason.NotDivisible,
            "tensor \""
                + t.name()
                + "\" "
                + t.dtype()
                + Arrays.toString(g)
                + ": dimension "
                + dim
                + " = "
                + g[dim]
                + " does not split into tp "
                + parallelism.tp()
                + " equal slices ("
                + g[dim]
                + " = "
                + parallelism.tp()
                + " × "
                + g[dim] / parallelism.tp()
                + " + "
                + g[dim] % parallelism.tp()
                + "), by "
                + rule.describe(where(rules))
                + "; choose a tp that divides "
                + g[dim]
                + " or another split dim");
      }
      int expert = m.map(ShardRules.Match::expert).orElse(-1);
      if (expert >= 0) {
        expertIndexes.add(expert);
      }
      Matcher lm = LAYER.matcher(t.name());
      int layer = -1;
      if (lm.find()) {
        try {
          layer = Integer.parseInt(lm.group(1));
        } catch (NumberFormatException e) {
          layer = -1;
        }
        maxLayer = Math.max(maxLayer, layer);
      }
      decisions.add(new Decision(t, rule, dim, expert, layer));
    }
    if (!uncovered.isEmpty()) {
      throw new ShardPlanException(
          Reason.TensorNotCovered,
          uncovered.size()
              + " tensor"
              + (uncovered.size() == 1 ? "" : "s")
              + " match no rule of spec.rules: "
              + names(uncovered)
              + "; add a rule (splitDim or replicate: true) for "
              + (uncovered.size() == 1 ? "it" : "them")
              + ", or leave spec.rules empty for the built-in set");
    }
    if (rules.explicit()) {
      for (ShardRules.Rule r : rules.rules()) {
        if (!used[r.index()]) {
          throw new ShardPlanException(
              Reason.RuleMatchesNoTensor,
              r.describe("spec.rules")
                  + " matches no tensor of the artifact ("
                  + tensors.size()
                  + " tensors, e.g. "
                  + names(tensors.stream().map(StoredTensor::name).toList())
                  + ") or every tensor it would match is taken by an earlier rule; fix or remove"
                  + " it");
        }
      }
    }
    int experts = expertIndexes.isEmpty() ? 0 : expertIndexes.last() + 1;
    if (parallelism.ep() > 1) {
      if (experts == 0) {
        throw new ShardPlanException(
            Reason.ExpertsNotDivisible,
            "ep "
                + parallelism.ep()
                + " needs expert tensors to share out, but no tensor matches an expertOwned rule of "
                + rules.name()
                + "; set ep to 1 or add expertOwned rules");
      }
      if (experts % parallelism.ep() != 0) {
        throw new ShardPlanException(
            Reason.ExpertsNotDivisible,
            "the artifact has "
                + experts
                + " experts (indexes 0.."
                + (experts - 1)
                + " in the expert tensors' names) which do not divide into ep "
                + parallelism.ep()
                + " equal groups ("
                + experts
                + " = "
                + parallelism.ep()
                + " × "
                + experts / parallelism.ep()
                + " + "
                + experts % parallelism.ep()
                + "); choose an ep that divides "
                + experts);
      }
    }
    int layers = maxLayer + 1;
    if (parallelism.pp() > 1 && layers < parallelism.pp()) {
      throw new ShardPlanException(
          Reason.InvalidShardRules,
          "pp "
              + parallelism.pp()
              + " exceeds the "
              + layers
              + " layers found in the tensor names (layers.N., h.N. or blocks.N.); every stage needs"
              + " at least one layer");
    }
    ShardSetPlan plan = new ShardSetPlan(parallelism, rules, layout, decisions, experts, layers);
    for (int r = 0; r < parallelism.worldSize(); r++) {
      plan.rankFile(r); // every rank's header and sub-byte alignment is checked before loading
    }
    return plan;
  }

  private static String where(ShardRules rules) {
    return rules.explicit() ? "spec.rules" : rules.name();
  }

  private static String names(List<String> names) {
    List<String> shown = names.stream().limit(5).map(n -> "\"" + n + "\"").toList();
    return String.join(", ", shown) + (names.size() > 5 ? ", ... (" + names.size() + ")" : "");
  }

  public Parallelism parallelism() {
    return parallelism;
  }

  public ShardRules rules() {
    return rules;
  }

  /** Number of experts found (0 without expert-owned tensors). */
  public int experts() {
    return experts;
  }

  /** Number of layers found (0 when no name has a layer index). */
  public int layers() {
    return layers;
  }

  /** Whether rank {@code c} holds the tensor decided by {@code d}. */
  boolean holds(Parallelism.Coordinates c, Decision d) {
    if (d.expert() >= 0 && d.expert() / (experts / parallelism.ep()) != c.ep()) {
      return false;
    }
    return parallelism.pp() == 1
        || d.layer() < 0
        || d.layer() * parallelism.pp() / layers == c.pp();
  }

  /**
   * The file of {@code rank}.
   *
   * @throws IllegalArgumentException if the rank is outside the world
   */
  public synchronized RankFile rankFile(int rank) throws ShardPlanException {
    RankFile cached = cache.get(rank);
    if (cached != null) {
      return cached;
    }
    Parallelism.Coordinates c = parallelism.coordinates(rank);
    List<TensorDeclaration> decls = new ArrayList<>();
    Map<String, Decision> byName = new HashMap<>();
    Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
    for (Decision d : decisions) {
      if (!holds(c, d)) {
        continue;
      }
      long[] g = d.tensor().globalShape();
      long[] local = g.clone();
      if (d.splitDim() != null) {
        local[d.splitDim()] /= parallelism.tp();
      }
      decls.add(new TensorDeclaration(d.tensor().name(), d.tensor().dtype(), local));
      byName.put(d.tensor().name(), d);
      entries.put(
          d.tensor().name(),
          new ShardManifest.Entry(
              g, d.tensor().dtype(), d.splitDim(), d.splitDim() == null ? 1 : parallelism.tp()));
    }
    List<TensorDeclaration> ordered = SafetensorsWriter.referenceOrder(decls);
    Map<String, String> metadata = new LinkedHashMap<>();
    metadata.put("format", "pt");
    metadata.put("tp_rank", Integer.toString(c.tp()));
    metadata.put("tp_size", Integer.toString(parallelism.tp()));
    metadata.put("rank", Integer.toString(rank));
    metadata.put("world_size", Integer.toString(parallelism.worldSize()));
    metadata.put("coordinates", parallelism.describe(c));
    if (!parallelism.scopeAxes(c).isEmpty()) {
      metadata.put("layout_axes", new TensorParallelism(parallelism.scopeAxes(c)).toString());
    }
    SafetensorsHeader header;
    byte[] headerBytes;
    try {
      header = SafetensorsWriter.layout(ordered, metadata);
      headerBytes = SafetensorsWriter.headerBytes(ordered, metadata);
    } catch (IllegalArgumentException e) {
      throw new ShardPlanException(
          Reason.InvalidShardRules, "rank " + rank + ": " + e.getMessage());
    }
    List<Slice> slices = new ArrayList<>();
    Map<String, ShardManifest.Entry> orderedEntries = new LinkedHashMap<>();
    for (TensorInfo info : header.tensors()) {
      slices.add(new Slice(byName.get(info.name()), info));
      orderedEntries.put(info.name(), entries.get(info.name()));
      checkAligned(byName.get(info.name()), c);
    }
    ShardManifest manifest =
        new ShardManifest(
            parallelism.tp(),
            ShardManifest.FORMAT_SAFETENSORS,
            List.copyOf(orderedEntries.keySet()),
            orderedEntries,
            parallelism.scopeAxes(c));
    String dir = parallelism.layoutDirectory(c);
    RankFile f =
        new RankFile(
            rank,
            c,
            dir,
            dir + ShardManifest.rankFileName(c.tp()),
            headerBytes,
            List.copyOf(slices),
            manifest,
            manifest.toJson());
    cache.put(rank, f);
    return f;
  }

  private void checkAligned(Decision d, Parallelism.Coordinates c) throws ShardPlanException {
    if (d.splitDim() == null) {
      return;
    }
    try {
      TensorReadPlanner.plan(source, d.tensor().name(), target(d, c));
    } catch (TensorIoException e) {
      throw new ShardPlanException(Reason.NotDivisible, e.getMessage());
    }
  }

  private ReadTarget target(Decision d, Parallelism.Coordinates c) {
    return d.splitDim() == null
        ? ReadTarget.full()
        : ReadTarget.shard(TensorParallelism.tp(c.tp(), parallelism.tp(), d.splitDim()));
  }

  /** Bytes each rank's node stores for it: the rank file plus its layout's manifest. */
  public List<Long> rankFileBytes() throws ShardPlanException {
    List<Long> out = new ArrayList<>();
    for (int r = 0; r < parallelism.worldSize(); r++) {
      RankFile f = rankFile(r);
      out.add(f.fileBytes() + f.manifestBytes().length);
    }
    return out;
  }

  /** Tensor bytes of each rank's file. */
  public List<Long> rankTensorBytes() throws ShardPlanException {
    List<Long> out = new ArrayList<>();
    for (int r = 0; r < parallelism.worldSize(); r++) {
      out.add(rankFile(r).tensorBytes());
    }
    return out;
  }

  /**
   * The source byte ranges that fill {@code rank}'s file, per tensor in file order; each maps
   * contiguous source bytes to contiguous rank-file bytes (one per row for a slice along a later
   * dimension).
   */
  public List<Need> needs(int rank) throws ShardPlanException {
    RankFile f = rankFile(rank);
    List<Need> out = new ArrayList<>();
    long base = f.header().length;
    for (Slice s : f.slices()) {
      TensorReadPlan p =
          TensorReadPlanner.plan(source, s.info().name(), target(s.decision(), f.coordinates()));
      for (RangeCopy rc : p.copies()) {
        out.add(
            new Need(
                rank,
                rc.file(),
                rc.sourceOffset(),
                rc.length(),
                f.file(),
                base + s.info().begin() + rc.destinationOffset(),
                s.info().name()));
      }
    }
    return out;
  }

  /**
   * The read target of slice {@code s} of rank file {@code f}: the tp shard along the split dim
   * (e.g. {@code tp:1/4@0}), or the whole tensor.
   */
  public ReadTarget target(RankFile f, Slice s) {
    return target(s.decision(), f.coordinates());
  }
}
