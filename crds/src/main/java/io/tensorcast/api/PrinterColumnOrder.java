package io.tensorcast.api;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The order of a custom resource's printer columns ({@code kubectl get}), by column name. The CRD
 * generation ({@code io.tensorcast.api.crdgen.CrdGeneration}) writes the columns in this order and
 * fails when a column is missing from the list or the list names a column that does not exist.
 * Kubernetes API conventions put a resource's readiness next to its name and {@code AGE} last.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface PrinterColumnOrder {

  /** Column names, first to last. */
  String[] value();
}
