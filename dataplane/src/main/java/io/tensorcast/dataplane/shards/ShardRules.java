package io.tensorcast.dataplane.shards;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * An ordered list of split rules: which tensors (a Java regular expression found in the name) are
 * cut along which dimension by the {@code tp} ranks, or held whole ({@code replicate}), and whether
 * a tensor belongs to one expert (group {@code expert} of the pattern) so that only the {@code ep}
 * ranks owning that expert hold it. The first rule whose pattern is found in a name decides.
 *
 * <p>Explicit rules (a TensorShardSet's {@code spec.rules}) must cover every tensor and each must
 * match one; a built-in set ({@link BuiltinRules}) replicates tensors it does not name.
 *
 * @param name for people: {@code "spec.rules (7 rules)"} or {@code "built-in Llama
 *     (LlamaForCausalLM)"}
 * @param rules the rules in order
 * @param explicit whether every tensor must be covered and every rule used
 */
public record ShardRules(String name, List<Rule> rules, boolean explicit) {

  /**
   * One rule.
   *
   * @param index position in the list (0-based), for messages ({@code spec.rules[index]})
   * @param pattern the compiled pattern, searched in names
   * @param splitDim dimension the tp ranks split, or {@code null} when replicated
   * @param expertOwned whether the pattern's group {@code expert} names the owning expert
   */
  public record Rule(int index, Pattern pattern, Integer splitDim, boolean expertOwned) {
    public Rule {
      Objects.requireNonNull(pattern, "pattern");
    }

    /** Whether the tp ranks hold the whole tensor. */
    public boolean replicate() {
      return splitDim == null;
    }

    /** Spelled as in a spec: {@code spec.rules[2] ('...', splitDim 1)}. */
    public String describe(String where) {
      return where
          + "["
          + index
          + "] ('"
          + pattern.pattern()
          + "', "
          + (splitDim == null ? "replicate" : "splitDim " + splitDim)
          + (expertOwned ? ", expertOwned" : "")
          + ")";
    }
  }

  public ShardRules {
    Objects.requireNonNull(name, "name");
    rules = List.copyOf(rules);
  }

  /**
   * Compiles rules as written in a spec.
   *
   * @param specs each rule: pattern, splitDim (null) and replicate (null), expertOwned (null)
   * @throws IllegalArgumentException naming {@code spec.rules[i]} and the problem: an invalid
   *     regular expression, neither or both of splitDim and replicate, an expert rule without the
   *     group {@code expert}
   */
  public static ShardRules explicit(List<Spec> specs) {
    List<Rule> out = new ArrayList<>();
    for (int i = 0; i < specs.size(); i++) {
      Spec s = specs.get(i);
      String where = "spec.rules[" + i + "]";
      Pattern p;
      try {
        p = Pattern.compile(Objects.requireNonNull(s.pattern(), where + ".pattern"));
      } catch (PatternSyntaxException e) {
        throw new IllegalArgumentException(
            where
                + ".pattern '"
                + s.pattern()
                + "' is not a valid Java regular expression: "
                + e.getDescription()
                + " near index "
                + e.getIndex());
      }
      boolean replicate = Boolean.TRUE.equals(s.replicate());
      if (replicate == (s.splitDim() != null)) {
        throw new IllegalArgumentException(
            where
                + " ('"
                + s.pattern()
                + "') must give exactly one of splitDim and replicate: true");
      }
      if (s.splitDim() != null && s.splitDim() < 0) {
        throw new IllegalArgumentException(
            where + ".splitDim " + s.splitDim() + " is negative; dimensions count from 0");
      }
      boolean expert = Boolean.TRUE.equals(s.expertOwned());
      if (expert && !p.pattern().contains("(?<" + EXPERT_GROUP + ">")) {
        throw new IllegalArgumentException(
            where
                + " ('"
                + s.pattern()
                + "') is expertOwned but has no named group (?<expert>[0-9]+) capturing the"
                + " expert index");
      }
      out.add(new Rule(i, p, replicate ? null : s.splitDim(), expert));
    }
    return new ShardRules("spec.rules (" + out.size() + " rules)", out, true);
  }

  /** The group of an expert-owned rule's pattern that captures the expert index. */
  public static final String EXPERT_GROUP = "expert";

  /**
   * A rule as a spec writes it.
   *
   * @param pattern regular expression
   * @param splitDim split dimension, or null
   * @param replicate true to replicate, or null
   * @param expertOwned true for expert tensors, or null
   */
  public record Spec(String pattern, Integer splitDim, Boolean replicate, Boolean expertOwned) {}

  /**
   * What decides a tensor.
   *
   * @param rule the first rule found in the name, or null (none: a built-in set replicates)
   * @param expert the expert index of an expert-owned rule, or -1
   */
  public record Match(Rule rule, int expert) {}

  /**
   * The rule of {@code tensorName}.
   *
   * @throws IllegalArgumentException when an expert-owned rule's group {@code expert} is not a
   *     non-negative integer in this name
   */
  public Optional<Match> match(String tensorName) {
    for (Rule r : rules) {
      Matcher m = r.pattern().matcher(tensorName);
      if (m.find()) {
        int expert = -1;
        if (r.expertOwned()) {
          String g = m.group(EXPERT_GROUP);
          try {
            expert = g == null ? -1 : Integer.parseInt(g);
          } catch (NumberFormatException e) {
            expert = -1;
          }
          if (expert < 0) {
            throw new IllegalArgumentException(
                r.describe(explicit ? "spec.rules" : name)
                    + " matches tensor \""
                    + tensorName
                    + "\" but its group 'expert' captured '"
                    + g
                    + "', not an expert index (a non-negative integer)");
          }
        }
        return Optional.of(new Match(r, expert));
      }
    }
    return Optional.empty();
  }
}
