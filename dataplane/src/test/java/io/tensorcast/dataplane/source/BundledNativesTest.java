package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The native libraries beside the jar are used only when they are the jar's own: same size and
 * CRC-32 as its entries (a tree left beside a newer jar is not).
 */
class BundledNativesTest {
  @TempDir Path tmp;

  /** The class path's copy of {@code resource}, written to {@code dir/name}. */
  private static Path copyOf(String resource, Path dir, String name) throws Exception {
    Files.createDirectories(dir);
    try (InputStream in = BundledNatives.class.getClassLoader().getResourceAsStream(resource)) {
      assertThat(in).as(resource + " on the class path").isNotNull();
      Path p = dir.resolve(name);
      Files.copy(in, p);
      return p;
    }
  }

  @Test
  void aFileIsTheJarsWhenItsSizeAndCrcAreTheEntrysAndNotOtherwise() throws Exception {
    String crt = BundledNatives.crtResource();
    assumeTrue(crt != null, "no Common Runtime library for this platform");
    Path same = copyOf(crt, tmp.resolve("same"), "libaws-crt-jni.so");
    assertThat(BundledNatives.differsFromJar(same, crt)).isNull();

    Path longer = copyOf(crt, tmp.resolve("longer"), "libaws-crt-jni.so");
    Files.write(longer, new byte[] {0}, StandardOpenOption.APPEND);
    assertThat(BundledNatives.differsFromJar(longer, crt))
        .contains(longer.toString())
        .contains("CRC-32")
        .contains(String.valueOf(Files.size(same)));

    Path flipped = copyOf(crt, tmp.resolve("flipped"), "libaws-crt-jni.so");
    byte[] b = Files.readAllBytes(flipped);
    b[b.length / 2] ^= 1;
    Files.write(flipped, b);
    assertThat(BundledNatives.differsFromJar(flipped, crt))
        .as("same size, other bytes")
        .isNotNull();

    assertThat(BundledNatives.differsFromJar(tmp.resolve("missing.so"), crt))
        .startsWith("cannot read");
    assertThat(BundledNatives.differsFromJar(same, "no/such/entry.so"))
        .isEqualTo("the jar has no no/such/entry.so");
  }

  @Test
  void jnasBootPathIsKeptForTheJarsDispatchLibraryAndClearedForAnother() throws Exception {
    String jna = BundledNatives.jnaResource();
    assumeTrue(jna != null, "no JNA library for this platform");
    String before = System.getProperty(BundledNatives.JNA_BOOT_PATH);
    try {
      Path own = tmp.resolve("own");
      copyOf(jna, own, "libjnidispatch.so");
      System.setProperty(BundledNatives.JNA_BOOT_PATH, own.toString());
      BundledNatives.checkJnaBootPath();
      assertThat(System.getProperty(BundledNatives.JNA_BOOT_PATH)).isEqualTo(own.toString());

      Path stale = tmp.resolve("stale");
      Files.write(
          copyOf(jna, stale, "libjnidispatch.so"), new byte[] {1}, StandardOpenOption.APPEND);
      System.setProperty(BundledNatives.JNA_BOOT_PATH, stale.toString());
      BundledNatives.checkJnaBootPath();
      assertThat(System.getProperty(BundledNatives.JNA_BOOT_PATH))
          .as("JNA would refuse another version's library with an error")
          .isNull();

      System.setProperty(BundledNatives.JNA_BOOT_PATH, tmp.resolve("empty").toString());
      BundledNatives.checkJnaBootPath();
      assertThat(System.getProperty(BundledNatives.JNA_BOOT_PATH)).isNull();

      // JNA searches every entry of a path list: one that is not the jar's clears it all.
      String list = own + java.io.File.pathSeparator + stale;
      System.setProperty(BundledNatives.JNA_BOOT_PATH, list);
      BundledNatives.checkJnaBootPath();
      assertThat(System.getProperty(BundledNatives.JNA_BOOT_PATH)).isNull();
      String ownAndEmpty = tmp.resolve("empty") + java.io.File.pathSeparator + own;
      System.setProperty(BundledNatives.JNA_BOOT_PATH, ownAndEmpty);
      BundledNatives.checkJnaBootPath();
      assertThat(System.getProperty(BundledNatives.JNA_BOOT_PATH)).isEqualTo(ownAndEmpty);
    } finally {
      if (before == null) {
        System.clearProperty(BundledNatives.JNA_BOOT_PATH);
      } else {
        System.setProperty(BundledNatives.JNA_BOOT_PATH, before);
      }
    }
  }
}
