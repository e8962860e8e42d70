package io.tensorcast.rdma.labels;

import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.rdma.discovery.RdmaDevice;
import io.tensorcast.rdma.discovery.RdmaInventory;
import io.tensorcast.rdma.discovery.RdmaPort;
import java.math.BigDecimal;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The node labels the plugin owns, as a pure function of a sysfs scan. While at least one RDMA
 * device is {@linkplain RdmaDevice#usable() usable}:
 *
 * <ul>
 *   <li>{@value TensorcastConstants#RDMA_NODE_LABEL}{@code =true};
 *   <li>{@value #LINK_LAYER}: link layer of the fastest active port ({@code InfiniBand} or {@code
 *       Ethernet} for RoCE);
 *   <li>{@value #RATE}: that port's rate in Gb/s ({@code 200}, {@code 2.5});
 *   <li>{@value #DEVICES}: number of usable devices.
 * </ul>
 *
 * With none usable, none of them is present. Values follow the Kubernetes label value syntax (at
 * most 63 characters, {@code [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?}); other characters become
 * {@code -}, and a value that cannot be made valid leaves its label out.
 */
public final class NodeLabels {

  /** Link layer of the fastest active port. */
  public static final String LINK_LAYER = "tensorcast.io/rdma-link-layer";

  /** Rate of the fastest active port, in Gb/s. */
  public static final String RATE = "tensorcast.io/rdma-rate";

  /** Number of usable RDMA devices. */
  public static final String DEVICES = "tensorcast.io/rdma-devices";

  /** Every label key this plugin sets or removes; no other label is ever touched. */
  public static final List<String> KEYS =
      List.of(TensorcastConstants.RDMA_NODE_LABEL, LINK_LAYER, RATE, DEVICES);

  private static final Pattern VALID = Pattern.compile("[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?");

  private NodeLabels() {}

  /**
   * @return the labels that should be on the node, keyed by label key; keys of {@link #KEYS} that
   *     are absent should be removed
   */
  public static Map<String, String> desired(RdmaInventory inventory) {
    Map<String, String> labels = new LinkedHashMap<>();
    List<RdmaDevice> usable = inventory.usableDevices();
    if (usable.isEmpty()) {
      return labels;
    }
    labels.put(TensorcastConstants.RDMA_NODE_LABEL, TensorcastConstants.RDMA_NODE_LABEL_VALUE);
    Optional<RdmaPort> fastest =
        usable.stream()
            .flatMap(d -> d.ports().stream())
            .filter(RdmaPort::active)
            .max(
                Comparator.comparingDouble(
                    (RdmaPort p) -> Double.isNaN(p.rateGbps()) ? -1 : p.rateGbps()));
    fastest.flatMap(p -> labelValue(p.linkLayer())).ifPresent(v -> labels.put(LINK_LAYER, v));
    fastest
        .filter(p -> !Double.isNaN(p.rateGbps()))
        .map(p -> BigDecimal.valueOf(p.rateGbps()).stripTrailingZeros().toPlainString())
        .ifPresent(v -> labels.put(RATE, v));
    labels.put(DEVICES, Integer.toString(usable.size()));
    return labels;
  }

  /**
   * {@code text} as a valid label value: invalid characters become {@code -}, leading/trailing
   * non-alphanumerics are dropped, at most 63 characters; empty when nothing valid is left.
   */
  public static Optional<String> labelValue(String text) {
    String v = text.strip().replaceAll("[^-A-Za-z0-9_.]", "-");
    if (v.length() > 63) {
      v = v.substring(0, 63);
    }
    v = v.replaceAll("^[^A-Za-z0-9]+", "").replaceAll("[^A-Za-z0-9]+$", "");
    return VALID.matcher(v).matches() ? Optional.of(v) : Optional.empty();
  }
}
