package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Checks a JSON value against the OpenAPI v3 subset our generated CRD uses (type, properties,
 * required, additionalProperties, items, enum, pattern, minimum, int-or-string), the way the API
 * server validates and prunes: a field the schema does not name is reported as unknown. Patterns
 * are searched, not matched, as Kubernetes does.
 */
final class SchemaCheck {

  private SchemaCheck() {}

  /** Every rule broken, as {@code path: problem}; empty when the value is valid. */
  static List<String> violations(JsonNode value, JSONSchemaProps schema, String path) {
    List<String> out = new ArrayList<>();
    check(value, schema, path, out);
    return out;
  }

  private static void check(JsonNode v, JSONSchemaProps s, String path, List<String> out) {
    if (Boolean.TRUE.equals(s.getXKubernetesIntOrString())) {
      if (!v.isIntegralNumber() && !v.isTextual()) {
        out.add(path + ": must be an integer or a string, got " + v.getNodeType());
      }
      return;
    }
    String type = s.getType();
    if (type == null) {
      return;
    }
    switch (type) {
      case "object" -> checkObject(v, s, path, out);
      case "array" -> {
        if (!v.isArray()) {
          out.add(path + ": must be an array, got " + v.getNodeType());
          return;
        }
        for (int i = 0; i < v.size(); i++) {
          check(v.get(i), s.getItems().getSchema(), path + "[" + i + "]", out);
        }
      }
      case "string" -> {
        if (!v.isTextual()) {
          out.add(path + ": must be a string, got " + v.getNodeType());
          return;
        }
        if (s.getPattern() != null && !GoRegex.accepts(s.getPattern(), v.asText())) {
          out.add(path + ": '" + v.asText() + "' does not match " + s.getPattern());
        }
        checkEnum(v, s, path, out);
      }
      case "integer" -> {
        if (!v.isIntegralNumber()) {
          out.add(path + ": must be an integer, got " + v.getNodeType());
          return;
        }
        if (s.getMinimum() != null && v.asDouble() < s.getMinimum()) {
          out.add(path + ": " + v.asLong() + " is below the minimum " + s.getMinimum());
        }
      }
      case "boolean" -> {
        if (!v.isBoolean()) {
          out.add(path + ": must be a boolean, got " + v.getNodeType());
        }
      }
      default -> out.add(path + ": schema type " + type + " not handled by this check");
    }
  }

  private static void checkObject(JsonNode v, JSONSchemaProps s, String path, List<String> out) {
    if (!v.isObject()) {
      out.add(path + ": must be an object, got " + v.getNodeType());
      return;
    }
    if (s.getRequired() != null) {
      for (String name : s.getRequired()) {
        if (!v.has(name)) {
          out.add(path + "." + name + ": required");
        }
      }
    }
    Map<String, JSONSchemaProps> properties = s.getProperties();
    for (Map.Entry<String, JsonNode> field : v.properties()) {
      String child = path + "." + field.getKey();
      if (properties != null && properties.containsKey(field.getKey())) {
        check(field.getValue(), properties.get(field.getKey()), child, out);
      } else if (s.getAdditionalProperties() != null
          && s.getAdditionalProperties().getSchema() != null) {
        check(field.getValue(), s.getAdditionalProperties().getSchema(), child, out);
      } else if (!Boolean.TRUE.equals(s.getXKubernetesPreserveUnknownFields())) {
        out.add(child + ": unknown field (the API server would drop it)");
      }
    }
  }

  private static void checkEnum(JsonNode v, JSONSchemaProps s, String path, List<String> out) {
    if (s.getEnum() != null && !s.getEnum().isEmpty() && !s.getEnum().contains(v)) {
      out.add(path + ": '" + v.asText() + "' is not one of " + s.getEnum());
    }
  }
}
