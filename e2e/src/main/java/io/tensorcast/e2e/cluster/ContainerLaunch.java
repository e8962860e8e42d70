package io.tensorcast.e2e.cluster;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * Everything a {@link ContainerRuntime} needs to start one container, already resolved by {@link
 * SimulatedKubelet}.
 *
 * @param namespace the pod's namespace
 * @param podName the pod's name
 * @param podUid the pod's {@code metadata.uid}
 * @param nodeName the simulated node the pod is bound to
 * @param containerName the container's name in the pod spec
 * @param image the container's {@code image} as written in the spec
 * @param command the container's {@code command} after {@code $(VAR)} expansion and mount-path
 *     rewriting; empty when the spec has none
 * @param args the container's {@code args}, processed the same way; empty when the spec has none
 * @param env the complete environment of the process (host basics such as {@code PATH} and {@code
 *     HOME}, then what the kubelet injects, then the container's {@code envFrom} and {@code env})
 * @param workingDir the host directory to run in
 * @param logFile where stdout and stderr are appended
 * @param identity user, groups and capabilities of the process from the {@code securityContext}, or
 *     {@code null} to run as the harness user
 */
public record ContainerLaunch(
    String namespace,
    String podName,
    String podUid,
    String nodeName,
    String containerName,
    String image,
    List<String> command,
    List<String> args,
    Map<String, String> env,
    Path workingDir,
    Path logFile,
    ProcessIdentity identity) {

  public ContainerLaunch {
    command = List.copyOf(command);
    args = List.copyOf(args);
    env = Map.copyOf(env);
  }

  /** A launch that runs as the harness user. */
  public ContainerLaunch(
      String namespace,
      String podName,
      String podUid,
      String nodeName,
      String containerName,
      String image,
      List<String> command,
      List<String> args,
      Map<String, String> env,
      Path workingDir,
      Path logFile) {
    this(
        namespace,
        podName,
        podUid,
        nodeName,
        containerName,
        image,
        command,
        args,
        env,
        workingDir,
        logFile,
        null);
  }
}
