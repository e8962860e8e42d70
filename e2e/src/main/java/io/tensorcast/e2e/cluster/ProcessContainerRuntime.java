package io.tensorcast.e2e.cluster;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs each container as a local process: the container's image is mapped to a local command prefix
 * that stands in for the image's ENTRYPOINT.
 *
 * <h2>Image matching</h2>
 *
 * The mapping key is an image-reference prefix, e.g. {@code tensorcast/dataplane}. A key matches an
 * image when the image equals it, or starts with it and the next character is {@code :}, {@code @}
 * or {@code /} (so {@code tensorcast/dataplane} matches {@code tensorcast/dataplane:0.1.0} and
 * {@code tensorcast/dataplane@sha256:…} but not {@code tensorcast/dataplane-v2}), or the key itself
 * ends with {@code :}, {@code @} or {@code /}. The longest matching key wins. An image no key
 * matches does not start: the container waits with reason {@code ErrImagePull} and a message
 * listing the known keys.
 *
 * <h2>How the process's argv is formed</h2>
 *
 * <pre>argv = prefix ++ container.command ++ container.args</pre>
 *
 * where {@code prefix} is the mapped command (e.g. {@code java -jar
 * /path/tensorcast-dataplane.jar}). This differs from Kubernetes, where a {@code command}
 * <i>replaces</i> the image's ENTRYPOINT: a local machine has no image filesystem in which the
 * container's command could be found, so the mapped prefix is always kept and {@code command} is
 * appended before {@code args}. Pods meant to run here should therefore put their options in {@code
 * args}. To run a host program exactly as the container's {@code command} says, map its image to an
 * empty prefix ({@code map("local/exec")}). The first element of argv is looked up on the {@code
 * PATH} of the container's environment.
 *
 * <p>Programs of an image's file system: {@link #mapProgram} names a program the image holds (e.g.
 * {@code chown} in the data-plane image). A container whose {@code command} starts with that name
 * runs it as Kubernetes would, its {@code command} replacing the entrypoint: {@code argv = program
 * ++ command[1..] ++ args}.
 *
 * <h2>Identity</h2>
 *
 * A launch with a {@link ProcessIdentity} (from the pod's {@code securityContext}) runs under
 * {@code setpriv} with that user, groups, capabilities and {@code no_new_privs}.
 */
public final class ProcessContainerRuntime implements ContainerRuntime {

  private final Map<String, List<String>> images = new ConcurrentHashMap<>();
  private final Map<String, Map<String, List<String>>> programs = new ConcurrentHashMap<>();

  /** A runtime with no image mappings yet; add them with {@link #map}. */
  public ProcessContainerRuntime() {}

  /** A runtime with the given mappings (image prefix → command prefix). */
  public ProcessContainerRuntime(Map<String, List<String>> mappings) {
    mappings.forEach(this::map);
  }

  /**
   * Maps images matching {@code imagePrefix} (see class Javadoc) to {@code commandPrefix}; replaces
   * an earlier mapping of the same prefix. Thread-safe; applies to containers started afterwards.
   *
   * @return this runtime
   * @throws IllegalArgumentException when {@code imagePrefix} is blank
   */
  public ProcessContainerRuntime map(String imagePrefix, List<String> commandPrefix) {
    if (imagePrefix == null || imagePrefix.isBlank()) {
      throw new IllegalArgumentException("image prefix must not be blank");
    }
    images.put(imagePrefix, List.copyOf(commandPrefix));
    return this;
  }

  /** Same as {@link #map(String, List)}. */
  public ProcessContainerRuntime map(String imagePrefix, String... commandPrefix) {
    return map(imagePrefix, List.of(commandPrefix));
  }

  /**
   * Declares that images matching {@code imagePrefix} hold {@code program}: a container of such an
   * image whose {@code command[0]} is {@code program} runs {@code hostCommand ++ command[1..] ++
   * args} (the command replaces the entrypoint, as in Kubernetes).
   *
   * @return this runtime
   */
  public ProcessContainerRuntime mapProgram(
      String imagePrefix, String program, String... hostCommand) {
    if (imagePrefix == null || imagePrefix.isBlank() || program == null || program.isBlank()) {
      throw new IllegalArgumentException("image prefix and program must not be blank");
    }
    programs
        .computeIfAbsent(imagePrefix, k -> new ConcurrentHashMap<>())
        .put(program, List.of(hostCommand));
    return this;
  }

  private Optional<List<String>> programFor(String image, List<String> command) {
    if (command.isEmpty()) {
      return Optional.empty();
    }
    String best = null;
    for (Map.Entry<String, Map<String, List<String>>> e : programs.entrySet()) {
      String key = e.getKey();
      if (matches(key, image)
          && e.getValue().containsKey(command.get(0))
          && (best == null || key.length() > best.length())) {
        best = key;
      }
    }
    return best == null ? Optional.empty() : Optional.of(programs.get(best).get(command.get(0)));
  }

  /** The command prefix for {@code image} by the longest matching key, if any. */
  public Optional<List<String>> commandPrefixFor(String image) {
    String best = null;
    for (String key : images.keySet()) {
      if (matches(key, image) && (best == null || key.length() > best.length())) {
        best = key;
      }
    }
    return best == null ? Optional.empty() : Optional.of(images.get(best));
  }

  static boolean matches(String key, String image) {
    if (image == null || !image.startsWith(key)) {
      return false;
    }
    if (image.length() == key.length()) {
      return true;
    }
    char last = key.charAt(key.length() - 1);
    if (last == ':' || last == '@' || last == '/') {
      return true;
    }
    char next = image.charAt(key.length());
    return next == ':' || next == '@' || next == '/';
  }

  /**
   * The argv a container would run with: {@code prefix ++ command ++ args}.
   *
   * @throws ContainerStartException {@code ErrImagePull} when no key matches the image; {@code
   *     RunContainerError} when argv would be empty
   */
  public List<String> argv(ContainerLaunch launch) throws ContainerStartException {
    Optional<List<String>> program = programFor(launch.image(), launch.command());
    if (program.isPresent()) {
      List<String> argv = new ArrayList<>(program.get());
      argv.addAll(launch.command().subList(1, launch.command().size()));
      argv.addAll(launch.args());
      return argv;
    }
    List<String> prefix =
        commandPrefixFor(launch.image())
            .orElseThrow(
                () ->
                    new ContainerStartException(
                        "ErrImagePull",
                        "no local command is mapped for image \""
                            + launch.image()
                            + "\" of container "
                            + launch.containerName()
                            + " (mapped image prefixes: "
                            + new java.util.TreeSet<>(images.keySet())
                            + "); map it with ProcessContainerRuntime.map(prefix, command...)"));
    List<String> argv = new ArrayList<>(prefix);
    argv.addAll(launch.command());
    argv.addAll(launch.args());
    if (argv.isEmpty()) {
      throw new ContainerStartException(
          "RunContainerError",
          "image \""
              + launch.image()
              + "\" maps to an empty command prefix and container "
              + launch.containerName()
              + " sets neither command nor args: nothing to run");
    }
    return argv;
  }

  @Override
  public ContainerProcess start(ContainerLaunch launch) throws ContainerStartException {
    List<String> argv = argv(launch);
    List<String> resolved = new ArrayList<>(argv);
    resolved.set(0, resolveOnPath(argv.get(0), launch.env().get("PATH")));
    if (launch.identity() != null) {
      List<String> setpriv = new ArrayList<>(launch.identity().setpriv());
      setpriv.set(0, resolveOnPath("setpriv", "/usr/bin:/bin:/usr/sbin:/sbin"));
      setpriv.addAll(resolved);
      resolved = setpriv;
    }
    try {
      return ManagedProcess.start(
          launch.namespace() + "/" + launch.podName() + "/" + launch.containerName(),
          resolved,
          launch.env(),
          launch.workingDir(),
          launch.logFile());
    } catch (IOException e) {
      throw new ContainerStartException(
          "RunContainerError",
          "cannot start container "
              + launch.containerName()
              + " as "
              + argv
              + ": "
              + e.getMessage(),
          e);
    }
  }

  /** Resolves a bare program name against {@code path} (the container's PATH), as a shell would. */
  static String resolveOnPath(String program, String path) throws ContainerStartException {
    if (program.contains("/")) {
      return program;
    }
    if (path != null) {
      for (String dir : path.split(":")) {
        if (dir.isEmpty()) {
          continue;
        }
        java.nio.file.Path candidate = java.nio.file.Path.of(dir, program);
        if (java.nio.file.Files.isExecutable(candidate)) {
          return candidate.toString();
        }
      }
    }
    throw new ContainerStartException(
        "RunContainerError",
        "executable \"" + program + "\" not found in the container's PATH (" + path + ")");
  }
}
