package io.tensorcast.dataplane.consumer;

/**
 * The planner the data plane serves with: maps each {@link TensorQuery.Target} to the planner that
 * answers it. {@code as_stored} is {@link AsStoredPlanner}. {@code shard} and {@code full} need the
 * parallel-tensor-IO planner ({@code io.tensorcast.dataplane.tensor}); until it is wired here they
 * answer 501. Wiring it is a change to this class only: build that planner's parallelism from
 * {@link TensorQuery#parallelism()}, let it plan over {@link TensorCatalog#artifact()} (its {@code
 * manifest.json} and rank files) and return its byte ranges as {@link Segment}s.
 */
public final class DefaultTensorReadPlanner implements TensorReadPlanner {
  private final TensorReadPlanner asStored = new AsStoredPlanner();

  @Override
  public ReadPlan plan(TensorCatalog catalog, String name, TensorQuery query)
      throws TensorReadException {
    return switch (query.target()) {
      case AS_STORED -> asStored.plan(catalog, name, query);
      case SHARD, FULL -> {
        if (catalog.lookup(name).isEmpty()) {
          throw AsStoredPlanner.unknown(catalog, name);
        }
        throw new TensorReadException(
            501,
            "NotImplemented",
            "shard/full reads need the tensor planner; this data plane serves target=as_stored"
                + " only so far (query "
                + query.canonical()
                + " for tensor \""
                + name
                + "\" is valid)");
      }
    };
  }
}
