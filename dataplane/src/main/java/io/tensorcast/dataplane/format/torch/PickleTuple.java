package io.tensorcast.dataplane.format.torch;

import java.util.List;

/**
 * A Python tuple in a checkpoint's object tree (lists are {@link java.util.List}, dicts {@link
 * java.util.Map}).
 *
 * @param items the elements, unmodifiable; may hold nulls (Python {@code None})
 */
public record PickleTuple(List<Object> items) {
  /** The element at {@code i}. */
  public Object get(int i) {
    return items.get(i);
  }

  /** Number of elements. */
  public int size() {
    return items.size();
  }

  /** Python-like text, bounded in depth and length whatever the tuple holds. */
  @Override
  public String toString() {
    return PickleText.describe(this);
  }
}
