package io.tensorcast.rdma.discovery;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Finds RDMA devices the way the kernel exposes them (Linux {@code
 * Documentation/ABI/stable/sysfs-class-infiniband}):
 *
 * <ul>
 *   <li>{@code <sysRoot>/class/infiniband/<dev>/ports/<n>/state} ({@code "4: ACTIVE"}), {@code
 *       phys_state} ({@code "5: LinkUp"}), {@code link_layer} ({@code InfiniBand}|{@code
 *       Ethernet}), {@code rate} ({@code "200 Gb/sec (4X HDR)"});
 *   <li>{@code <sysRoot>/class/infiniband/<dev>/device/numa_node};
 *   <li>{@code <sysRoot>/class/infiniband_verbs/uverbsN/ibdev} naming the device that {@code
 *       <devRoot>/infiniband/uverbsN} serves;
 *   <li>{@code <devRoot>/infiniband/rdma_cm}.
 * </ul>
 *
 * <p>Both roots are configurable so that a container can see the host's sysfs and {@code /dev}
 * under other paths, and tests can build a fake tree. Files that vanish during a scan (a device
 * being removed) count as missing, never as an error. A node without {@code class/infiniband} has
 * no devices.
 */
public final class SysfsRdmaDiscovery {

  private static final Pattern STATE = Pattern.compile("^\\s*\\d+\\s*:\\s*(\\S+)\\s*$");
  private static final Pattern RATE =
      Pattern.compile("^\\s*(\\d+(?:\\.\\d+)?)\\s*Gb/sec.*", Pattern.DOTALL);

  private final Path sysRoot;
  private final Path devRoot;

  /**
   * @param sysRoot where the host's sysfs is visible ({@code /sys} on the host)
   * @param devRoot where the host's {@code /dev} is visible ({@code /dev} on the host)
   */
  public SysfsRdmaDiscovery(Path sysRoot, Path devRoot) {
    this.sysRoot = sysRoot;
    this.devRoot = devRoot;
  }

  /** The sysfs root this discovery reads. */
  public Path sysRoot() {
    return sysRoot;
  }

  /** The dev root this discovery checks device files under. */
  public Path devRoot() {
    return devRoot;
  }

  /**
   * Scans the tree once.
   *
   * @return the devices found (empty when {@code <sysRoot>/class/infiniband} does not exist)
   * @throws UncheckedIOException when a directory that exists cannot be listed (e.g. permissions)
   */
  public RdmaInventory discover() {
    Path classDir = sysRoot.resolve("class/infiniband");
    Map<String, String> uverbsByDevice = uverbsByDevice();
    List<RdmaDevice> devices = new ArrayList<>();
    for (Path devDir : listDirs(classDir)) {
      String name = devDir.getFileName().toString();
      Optional<String> uverbs = Optional.ofNullable(uverbsByDevice.get(name));
      boolean present =
          uverbs.isPresent() && Files.exists(devRoot.resolve("infiniband").resolve(uverbs.get()));
      devices.add(new RdmaDevice(name, ports(devDir), uverbs, present, numaNode(devDir)));
    }
    devices.sort(Comparator.comparing(RdmaDevice::name));
    boolean rdmaCm = Files.exists(devRoot.resolve("infiniband/rdma_cm"));
    return new RdmaInventory(devices, rdmaCm);
  }

  private Map<String, String> uverbsByDevice() {
    Map<String, String> map = new HashMap<>();
    for (Path verbsDir : listDirs(sysRoot.resolve("class/infiniband_verbs"))) {
      String verbs = verbsDir.getFileName().toString();
      if (!verbs.startsWith("uverbs")) {
        continue;
      }
      String ibdev = read(verbsDir.resolve("ibdev"));
      if (ibdev != null && !ibdev.isBlank()) {
        map.putIfAbsent(ibdev.strip(), verbs);
      }
    }
    return map;
  }

  private List<RdmaPort> ports(Path devDir) {
    List<RdmaPort> ports = new ArrayList<>();
    for (Path portDir : listDirs(devDir.resolve("ports"))) {
      int number;
      try {
        number = Integer.parseInt(portDir.getFileName().toString());
      } catch (NumberFormatException e) {
        continue;
      }
      String rate = orEmpty(read(portDir.resolve("rate")));
      ports.add(
          new RdmaPort(
              number,
              stateName(read(portDir.resolve("state"))),
              stateName(read(portDir.resolve("phys_state"))),
              orUnknown(read(portDir.resolve("link_layer"))),
              rate,
              rateGbps(rate)));
    }
    ports.sort(Comparator.comparingInt(RdmaPort::port));
    return ports;
  }

  private static int numaNode(Path devDir) {
    String text = read(devDir.resolve("device/numa_node"));
    if (text == null) {
      return -1;
    }
    try {
      int node = Integer.parseInt(text.strip());
      return node < 0 ? -1 : node;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** {@code "4: ACTIVE"} to {@code ACTIVE}; a bare word stays as it is; missing is UNKNOWN. */
  static String stateName(String text) {
    if (text == null || text.isBlank()) {
      return RdmaPort.UNKNOWN;
    }
    Matcher m = STATE.matcher(text);
    return m.matches() ? m.group(1) : text.strip();
  }

  /** {@code "200 Gb/sec (4X HDR)"} to 200.0; NaN when the text has another shape. */
  static double rateGbps(String rate) {
    Matcher m = RATE.matcher(rate);
    return m.matches() ? Double.parseDouble(m.group(1)) : Double.NaN;
  }

  private static String orUnknown(String text) {
    return text == null || text.isBlank() ? RdmaPort.UNKNOWN : text.strip();
  }

  private static String orEmpty(String text) {
    return text == null ? "" : text.strip();
  }

  private static String read(Path file) {
    try {
      return Files.readString(file);
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      // sysfs files of a device being removed answer ENODEV/EIO: the value is unknown.
      return null;
    }
  }

  private static List<Path> listDirs(Path dir) {
    List<Path> dirs = new ArrayList<>();
    if (!Files.isDirectory(dir)) {
      return dirs;
    }
    try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
      for (Path p : stream) {
        if (Files.isDirectory(p)) {
          dirs.add(p);
        }
      }
    } catch (NoSuchFileException e) {
      return dirs;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + dir + ": " + e.getMessage(), e);
    }
    dirs.sort(Comparator.comparing(p -> p.getFileName().toString()));
    return dirs;
  }
}
