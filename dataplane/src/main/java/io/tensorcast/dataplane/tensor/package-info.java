/**
 * Parallel tensor IO: which bytes of which stored file make up the tensor a consumer asks for.
 *
 * <p>Terms follow the unified parallel tensor IO seed (Mooncake PR #1389): a {@link
 * io.tensorcast.dataplane.tensor.TensorParallelism} is a list of {@link
 * io.tensorcast.dataplane.tensor.ParallelAxis} ({@code tp|dp|pp|ep}); only {@code tp} splits bytes,
 * {@code dp}, {@code pp} and {@code ep} scope the stored object. A {@link
 * io.tensorcast.dataplane.tensor.ReadTarget} says what to materialise ({@code as_stored}, {@code
 * shard}, {@code full}). A {@link io.tensorcast.dataplane.tensor.WriterPartition} lets a writer
 * that holds a full tensor persist only its shard.
 *
 * <p>The stored layout ({@link io.tensorcast.dataplane.tensor.StoredLayout}) is either plain
 * safetensors files (a Hugging Face checkpoint, with or without {@code
 * model.safetensors.index.json}) or the TP shard layout of the unified artifact IO seed: {@code
 * manifest.json} ({@link io.tensorcast.dataplane.tensor.ShardManifest}) + {@code
 * rank_NNNNN.safetensors}, written by {@link io.tensorcast.dataplane.tensor.ShardLayoutWriter}.
 * {@link io.tensorcast.dataplane.tensor.TensorReadPlanner} turns (layout, tensor, target) into a
 * {@link io.tensorcast.dataplane.tensor.TensorReadPlan} of byte-range copies, which {@link
 * io.tensorcast.dataplane.tensor.Reconstructor} executes from a {@link
 * io.tensorcast.dataplane.tensor.StoredFiles}. The full tensor is never materialised to produce a
 * shard. Pure Java: no store or network dependency.
 */
package io.tensorcast.dataplane.tensor;
