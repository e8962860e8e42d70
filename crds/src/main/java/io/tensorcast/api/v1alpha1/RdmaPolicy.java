package io.tensorcast.api.v1alpha1;

import io.tensorcast.api.TensorcastConstants;

/**
 * Whether an artifact's nodes must have RDMA ({@code spec.placement.rdma}). A node has RDMA when
 * its allocatable lists {@link TensorcastConstants#RDMA_RESOURCE} or it carries the label {@link
 * TensorcastConstants#RDMA_NODE_LABEL}{@code =true}.
 */
public enum RdmaPolicy {
  /** Only RDMA-capable nodes are chosen; too few of them leaves the artifact unscheduled. */
  Required,
  /** RDMA-capable nodes are chosen first, others fill the remaining replicas. */
  Preferred,
  /** RDMA is not considered; peers transfer over TCP. */
  Disabled
}
