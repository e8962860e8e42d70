package io.tensorcast.dataplane.store;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * How many more bytes a store under a root can really hold right now: the least of
 *
 * <ul>
 *   <li>the memory cgroup's headroom, at this process's cgroup and every ancestor with a limit:
 *       cgroup v2 {@code memory.max - (memory.current - inactive_file)}, or v1 {@code
 *       memory.limit_in_bytes - (memory.usage_in_bytes - total_inactive_file)} (inactive file cache
 *       is reclaimable; tmpfs pages are not, and are charged to the cgroup that first touched
 *       them);
 *   <li>{@code MemAvailable} of {@code /proc/meminfo} (tmpfs pages cannot be reclaimed without
 *       swap, so a tmpfs cannot safely take more than this);
 *   <li>the root's file system free space ({@code statvfs} via {@link FileStore#getUsableSpace()}):
 *       a tmpfs's {@code size=} may exceed real memory, so its {@code df} alone is not the budget.
 * </ul>
 *
 * The memory budget is not what it seems. Measure at start, after the store's recovery: the bytes
 * of adopted artifacts are already used and are not in this number.
 *
 * @param bytes the least of the bounds, {@code >= 0}
 * @param boundBy name of the bound that set {@code bytes}: {@value #CGROUP_V2}, {@value
 *     #CGROUP_V1}, {@value #MEM_AVAILABLE} or {@value #FILESYSTEM}
 * @param description one line with the number, what bound it and the other bounds
 * @param bounds every bound found, with its numbers
 */
public record MemoryBudget(long bytes, String boundBy, String description, List<Bound> bounds) {
  public static final String CGROUP_V2 = "cgroup memory.max";
  public static final String CGROUP_V1 = "cgroup memory.limit_in_bytes";
  public static final String MEM_AVAILABLE = "MemAvailable";
  public static final String FILESYSTEM = "filesystem free space";

  /** v1 reports "no limit" as a huge page-aligned number near 2^63. */
  private static final long V1_UNLIMITED = 1L << 62;

  /**
   * One bound.
   *
   * @param name what was measured (one of the constants above)
   * @param availableBytes bytes still available under this bound, {@code >= 0}
   * @param detail where the numbers come from, with the numbers
   */
  public record Bound(String name, long availableBytes, String detail) {}

  public MemoryBudget {
    Objects.requireNonNull(boundBy, "boundBy");
    Objects.requireNonNull(description, "description");
    bounds = List.copyOf(bounds);
  }

  /**
   * Measures the budget for a store at {@code root} (which need not exist yet: its nearest existing
   * ancestor's file system is measured).
   *
   * @throws UncheckedIOException if {@code /proc} or the file system cannot be read
   */
  public static MemoryBudget detect(Path root) {
    try {
      Path existing = root.toAbsolutePath().normalize();
      while (existing != null && !Files.exists(existing)) {
        existing = existing.getParent();
      }
      if (existing == null) {
        throw new IOException("no part of " + root + " exists");
      }
      FileStore fs = Files.getFileStore(existing);
      return detect(
          Path.of("/"),
          readOrEmpty(Path.of("/proc/self/cgroup")),
          readOrEmpty(Path.of("/proc/self/mountinfo")),
          readOrEmpty(Path.of("/proc/meminfo")),
          fs.getUsableSpace(),
          existing + " on " + fs.type() + " " + fs.name() + " of " + fs.getTotalSpace() + " bytes");
    } catch (IOException e) {
      throw new UncheckedIOException("cannot measure the memory budget for " + root, e);
    }
  }

  /**
   * The measurement from given inputs (for tests with a fake tree).
   *
   * @param fsRoot where the paths of {@code mountinfo} are resolved ({@code /} for real)
   * @param procSelfCgroup text of {@code /proc/self/cgroup}
   * @param mountinfo text of {@code /proc/self/mountinfo}
   * @param meminfo text of {@code /proc/meminfo}
   * @param fsUsableBytes free bytes of the root's file system
   * @param fsDetail which file system that is
   */
  static MemoryBudget detect(
      Path fsRoot,
      String procSelfCgroup,
      String mountinfo,
      String meminfo,
      long fsUsableBytes,
      String fsDetail)
      throws IOException {
    List<Bound> bounds = new ArrayList<>(cgroupBounds(fsRoot, procSelfCgroup, mountinfo));
    Long memAvailableKb = meminfoKb(meminfo, "MemAvailable:");
    if (memAvailableKb != null) {
      bounds.add(
          new Bound(
              MEM_AVAILABLE,
              memAvailableKb * 1024,
              "/proc/meminfo MemAvailable " + memAvailableKb + " kB"));
    }
    bounds.add(
        new Bound(
            FILESYSTEM,
            Math.max(0, fsUsableBytes),
            fsDetail + ": " + fsUsableBytes + " bytes free"));
    Bound min = bounds.stream().min(Comparator.comparingLong(Bound::availableBytes)).orElseThrow();
    StringBuilder d =
        new StringBuilder()
            .append(min.availableBytes())
            .append(" bytes, bound by ")
            .append(min.name())
            .append(" (")
            .append(min.detail())
            .append(")");
    for (Bound b : bounds) {
      if (b != min) {
        d.append("; ").append(b.name()).append(": ").append(b.availableBytes()).append(" bytes");
      }
    }
    return new MemoryBudget(min.availableBytes(), min.name(), d.toString(), bounds);
  }

  /** The tightest bound of each cgroup version that applies (0, 1 or 2 bounds). */
  private static List<Bound> cgroupBounds(Path fsRoot, String procSelfCgroup, String mountinfo)
      throws IOException {
    String v2Path = null;
    String v1Path = null;
    for (String line : procSelfCgroup.split("\n")) {
      String[] f = line.split(":", 3);
      if (f.length < 3) {
        continue;
      }
      if (f[0].equals("0") && f[1].isEmpty()) {
        v2Path = f[2];
      } else if (List.of(f[1].split(",")).contains("memory")) {
        v1Path = f[2];
      }
    }
    String[] v2Mount = null;
    String[] v1Mount = null;
    for (String line : mountinfo.split("\n")) {
      int dash = line.indexOf(" - ");
      if (dash < 0) {
        continue;
      }
      String[] left = line.substring(0, dash).split(" ");
      String[] right = line.substring(dash + 3).split(" ");
      if (left.length < 5 || right.length < 1) {
        continue;
      }
      String[] mount = {unescape(left[3]), unescape(left[4])};
      if (right[0].equals("cgroup2") && v2Mount == null) {
        v2Mount = mount;
      } else if (right[0].equals("cgroup")
          && right.length >= 3
          && List.of(right[2].split(",")).contains("memory")) {
        v1Mount = mount;
      }
    }
    List<Bound> out = new ArrayList<>();
    if (v2Path != null && v2Mount != null) {
      Bound b = walk(fsRoot, v2Mount, v2Path, true);
      if (b != null) {
        out.add(b);
      }
    }
    if (v1Path != null && v1Mount != null) {
      Bound b = walk(fsRoot, v1Mount, v1Path, false);
      if (b != null) {
        out.add(b);
      }
    }
    return out;
  }

  /** Walks from the process's cgroup up to the mount point; returns the tightest limit's bound. */
  private static Bound walk(Path fsRoot, String[] mount, String cgroupPath, boolean v2)
      throws IOException {
    String mountRoot = mount[0];
    Path mountPoint = fsRoot.resolve(mount[1].substring(1));
    String rel;
    if (mountRoot.equals("/")) {
      rel = cgroupPath;
    } else if (cgroupPath.equals(mountRoot) || cgroupPath.startsWith(mountRoot + "/")) {
      rel = cgroupPath.substring(mountRoot.length());
    } else {
      rel = "/"; // a cgroup namespace shows the process's cgroup as the mount's root
    }
    Path dir = rel.equals("/") || rel.isEmpty() ? mountPoint : mountPoint.resolve(rel.substring(1));
    Bound best = null;
    for (Path d = dir; d != null && d.startsWith(mountPoint); d = d.getParent()) {
      Bound b = v2 ? v2Bound(d) : v1Bound(d);
      if (b != null && (best == null || b.availableBytes() < best.availableBytes())) {
        best = b;
      }
    }
    return best;
  }

  private static Bound v2Bound(Path d) throws IOException {
    Path max = d.resolve("memory.max");
    if (!Files.isRegularFile(max)) {
      return null;
    }
    String limitText = Files.readString(max).trim();
    if (limitText.equals("max")) {
      return null;
    }
    long limit = Long.parseLong(limitText);
    long current = Long.parseLong(Files.readString(d.resolve("memory.current")).trim());
    long inactive = statValue(d.resolve("memory.stat"), "inactive_file");
    long available = Math.max(0, limit - Math.max(0, current - inactive));
    return new Bound(
        CGROUP_V2,
        available,
        d
            + ": memory.max "
            + limit
            + ", memory.current "
            + current
            + ", inactive_file "
            + inactive);
  }

  private static Bound v1Bound(Path d) throws IOException {
    Path limitFile = d.resolve("memory.limit_in_bytes");
    if (!Files.isRegularFile(limitFile)) {
      return null;
    }
    long limit = Long.parseLong(Files.readString(limitFile).trim());
    if (limit >= V1_UNLIMITED) {
      return null;
    }
    long usage = Long.parseLong(Files.readString(d.resolve("memory.usage_in_bytes")).trim());
    long inactive = statValue(d.resolve("memory.stat"), "total_inactive_file");
    long available = Math.max(0, limit - Math.max(0, usage - inactive));
    return new Bound(
        CGROUP_V1,
        available,
        d
            + ": memory.limit_in_bytes "
            + limit
            + ", memory.usage_in_bytes "
            + usage
            + ", total_inactive_file "
            + inactive);
  }

  private static long statValue(Path stat, String key) throws IOException {
    if (!Files.isRegularFile(stat)) {
      return 0;
    }
    for (String line : Files.readAllLines(stat)) {
      String[] kv = line.trim().split("\\s+");
      if (kv.length == 2 && kv[0].equals(key)) {
        return Long.parseLong(kv[1]);
      }
    }
    return 0;
  }

  private static Long meminfoKb(String meminfo, String key) {
    for (String line : meminfo.split("\n")) {
      if (line.startsWith(key)) {
        return Long.parseLong(line.substring(key.length()).trim().split("\\s+")[0]);
      }
    }
    return null;
  }

  /** Decodes the octal escapes of mountinfo ({@code \040} for a space). */
  private static String unescape(String s) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' && i + 3 < s.length()) {
        String oct = s.substring(i + 1, i + 4);
        if (oct.chars().allMatch(ch -> ch >= '0' && ch <= '7')) {
          b.append((char) Integer.parseInt(oct, 8));
          i += 3;
          continue;
        }
      }
      b.append(c);
    }
    return b.toString();
  }

  private static String readOrEmpty(Path p) throws IOException {
    return Files.exists(p) ? Files.readString(p) : "";
  }
}
