package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;

/**
 * An artifact does not fit into the store's byte budget. Thrown by {@link PinnedStore#allocate}
 * before any file or directory is created. Reason {@code InsufficientMemory}.
 */
public final class InsufficientMemoryException extends StoreException {
  private static final long serialVersionUID = 1L;

  private final long neededBytes;
  private final long budgetBytes;
  private final long inUseBytes;

  InsufficientMemoryException(String artifactId, long neededBytes, long budgetBytes, long inUse) {
    super(
        Reason.InsufficientMemory,
        "artifact "
            + artifactId
            + " needs "
            + neededBytes
            + " bytes (file sizes rounded up to whole pages) but the store's budget is "
            + budgetBytes
            + " bytes, "
            + inUse
            + " bytes are in use by other artifacts and only "
            + Math.max(0, budgetBytes - inUse)
            + " bytes are free; unload other artifacts or give the data plane more memory");
    this.neededBytes = neededBytes;
    this.budgetBytes = budgetBytes;
    this.inUseBytes = inUse;
  }

  /** Bytes the artifact needs: its file sizes, each rounded up to whole pages. */
  public long neededBytes() {
    return neededBytes;
  }

  /** The store's budget in bytes. */
  public long budgetBytes() {
    return budgetBytes;
  }

  /** Bytes held by other artifacts when the allocation was refused. */
  public long inUseBytes() {
    return inUseBytes;
  }

  /** Bytes that were free: {@code max(0, budget - inUse)}. */
  public long freeBytes() {
    return Math.max(0, budgetBytes - inUseBytes);
  }
}
