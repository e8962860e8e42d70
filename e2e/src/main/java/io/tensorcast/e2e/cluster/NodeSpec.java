package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Taint;
import io.fabric8.kubernetes.api.model.TaintBuilder;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What a simulated node looks like to the control plane.
 *
 * @param name the Node's name (a DNS-1123 subdomain, at most 253 characters)
 * @param labels Node labels; {@code kubernetes.io/hostname}, {@code kubernetes.io/os} and {@code
 *     kubernetes.io/arch} are added as a kubelet would unless given
 * @param address the node's IPv4 loopback address (in 127.0.0.0/8, e.g. {@code 127.0.1.1}): the
 *     Node's {@code InternalIP} and the {@code podIP} of every pod on it, so pods on different
 *     nodes can listen on the same port
 * @param allocatable resource name → quantity (e.g. {@code cpu: 8}, {@code memory: 32Gi}, {@code
 *     tensorcast.io/rdma: 1}); written as both capacity and allocatable
 * @param taints the Node's taints
 * @param podAddresses loopback addresses handed out as {@code podIP} to this node's pods, one per
 *     pod (a pod network without namespaces: two pods of one node may then listen on the same
 *     port); each pod gets the first one no other running pod of the node holds, and the node's
 *     {@code address} when all are taken. Empty (the default): every pod shares the node's address
 */
public record NodeSpec(
    String name,
    Map<String, String> labels,
    String address,
    Map<String, String> allocatable,
    List<Taint> taints,
    List<String> podAddresses) {

  private static final Pattern DNS_1123_SUBDOMAIN =
      Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");

  /** Allocatable resources a node gets unless the builder overrides them. */
  public static final Map<String, String> DEFAULT_ALLOCATABLE =
      Map.of("cpu", "8", "memory", "32Gi", "pods", "110", "ephemeral-storage", "100Gi");

  /**
   * Checks the spec.
   *
   * @throws IllegalArgumentException naming the field and the rule broken
   */
  public NodeSpec {
    if (name == null || name.length() > 253 || !DNS_1123_SUBDOMAIN.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "NodeSpec.name \""
              + name
              + "\" must be a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.', at most"
              + " 253 characters)");
    }
    requireLoopback(name, address);
    labels = Map.copyOf(labels);
    for (Map.Entry<String, String> e : allocatable.entrySet()) {
      try {
        Quantity.getAmountInBytes(new Quantity(e.getValue()));
      } catch (RuntimeException ex) {
        throw new IllegalArgumentException(
            "NodeSpec "
                + name
                + ": allocatable \""
                + e.getKey()
                + "\" = \""
                + e.getValue()
                + "\" is not a Kubernetes quantity (e.g. 8, 500m, 32Gi)",
            ex);
      }
    }
    allocatable = Map.copyOf(allocatable);
    taints = List.copyOf(taints);
    podAddresses = List.copyOf(podAddresses);
    for (String a : podAddresses) {
      requireLoopback(name, a);
    }
  }

  /** A node whose pods share its address (no {@code podAddresses}). */
  public NodeSpec(
      String name,
      Map<String, String> labels,
      String address,
      Map<String, String> allocatable,
      List<Taint> taints) {
    this(name, labels, address, allocatable, taints, List.of());
  }

  private static void requireLoopback(String node, String address) {
    boolean ok = false;
    if (address != null && address.matches("\\d{1,3}(\\.\\d{1,3}){3}")) {
      try {
        InetAddress a = InetAddress.getByName(address);
        ok = a.isLoopbackAddress() && a.getAddress().length == 4;
      } catch (UnknownHostException e) {
        ok = false;
      }
    }
    if (!ok) {
      throw new IllegalArgumentException(
          "NodeSpec "
              + node
              + ": address \""
              + address
              + "\" must be a literal IPv4 loopback address in 127.0.0.0/8 (e.g. 127.0.1.1);"
              + " every such address binds on Linux without configuration");
    }
  }

  /** Starts a builder with the default allocatable resources ({@link #DEFAULT_ALLOCATABLE}). */
  public static Builder builder(String name, String address) {
    return new Builder(name, address);
  }

  /** Builder for {@link NodeSpec}. */
  public static final class Builder {
    private final String name;
    private final String address;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private final Map<String, String> allocatable = new LinkedHashMap<>(DEFAULT_ALLOCATABLE);
    private final List<Taint> taints = new ArrayList<>();
    private final List<String> podAddresses = new ArrayList<>();

    private Builder(String name, String address) {
      this.name = name;
      this.address = address;
    }

    public Builder label(String key, String value) {
      labels.put(key, value);
      return this;
    }

    public Builder labels(Map<String, String> more) {
      labels.putAll(more);
      return this;
    }

    /** Sets one allocatable resource, e.g. {@code allocatable("tensorcast.io/rdma", "1")}. */
    public Builder allocatable(String resource, String quantity) {
      allocatable.put(resource, quantity);
      return this;
    }

    /**
     * Adds a taint.
     *
     * @param effect {@code NoSchedule}, {@code PreferNoSchedule} or {@code NoExecute}
     */
    public Builder taint(String key, String value, String effect) {
      taints.add(new TaintBuilder().withKey(key).withValue(value).withEffect(effect).build());
      return this;
    }

    /** Adds loopback addresses to hand out as pod IPs (see {@link NodeSpec#podAddresses()}). */
    public Builder podAddresses(String... addresses) {
      podAddresses.addAll(List.of(addresses));
      return this;
    }

    public NodeSpec build() {
      return new NodeSpec(name, labels, address, allocatable, taints, podAddresses);
    }
  }
}
