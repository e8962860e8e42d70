package io.tensorcast.api.crdgen;

import com.fasterxml.jackson.annotation.JsonClassDescription;
import io.fabric8.crdv2.generator.CRDGenerator;
import io.fabric8.crdv2.generator.CRDPostProcessor;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceColumnDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinitionVersion;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaPropsOrArray;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaPropsOrBool;
import io.fabric8.kubernetes.client.CustomResource;
import io.tensorcast.api.PrinterColumnOrder;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes the CRDs of Tensorcast's custom resources from their Java model with fabric8's CRD
 * generator, at build time ({@code process-classes}, through exec-maven-plugin; not part of the
 * crds jar). On top of what the generator writes from the annotations it:
 *
 * <ul>
 *   <li>orders the printer columns as {@link PrinterColumnOrder} on the resource class says (the
 *       generator sorts them by JSON path);
 *   <li>sets the root schema's description from the class's {@link JsonClassDescription}, which
 *       {@code kubectl explain <kind>} shows;
 *   <li>carries {@link Pattern}, {@link Min} and {@link Max} of int-or-string fields (Kubernetes
 *       quantities) into their schema, which the generator leaves out for them: OpenAPI applies
 *       {@code pattern} to the string form and {@code minimum}/{@code maximum} to the integer form;
 *   <li>writes a second file, {@code <crd>-v1}{@value #BELOW_CEL_SUFFIX}, with every {@code
 *       x-kubernetes-validations} (CEL) rule removed, for Kubernetes before 1.25: their API servers
 *       drop the field on create but refuse it in server-side apply ("field not declared in
 *       schema"), and kubectl's client-side validation refuses it too.
 * </ul>
 *
 * <p>Usage: {@code CrdGeneration <output directory>}.
 */
public final class CrdGeneration {

  /** Suffix (before {@code .yml}) of the CRD variant without CEL rules. */
  public static final String BELOW_CEL_SUFFIX = TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX;

  /** The custom resource classes whose CRDs are written. */
  static final List<Class<? extends CustomResource<?, ?>>> RESOURCES =
      List.of(ModelArtifact.class, TensorShardSet.class);

  private CrdGeneration() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 1) {
      throw new IllegalArgumentException("usage: CrdGeneration <output directory>");
    }
    Path out = Path.of(args[0]);
    Files.createDirectories(out);
    generate(out, false);
    Path legacy = Files.createTempDirectory("crd-below-cel");
    try {
      generate(legacy, true);
      try (var files = Files.list(legacy)) {
        for (Path f : files.toList()) {
          String name = f.getFileName().toString();
          String target = name.replaceFirst("\\.yml$", BELOW_CEL_SUFFIX + ".yml");
          Files.move(f, out.resolve(target), StandardCopyOption.REPLACE_EXISTING);
        }
      }
    } finally {
      Files.deleteIfExists(legacy);
    }
  }

  @SuppressWarnings("unchecked")
  private static void generate(Path dir, boolean withoutCel) {
    Map<String, Class<?>> byKind = new LinkedHashMap<>();
    RESOURCES.forEach(c -> byKind.put(HasMetadata.getKind(c), c));
    new CRDGenerator()
        .customResourceClasses(RESOURCES.toArray(new Class[0]))
        .forCRDVersions("v1")
        .withPostProcessor(
            new CRDPostProcessor() {
              @Override
              public HasMetadata process(HasMetadata crd, String crdSpecVersion) {
                CustomResourceDefinition d = (CustomResourceDefinition) crd;
                Class<?> type = byKind.get(d.getSpec().getNames().getKind());
                for (CustomResourceDefinitionVersion v : d.getSpec().getVersions()) {
                  orderColumns(type, v);
                  JSONSchemaProps root = v.getSchema().getOpenAPIV3Schema();
                  JsonClassDescription doc = type.getAnnotation(JsonClassDescription.class);
                  if (doc != null) {
                    root.setDescription(doc.value());
                  }
                  intOrStringRules(root.getProperties().get("spec"), specClass(type));
                  if (withoutCel) {
                    stripCel(root);
                  }
                }
                return d;
              }
            })
        .inOutputDir(dir.toFile())
        .generate();
  }

  /** Orders {@code v}'s printer columns as {@code type}'s {@link PrinterColumnOrder}. */
  static void orderColumns(Class<?> type, CustomResourceDefinitionVersion v) {
    PrinterColumnOrder order = type.getAnnotation(PrinterColumnOrder.class);
    List<CustomResourceColumnDefinition> columns = v.getAdditionalPrinterColumns();
    if (order == null || columns == null) {
      return;
    }
    Map<String, CustomResourceColumnDefinition> byName = new LinkedHashMap<>();
    columns.forEach(c -> byName.put(c.getName(), c));
    List<CustomResourceColumnDefinition> ordered = new ArrayList<>();
    for (String name : order.value()) {
      CustomResourceColumnDefinition c = byName.remove(name);
      if (c == null) {
        throw new IllegalStateException(
            type.getSimpleName()
                + ": @PrinterColumnOrder names column "
                + name
                + ", which the class does not declare");
      }
      ordered.add(c);
    }
    if (!byName.isEmpty()) {
      throw new IllegalStateException(
          type.getSimpleName()
              + ": columns "
              + byName.keySet()
              + " are missing from @PrinterColumnOrder "
              + Arrays.toString(order.value()));
    }
    v.setAdditionalPrinterColumns(ordered);
  }

  private static Class<?> specClass(Class<?> type) {
    try {
      return type.getMethod("getSpec").getReturnType();
    } catch (NoSuchMethodException e) {
      throw new IllegalStateException(type + " has no getSpec()", e);
    }
  }

  /**
   * Sets {@code pattern}, {@code minimum} and {@code maximum} of the int-or-string properties of
   * {@code schema} from the annotations of the same-named fields of {@code type}, recursing into
   * fields whose types belong to the API packages.
   */
  static void intOrStringRules(JSONSchemaProps schema, Class<?> type) {
    if (schema == null || schema.getProperties() == null) {
      return;
    }
    for (Field f : type.getDeclaredFields()) {
      JSONSchemaProps p = schema.getProperties().get(f.getName());
      if (p == null) {
        continue;
      }
      if (Boolean.TRUE.equals(p.getXKubernetesIntOrString())) {
        Pattern pattern = f.getAnnotation(Pattern.class);
        Min min = f.getAnnotation(Min.class);
        Max max = f.getAnnotation(Max.class);
        if (pattern != null) {
          p.setPattern(pattern.value());
        }
        if (min != null) {
          p.setMinimum(min.value());
          p.setExclusiveMinimum(min.inclusive() ? null : true);
        }
        if (max != null) {
          p.setMaximum(max.value());
          p.setExclusiveMaximum(max.inclusive() ? null : true);
        }
      } else if (f.getType().getPackageName().startsWith("io.tensorcast.api")) {
        intOrStringRules(p, f.getType());
      }
    }
  }

  /** Removes every {@code x-kubernetes-validations} below {@code s}. */
  public static void stripCel(JSONSchemaProps s) {
    if (s == null) {
      return;
    }
    s.setXKubernetesValidations(null);
    if (s.getProperties() != null) {
      s.getProperties().values().forEach(CrdGeneration::stripCel);
    }
    JSONSchemaPropsOrArray items = s.getItems();
    if (items != null) {
      stripCel(items.getSchema());
      if (items.getJSONSchemas() != null) {
        items.getJSONSchemas().forEach(CrdGeneration::stripCel);
      }
    }
    JSONSchemaPropsOrBool additional = s.getAdditionalProperties();
    if (additional != null) {
      stripCel(additional.getSchema());
    }
    for (List<JSONSchemaProps> list :
        List.of(ofNull(s.getAnyOf()), ofNull(s.getAllOf()), ofNull(s.getOneOf()))) {
      list.forEach(CrdGeneration::stripCel);
    }
  }

  private static List<JSONSchemaProps> ofNull(List<JSONSchemaProps> l) {
    return l == null ? List.of() : l;
  }
}
