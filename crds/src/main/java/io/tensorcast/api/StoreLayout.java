package io.tensorcast.api;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Where a node's copy of a ModelArtifact lives in the page-locked store, shared by the operator
 * (which tells each data-plane pod its store root and artifact id) and the CSI node driver (which
 * bind-mounts the copy into consumer pods):
 *
 * <pre>
 *   &lt;storeRoot&gt;/&lt;namespace&gt;.&lt;name&gt;/&lt;artifactId&gt;/...            the artifact's own files
 *   &lt;storeRoot&gt;/&lt;namespace&gt;.&lt;name&gt;/.tensorcast/&lt;artifactId&gt;.json  the store's state file
 * </pre>
 *
 * {@code <namespace>.<name>} is unique on a node because namespaces hold no '.'. The artifact id
 * changes with every generation of the ModelArtifact ({@link #artifactId}).
 */
public final class StoreLayout {

  /** The store's bookkeeping directory under a store root (the data plane's PinnedStore). */
  public static final String STATE_DIR = ".tensorcast";

  private static final int MAX_ID = 63;

  private StoreLayout() {}

  /**
   * Directory under a node's store root that holds the per-TensorShardSet store roots. It has no
   * '.', so no ModelArtifact's {@code <namespace>.<name>} directory can be named like it.
   */
  public static final String SHARD_SETS_DIR = "tensorshardsets";

  /**
   * {@code tensorshardsets/<namespace>.<name>}: the per-TensorShardSet store root under the node's
   * store root (apart from ModelArtifacts, which may share the name).
   */
  public static String shardSetDirectory(String namespace, String name) {
    return SHARD_SETS_DIR + "/" + artifactDirectory(namespace, name);
  }

  /** {@code <namespace>.<name>}: the per-artifact store root under the node's store root. */
  public static String artifactDirectory(String namespace, String name) {
    return namespace + "." + name;
  }

  /**
   * The data plane's id of one generation of an artifact: {@code <namespace>-<name>-g<generation>}
   * with '.' turned into '-', a DNS-1123 label as the store requires; when longer than 63
   * characters, the namespace-name part is cut and followed by 8 hex of its SHA-256.
   */
  public static String artifactId(String namespace, String name, long generation) {
    String base = (namespace + "-" + name).replace('.', '-');
    String suffix = "-g" + generation;
    if (base.length() + suffix.length() > MAX_ID) {
      String hash = sha256Hex(namespace + "/" + name).substring(0, 8);
      int keep = MAX_ID - suffix.length() - hash.length() - 1;
      base = base.substring(0, keep);
      while (base.endsWith("-")) {
        base = base.substring(0, base.length() - 1);
      }
      base = base + "-" + hash;
    }
    return base + suffix;
  }

  /** Lowercase hex SHA-256 of the UTF-8 bytes of {@code s}. */
  public static String sha256Hex(String s) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JRE", e);
    }
  }
}
