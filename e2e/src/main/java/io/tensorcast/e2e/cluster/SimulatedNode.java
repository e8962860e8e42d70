package io.tensorcast.e2e.cluster;

import java.nio.file.Path;
import java.util.Map;

/**
 * A Node registered by {@link SimulatedKubelet#addNode(NodeSpec)}. Its pods run as local processes
 * and report {@link #address()} as their {@code podIP}; its {@code hostPath} volumes live under
 * {@link #root()}.
 */
public final class SimulatedNode {

  private final SimulatedKubelet kubelet;
  private final NodeSpec spec;
  private final Path root;

  /** Pod UID → address from {@link NodeSpec#podAddresses()}; guarded by itself. */
  private final Map<String, String> podAddressHolders = new java.util.HashMap<>();

  SimulatedNode(SimulatedKubelet kubelet, NodeSpec spec, Path root) {
    this.kubelet = kubelet;
    this.spec = spec;
    this.root = root;
  }

  public String name() {
    return spec.name();
  }

  /** The node's loopback address: its InternalIP and every pod's podIP on it. */
  public String address() {
    return spec.address();
  }

  /**
   * The {@code podIP} of the pod with this UID: the address it already holds, else the first of
   * {@link NodeSpec#podAddresses()} no other pod holds, else the node's address.
   */
  String podAddress(String podUid) {
    synchronized (podAddressHolders) {
      String held = podAddressHolders.get(podUid);
      if (held != null) {
        return held;
      }
      for (String a : spec.podAddresses()) {
        if (!podAddressHolders.containsValue(a)) {
          podAddressHolders.put(podUid, a);
          return a;
        }
      }
      return spec.address();
    }
  }

  /** Frees the address the pod with this UID held, if any. */
  void releasePodAddress(String podUid) {
    synchronized (podAddressHolders) {
      podAddressHolders.remove(podUid);
    }
  }

  public NodeSpec spec() {
    return spec;
  }

  /**
   * The directory standing for this node's filesystem root ({@code hostPath} volumes live here).
   */
  public Path root() {
    return root;
  }

  /**
   * Where {@code hostPath} (an absolute path on the node, as written in a pod's {@code hostPath}
   * volume) lives on this machine: {@code root()/<hostPath>}.
   */
  public Path hostPath(String hostPath) {
    return PodVolumes.underNodeRoot(root, hostPath);
  }

  /**
   * The kubelet's root directory on this node ({@code root()/var/lib/kubelet}): CSI target paths
   * are {@code <kubeletRoot>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount}.
   */
  public Path kubeletRoot() {
    return PodVolumes.kubeletRoot(root);
  }

  /**
   * Registers a CSI node driver serving {@code driver} on this node at {@code socket} (what the
   * node-driver-registrar does for a kubelet): from now on the kubelet publishes that driver's
   * inline volumes of pods on this node through it.
   */
  public void registerCsiDriver(String driver, Path socket) {
    kubelet.registerCsiDriver(spec.name(), driver, socket);
  }

  /** Forgets the CSI driver {@code driver} on this node. */
  public void unregisterCsiDriver(String driver) {
    kubelet.unregisterCsiDriver(spec.name(), driver);
  }

  /** Labels as registered (including the kubelet's well-known ones). */
  public Map<String, String> labels() {
    return kubelet.registeredLabels(spec);
  }

  /**
   * Sets the node's {@code Ready} condition (reason {@code KubeletReady} / {@code
   * KubeletNotReady}). Running pods keep running: with the node-lifecycle controller off nothing
   * taints or evicts.
   */
  public void setReady(boolean ready) {
    kubelet.writeNodeStatus(spec, ready);
  }

  /**
   * Takes the node away: kills its pods' processes at once (as a machine that lost power) and
   * deletes the Node object. Pods bound to it stay in the API as they were.
   */
  public void remove() {
    kubelet.removeNode(spec.name());
  }

  @Override
  public String toString() {
    return "SimulatedNode[" + spec.name() + " @ " + spec.address() + "]";
  }
}
