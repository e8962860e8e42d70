package io.tensorcast.e2e.cluster;

/**
 * What {@link SimulatedKubelet} uses to run one container of a pod bound to a simulated node. A
 * real kubelet talks to a CRI runtime; here a container is a local process (see {@link
 * ProcessContainerRuntime}).
 *
 * <p>The kubelet has already resolved everything Kubernetes defines about the container before it
 * calls {@link #start}: environment ({@code env}, {@code envFrom}, downward API, Secret and
 * ConfigMap references), {@code $(VAR)} expansion in {@code command}/{@code args}, and the
 * rewriting of paths under volume mounts to host directories. The runtime only decides how an image
 * becomes a program.
 */
public interface ContainerRuntime {

  /**
   * Starts one container process.
   *
   * @throws ContainerStartException when the container cannot be started; its {@link
   *     ContainerStartException#reason()} becomes the container's waiting reason in the pod status
   *     (for example {@code ErrImagePull} when no program is known for the image)
   */
  ContainerProcess start(ContainerLaunch launch) throws ContainerStartException;
}
