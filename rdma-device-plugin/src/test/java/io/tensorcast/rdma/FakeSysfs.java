package io.tensorcast.rdma;

import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A fake sysfs + /dev tree in the kernel's layout, built by a test under a temp directory: {@code
 * sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,rate}}, {@code
 * sys/class/infiniband/<dev>/device/numa_node}, {@code sys/class/infiniband_verbs/uverbsN/ibdev},
 * {@code dev/infiniband/{uverbsN,rdma_cm}}. Device files are plain files (only existence matters).
 */
public final class FakeSysfs {

  private final Path sysRoot;
  private final Path devRoot;

  public FakeSysfs(Path dir) {
    this.sysRoot = dir.resolve("sys");
    this.devRoot = dir.resolve("dev");
    mkdirs(sysRoot.resolve("class"));
    mkdirs(devRoot);
  }

  public Path sysRoot() {
    return sysRoot;
  }

  public Path devRoot() {
    return devRoot;
  }

  /**
   * Adds a one-port device as a real mlx5 HCA shows it.
   *
   * @param state logical state text as in sysfs, e.g. {@code "4: ACTIVE"} or {@code "1: DOWN"}
   */
  public FakeSysfs device(
      String name, int uverbs, int numaNode, String state, String linkLayer, String rate) {
    Path dev = sysRoot.resolve("class/infiniband").resolve(name);
    write(dev.resolve("device/numa_node"), numaNode + "\n");
    port(name, 1, state, state.contains("ACTIVE") ? "5: LinkUp" : "3: Disabled", linkLayer, rate);
    write(sysRoot.resolve("class/infiniband_verbs/uverbs" + uverbs + "/ibdev"), name + "\n");
    write(sysRoot.resolve("class/infiniband_verbs/abi_version"), "6\n");
    write(devRoot.resolve("infiniband/uverbs" + uverbs), "");
    write(devRoot.resolve("infiniband/rdma_cm"), "");
    return this;
  }

  /** Adds or rewrites port {@code port} of device {@code name}. */
  public FakeSysfs port(
      String name, int port, String state, String physState, String linkLayer, String rate) {
    Path p = sysRoot.resolve("class/infiniband").resolve(name).resolve("ports/" + port);
    write(p.resolve("state"), state + "\n");
    write(p.resolve("phys_state"), physState + "\n");
    write(p.resolve("link_layer"), linkLayer + "\n");
    write(p.resolve("rate"), rate + "\n");
    return this;
  }

  /** Sets the logical state of port 1, e.g. {@code "1: DOWN"}, {@code "4: ACTIVE"}. */
  public FakeSysfs state(String name, String state) {
    Path p = sysRoot.resolve("class/infiniband").resolve(name).resolve("ports/1");
    write(p.resolve("state"), state + "\n");
    write(p.resolve("phys_state"), state.contains("ACTIVE") ? "5: LinkUp\n" : "3: Disabled\n");
    return this;
  }

  /** Removes a device's sysfs directory (hot unplug / driver unload). */
  public FakeSysfs remove(String name) {
    try {
      TestFiles.deleteTree(sysRoot.resolve("class/infiniband").resolve(name));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  /** Removes a file under the dev root, e.g. {@code infiniband/uverbs0}. */
  public FakeSysfs removeDev(String relative) {
    try {
      Files.deleteIfExists(devRoot.resolve(relative));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  private static void write(Path file, String text) {
    mkdirs(file.getParent());
    try {
      Files.writeString(file, text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void mkdirs(Path dir) {
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
