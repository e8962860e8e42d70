package io.tensorcast.dataplane.consumer;

/**
 * Turns a tensor read into a {@link ReadPlan}: the ordered segments of stored files whose
 * concatenation is the body. The seam between the HTTP endpoint (which streams and slices plans)
 * and the parallel-tensor-IO planner (which knows the TP shard layout): {@link
 * DefaultTensorReadPlanner} is the one class that maps query targets to planners.
 */
@FunctionalInterface
public interface TensorReadPlanner {

  /**
   * Plans one read. Called on the endpoint's event loop: must not block on I/O beyond reading small
   * files of the store, and should take milliseconds.
   *
   * @param catalog the tensors of the artifact generation being served
   * @param name the tensor name, decoded
   * @param query the validated query
   * @return the plan; its segments must lie inside the artifact's stored files
   * @throws TensorReadException 404 {@code UnknownTensor} naming the tensor, 409 for an ambiguous
   *     name or a parallelism identity that differs from the stored one, 400 for a query the tensor
   *     cannot satisfy (e.g. a split that does not divide), 500 for an inconsistent stored layout
   */
  ReadPlan plan(TensorCatalog catalog, String name, TensorQuery query) throws TensorReadException;
}
