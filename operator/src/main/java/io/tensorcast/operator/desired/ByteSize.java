package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Quantity;
import java.math.BigDecimal;
import java.util.Locale;

/** Byte counts for people and for Kubernetes quantities. */
public final class ByteSize {
  private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

  private ByteSize() {}

  /**
   * Binary units with one decimal, e.g. {@code 1.2 GiB}, {@code 300.0 MiB}; plain bytes below 1 KiB
   * ({@code 88 B}).
   *
   * @param bytes a count ≥ 0
   */
  public static String human(long bytes) {
    if (bytes < 1024) {
      return bytes + " B";
    }
    int unit = 0;
    double value = bytes;
    while (value >= 1024 && unit < UNITS.length - 1) {
      value /= 1024;
      unit++;
    }
    return String.format(Locale.ROOT, "%.1f %s", value, UNITS[unit]);
  }

  /** {@code human(bytes)} followed by the exact count, e.g. {@code 1.2 GiB (1288490188 bytes)}. */
  public static String exact(long bytes) {
    return human(bytes) + " (" + bytes + " bytes)";
  }

  /** A quantity of exactly {@code bytes}, written as a plain integer (no unit suffix). */
  public static Quantity quantity(long bytes) {
    return new Quantity(Long.toString(bytes));
  }

  /**
   * The bytes a quantity stands for.
   *
   * @throws IllegalArgumentException if the quantity is malformed or not a whole number of bytes
   */
  public static long bytes(Quantity q) {
    try {
      BigDecimal amount = Quantity.getAmountInBytes(q);
      return amount.setScale(0, java.math.RoundingMode.UNNECESSARY).longValueExact();
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          "'" + q + "' is not a Kubernetes quantity of whole bytes (e.g. 64Mi, 40Gi, 1000000)", e);
    }
  }
}
