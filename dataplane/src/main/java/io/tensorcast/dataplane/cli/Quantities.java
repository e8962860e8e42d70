package io.tensorcast.dataplane.cli;

import io.fabric8.kubernetes.api.model.Quantity;

/**
 * Byte sizes written as Kubernetes quantities ({@code 512Mi}, {@code 2Gi}, {@code 1e9}, bytes).
 * Public for {@link io.tensorcast.dataplane.pod.DataPlaneServer}, which parses the memory budget
 * when it opens the store.
 */
public final class Quantities {
  private Quantities() {}

  /**
   * @throws IllegalArgumentException naming the option when the value is not a non-negative whole
   *     number of bytes
   */
  public static long bytes(String value, String option) {
    try {
      var amount = Quantity.getAmountInBytes(new Quantity(value.strip()));
      if (amount.signum() < 0) {
        throw new IllegalArgumentException(option + " must not be negative: " + value);
      }
      return amount.setScale(0, java.math.RoundingMode.UP).longValueExact();
    } catch (ArithmeticException | IllegalArgumentException e) {
      throw new IllegalArgumentException(
          option + ": '" + value + "' is not a byte quantity such as 512Mi, 2Gi or 1000000", e);
    }
  }

  /** 1.5 GiB, 300.0 MiB, 12 B. */
  public static String human(long bytes) {
    if (bytes < 1024) {
      return bytes + " B";
    }
    String[] units = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = bytes;
    int i = -1;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return String.format(java.util.Locale.ROOT, "%.1f %s", v, units[i]);
  }
}
