package io.tensorcast.rdma.discovery;

/**
 * One port of an RDMA device as the kernel reports it under {@code
 * /sys/class/infiniband/<device>/ports/<port>/}.
 *
 * @param port port number (the directory name, 1-based on real hardware)
 * @param state logical port state without its numeric prefix, from {@code state} ({@code "4:
 *     ACTIVE"} becomes {@code ACTIVE}); {@code UNKNOWN} when the file is missing or unreadable
 * @param physState physical port state without its numeric prefix, from {@code phys_state} (e.g.
 *     {@code LinkUp}, {@code Disabled}); {@code UNKNOWN} when missing
 * @param linkLayer {@code InfiniBand} or {@code Ethernet} (RoCE), from {@code link_layer}; {@code
 *     UNKNOWN} when missing
 * @param rate the raw {@code rate} text, e.g. {@code "200 Gb/sec (4X HDR)"}; empty when missing
 * @param rateGbps the rate's leading number in Gb/s (e.g. {@code 200.0}, {@code 2.5}); {@code
 *     Double.NaN} when the text does not start with a number followed by {@code Gb/sec}
 */
public record RdmaPort(
    int port, String state, String physState, String linkLayer, String rate, double rateGbps) {

  /** Logical state of a port that can carry traffic (IB spec state 4, {@code IB_PORT_ACTIVE}). */
  public static final String ACTIVE = "ACTIVE";

  /** Placeholder for a state or link layer whose sysfs file is missing or unreadable. */
  public static final String UNKNOWN = "UNKNOWN";

  /** True when the logical port state is {@link #ACTIVE}. */
  public boolean active() {
    return ACTIVE.equals(state);
  }
}
