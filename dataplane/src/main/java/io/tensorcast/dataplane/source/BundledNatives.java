package io.tensorcast.dataplane.source;

import java.io.IOException;
import java.io.InputStream;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.jar.JarEntry;
import java.util.zip.CRC32;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The jar's native libraries unpacked beside it ({@code tensorcast-dataplane.natives/}), which the
 * launcher points the JVM at: the AWS Common Runtime's ({@code LD_LIBRARY_PATH}, so first on {@code
 * java.library.path}) and JNA's dispatch library ({@code jna.boot.library.path}). The launcher
 * checks who may write them; this class checks that they are this jar's: a tree left beside a newer
 * jar would otherwise be loaded by it (JNA refuses a dispatch library of another version with an
 * error the store cannot recover from; another Runtime's library would bind this jar's classes to
 * code they were not built with). A file is the jar's when its size and CRC-32 are those the jar's
 * directory records for the same entry (read without inflating it). Checking costs a few
 * milliseconds; inflating and writing the libraries on every start cost about 130.
 */
public final class BundledNatives {
  private static final Logger log = LoggerFactory.getLogger(BundledNatives.class);

  /** JNA's system property naming the directory it loads its dispatch library from first. */
  static final String JNA_BOOT_PATH = "jna.boot.library.path";

  private BundledNatives() {}

  /**
   * Keeps {@code jna.boot.library.path} only when it names at least one directory with a dispatch
   * library and every dispatch library on it (JNA searches each of its entries) is this jar's; else
   * clears it, so that JNA extracts its own copy as it does without the launcher. Call before JNA
   * is first used.
   */
  public static void checkJnaBootPath() {
    String path = System.getProperty(JNA_BOOT_PATH);
    if (path == null || path.isEmpty()) {
      return;
    }
    String resource = jnaResource();
    String why = resource == null ? "no JNA library for this platform in the jar" : null;
    String where = path;
    boolean found = false;
    for (String dir : entries(path)) {
      if (why != null) {
        break;
      }
      Path file = Path.of(dir).resolve(System.mapLibraryName("jnidispatch"));
      if (Files.exists(file)) {
        found = true;
        why = differsFromJar(file, resource);
        where = dir;
      }
    }
    if (why == null && !found) {
      why = "no " + System.mapLibraryName("jnidispatch") + " there";
    }
    if (why != null) {
      System.clearProperty(JNA_BOOT_PATH);
      log.warn(
          "the native libraries beside the jar are not its own ({}): JNA uses the jar's; rebuild"
              + " or remove {}",
          why,
          where);
    }
  }

  /** The directories of a search path: empty entries are the working directory, as for the JDK. */
  private static String[] entries(String path) {
    String[] dirs = path.split(java.io.File.pathSeparator, -1);
    for (int i = 0; i < dirs.length; i++) {
      if (dirs[i].isEmpty()) {
        dirs[i] = ".";
      }
    }
    return dirs;
  }

  /**
   * Why the Common Runtime's library that {@code System.loadLibrary} would load from {@code
   * java.library.path} is not this jar's, or null when it is or when there is none there (the
   * Runtime then extracts the jar's copy).
   */
  static String crtLibraryMismatch() {
    String path = System.getProperty("java.library.path", "");
    if (path.isEmpty()) {
      return null;
    }
    for (String dir : entries(path)) {
      Path file = Path.of(dir).resolve(System.mapLibraryName("aws-crt-jni"));
      if (Files.exists(file)) {
        String resource = crtResource();
        String why =
            resource == null
                ? file
                    + " is on java.library.path but the jar has no such library for this platform"
                : differsFromJar(file, resource);
        // The JVM's library path is fixed at its start: the jar's copy cannot be used instead.
        return why == null
            ? null
            : why
                + "; rebuild or remove "
                + dir
                + " (the launcher puts the native libraries beside the jar on LD_LIBRARY_PATH)";
      }
    }
    return null;
  }

  /** The jar's entry of JNA's dispatch library for this platform, or null. */
  static String jnaResource() {
    String arch = arch();
    return arch == null
        ? null
        : "com/sun/jna/linux-"
            + (arch.equals("x86_64") ? "x86-64" : "aarch64")
            + "/libjnidispatch.so";
  }

  /** The jar's entry of the Common Runtime's glibc library for this platform, or null. */
  static String crtResource() {
    String arch = arch();
    return arch == null
        ? null
        : "linux/" + (arch.equals("x86_64") ? "x86_64" : "armv8") + "/glibc/libaws-crt-jni.so";
  }

  private static String arch() {
    if (!System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).startsWith("linux")) {
      return null;
    }
    return switch (System.getProperty("os.arch", "")) {
      case "amd64", "x86_64" -> "x86_64";
      case "aarch64", "arm64" -> "aarch64";
      default -> null;
    };
  }

  /**
   * Null when {@code file} has the bytes of the class path's {@code resource} (size and CRC-32),
   * else why not.
   */
  static String differsFromJar(Path file, String resource) {
    URL url = BundledNatives.class.getClassLoader().getResource(resource);
    if (url == null) {
      return "the jar has no " + resource;
    }
    long size;
    long crc;
    try {
      URLConnection c = url.openConnection();
      if (c instanceof JarURLConnection jar) {
        // The jar's directory, opened once and cached by the JDK for the second library's check.
        JarEntry e = jar.getJarEntry();
        size = e.getSize();
        crc = e.getCrc();
      } else {
        long[] sc = sizeAndCrc(c.getInputStream());
        size = sc[0];
        crc = sc[1];
      }
    } catch (IOException e) {
      return "cannot read the jar's " + resource + ": " + e.getMessage();
    }
    try {
      long[] sc = sizeAndCrc(file);
      if (sc[0] != size || sc[1] != crc) {
        return file
            + " has "
            + sc[0]
            + " bytes with CRC-32 "
            + Long.toHexString(sc[1])
            + ", the jar's "
            + size
            + " bytes with "
            + Long.toHexString(crc);
      }
      return null;
    } catch (IOException e) {
      return "cannot read " + file + ": " + e.getMessage();
    }
  }

  private static long[] sizeAndCrc(Path file) throws IOException {
    CRC32 crc = new CRC32();
    long size = 0;
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
      while (ch.read(b.clear()) >= 0) {
        b.flip();
        size += b.remaining();
        crc.update(b);
      }
    }
    return new long[] {size, crc.getValue()};
  }

  private static long[] sizeAndCrc(InputStream in) throws IOException {
    CRC32 crc = new CRC32();
    long size = 0;
    try (in) {
      byte[] b = new byte[1 << 16];
      for (int n = in.read(b); n >= 0; n = in.read(b)) {
        crc.update(b, 0, n);
        size += n;
      }
    }
    return new long[] {size, crc.getValue()};
  }
}
