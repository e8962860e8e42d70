package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.KeyToPath;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The host directories behind a pod's volumes on a simulated node.
 *
 * <ul>
 *   <li>{@code hostPath}: {@code nodeRoot/<path>} (e.g. {@code /var/lib/tensorcast} on node {@code
 *       n1} → {@code <workDir>/nodes/n1/root/var/lib/tensorcast}), so pods on one node share it and
 *       pods on different nodes do not. Directories are created for type {@code ""}, {@code
 *       Directory} and {@code DirectoryOrCreate}; the parent directory (and an empty file) for
 *       {@code FileOrCreate}.
 *   <li>{@code emptyDir} (any medium), {@code persistentVolumeClaim} and any other type: an empty
 *       per-pod directory {@code <podDir>/volumes/<name>}, deleted with the pod.
 *   <li>{@code csi} (inline ephemeral): the kubelet's target path {@code
 *       nodeRoot/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount}; only its
 *       parent is created here, the driver's {@code NodePublishVolume} creates and mounts the
 *       target (see {@link CsiPlugins}).
 *   <li>{@code configMap} and {@code secret}: that per-pod directory filled with one file per key
 *       (or per {@code items} entry) when the pod starts; not updated afterwards. A missing object
 *       that is not {@code optional} stops the pod from starting with {@code
 *       CreateContainerConfigError}. Files get the item's {@code mode}, else the volume's {@code
 *       defaultMode}, else 0644; with a pod {@code fsGroup} they belong to that group and get group
 *       read (the kubelet's mask for these read-only volumes).
 *   <li>{@code emptyDir} directories are mode 0777, as the kubelet makes them; with an {@code
 *       fsGroup} they belong to that group.
 * </ul>
 */
final class PodVolumes {

  /**
   * An inline ephemeral CSI volume of a pod, as the kubelet hands it to the driver.
   *
   * @param name the volume's name in the pod
   * @param driver {@code csi.driver}
   * @param readOnly {@code csi.readOnly}
   * @param attributes {@code csi.volumeAttributes}
   * @param target the target path on this machine
   * @param volumeId the kubelet's handle: {@code csi-} + hex SHA-256 of pod UID + volume name
   */
  record CsiVolume(
      String name,
      String driver,
      boolean readOnly,
      Map<String, String> attributes,
      Path target,
      String volumeId) {}

  private final Map<String, Path> hostDirs;
  private final List<CsiVolume> csiVolumes;

  private PodVolumes(Map<String, Path> hostDirs, List<CsiVolume> csiVolumes) {
    this.hostDirs = hostDirs;
    this.csiVolumes = csiVolumes;
  }

  /** The pod's CSI volumes, in spec order. */
  List<CsiVolume> csiVolumes() {
    return csiVolumes;
  }

  /** {@code nodeRoot/var/lib/kubelet}: the kubelet's root directory on a simulated node. */
  static Path kubeletRoot(Path nodeRoot) {
    return nodeRoot.resolve("var/lib/kubelet");
  }

  /** Maps a {@code hostPath} path onto the node's root directory. */
  static Path underNodeRoot(Path nodeRoot, String hostPath) {
    String rel = hostPath.replaceFirst("^/+", "");
    Path p = rel.isEmpty() ? nodeRoot : nodeRoot.resolve(rel).normalize();
    if (!p.startsWith(nodeRoot)) {
      throw new IllegalArgumentException(
          "hostPath \"" + hostPath + "\" escapes the node's root directory " + nodeRoot);
    }
    return p;
  }

  /**
   * Creates the host directories for every volume of {@code pod} and fills configMap/secret ones.
   *
   * @throws ContainerStartException {@code CreateContainerConfigError} naming the volume and the
   *     missing object, or {@code RunContainerError} when a directory cannot be created
   */
  static PodVolumes prepare(Pod pod, Path nodeRoot, Path podDir, ObjectLookup lookup)
      throws ContainerStartException {
    String ns = pod.getMetadata().getNamespace();
    Long fsGroup =
        pod.getSpec().getSecurityContext() == null
            ? null
            : pod.getSpec().getSecurityContext().getFsGroup();
    Map<String, Path> dirs = new LinkedHashMap<>();
    List<CsiVolume> csi = new ArrayList<>();
    List<Volume> volumes =
        pod.getSpec().getVolumes() == null ? List.of() : pod.getSpec().getVolumes();
    for (Volume v : volumes) {
      try {
        if (v.getHostPath() != null) {
          Path p;
          try {
            p = underNodeRoot(nodeRoot, v.getHostPath().getPath());
          } catch (IllegalArgumentException e) {
            throw new ContainerStartException(
                "CreateContainerConfigError", "volume " + v.getName() + ": " + e.getMessage());
          }
          String type = v.getHostPath().getType() == null ? "" : v.getHostPath().getType();
          switch (type) {
            case "", "Directory", "DirectoryOrCreate" -> Files.createDirectories(p);
            case "FileOrCreate" -> {
              Files.createDirectories(p.getParent());
              if (!Files.exists(p)) {
                Files.createFile(p);
              }
            }
            default -> Files.createDirectories(p.getParent());
          }
          dirs.put(v.getName(), p);
          continue;
        }
        if (v.getCsi() != null) {
          String uid = pod.getMetadata().getUid();
          Path target =
              kubeletRoot(nodeRoot)
                  .resolve("pods")
                  .resolve(uid)
                  .resolve("volumes")
                  .resolve("kubernetes.io~csi")
                  .resolve(v.getName())
                  .resolve("mount");
          Files.createDirectories(target.getParent());
          dirs.put(v.getName(), target);
          csi.add(
              new CsiVolume(
                  v.getName(),
                  v.getCsi().getDriver(),
                  Boolean.TRUE.equals(v.getCsi().getReadOnly()),
                  v.getCsi().getVolumeAttributes() == null
                      ? Map.of()
                      : Map.copyOf(v.getCsi().getVolumeAttributes()),
                  target,
                  "csi-" + io.tensorcast.api.StoreLayout.sha256Hex(uid + v.getName())));
          continue;
        }
        Path dir = podDir.resolve("volumes").resolve(v.getName());
        Files.createDirectories(dir);
        dirs.put(v.getName(), dir);
        if (v.getEmptyDir() != null) {
          Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
          if (fsGroup != null) {
            Files.setAttribute(dir, "unix:gid", fsGroup.intValue());
          }
        }
        if (v.getConfigMap() != null) {
          var src = v.getConfigMap();
          Map<String, byte[]> data = lookup.configMap(ns, src.getName());
          if (data == null) {
            if (Boolean.TRUE.equals(src.getOptional())) {
              continue;
            }
            throw new ContainerStartException(
                "CreateContainerConfigError",
                "volume " + v.getName() + ": configmap \"" + src.getName() + "\" not found");
          }
          writeItems(
              dir,
              data,
              src.getItems(),
              v.getName(),
              "ConfigMap " + ns + "/" + src.getName(),
              src.getDefaultMode(),
              fsGroup);
        } else if (v.getSecret() != null) {
          var src = v.getSecret();
          Map<String, byte[]> data = lookup.secret(ns, src.getSecretName());
          if (data == null) {
            if (Boolean.TRUE.equals(src.getOptional())) {
              continue;
            }
            throw new ContainerStartException(
                "CreateContainerConfigError",
                "volume " + v.getName() + ": secret \"" + src.getSecretName() + "\" not found");
          }
          writeItems(
              dir,
              data,
              src.getItems(),
              v.getName(),
              "Secret " + ns + "/" + src.getSecretName(),
              src.getDefaultMode(),
              fsGroup);
        }
      } catch (IOException e) {
        throw new ContainerStartException(
            "RunContainerError",
            "volume " + v.getName() + ": cannot prepare host directory: " + e.getMessage(),
            e);
      }
    }
    return new PodVolumes(dirs, List.copyOf(csi));
  }

  private static void writeItems(
      Path dir,
      Map<String, byte[]> data,
      List<KeyToPath> items,
      String volume,
      String object,
      Integer defaultMode,
      Long fsGroup)
      throws IOException, ContainerStartException {
    int mode = defaultMode == null ? 0644 : defaultMode;
    if (items == null || items.isEmpty()) {
      for (Map.Entry<String, byte[]> e : data.entrySet()) {
        Path f = dir.resolve(e.getKey());
        Files.write(f, e.getValue());
        setMode(f, mode, fsGroup);
      }
      return;
    }
    for (KeyToPath item : items) {
      byte[] value = data.get(item.getKey());
      if (value == null) {
        throw new ContainerStartException(
            "CreateContainerConfigError",
            "volume " + volume + ": couldn't find key " + item.getKey() + " in " + object);
      }
      Path target = dir.resolve(item.getPath()).normalize();
      if (!target.startsWith(dir)) {
        throw new ContainerStartException(
            "CreateContainerConfigError",
            "volume " + volume + ": item path \"" + item.getPath() + "\" escapes the volume");
      }
      Files.createDirectories(target.getParent());
      Files.write(target, value);
      setMode(target, item.getMode() == null ? mode : item.getMode(), fsGroup);
    }
  }

  /** Sets {@code mode} (the low 9 bits); with an fsGroup, that group and group read. */
  private static void setMode(Path file, int mode, Long fsGroup) throws IOException {
    int m = mode & 0777;
    if (fsGroup != null) {
      Files.setAttribute(file, "unix:gid", fsGroup.intValue());
      m |= 0440;
    }
    StringBuilder rwx = new StringBuilder();
    for (int shift = 6; shift >= 0; shift -= 3) {
      int bits = (m >> shift) & 7;
      rwx.append((bits & 4) != 0 ? 'r' : '-')
          .append((bits & 2) != 0 ? 'w' : '-')
          .append((bits & 1) != 0 ? 'x' : '-');
    }
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(rwx.toString()));
  }

  /** The host directory (or file) behind volume {@code name}, or {@code null}. */
  Path hostDir(String name) {
    return hostDirs.get(name);
  }

  /**
   * The mount table of {@code container}: each {@code volumeMount}'s {@code mountPath} → the
   * volume's host directory plus {@code subPath}.
   *
   * @throws ContainerStartException {@code CreateContainerConfigError} when a mount names no volume
   *     of the pod
   */
  MountTable mountsFor(Container container) throws ContainerStartException {
    List<MountTable.Mount> out = new ArrayList<>();
    if (container.getVolumeMounts() != null) {
      for (VolumeMount vm : container.getVolumeMounts()) {
        Path host = hostDirs.get(vm.getName());
        if (host == null) {
          throw new ContainerStartException(
              "CreateContainerConfigError",
              "container "
                  + container.getName()
                  + ": volumeMount "
                  + vm.getMountPath()
                  + " names volume \""
                  + vm.getName()
                  + "\", which the pod does not have");
        }
        if (vm.getSubPath() != null && !vm.getSubPath().isEmpty()) {
          host = host.resolve(vm.getSubPath()).normalize();
          try {
            Files.createDirectories(host);
          } catch (IOException e) {
            throw new ContainerStartException(
                "RunContainerError",
                "container " + container.getName() + ": cannot create subPath " + host,
                e);
          }
        }
        out.add(
            new MountTable.Mount(vm.getMountPath(), host, Boolean.TRUE.equals(vm.getReadOnly())));
      }
    }
    return new MountTable(out);
  }
}
