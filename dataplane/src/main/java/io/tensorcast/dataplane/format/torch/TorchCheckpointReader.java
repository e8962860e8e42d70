package io.tensorcast.dataplane.format.torch;

import static io.tensorcast.dataplane.format.torch.TorchFormatException.INVALID_ARCHIVE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.LIMIT_EXCEEDED;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.MALFORMED_PICKLE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.MISSING_STORAGE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.NOT_A_CHECKPOINT;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.STORAGE_SIZE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.UNSAFE_ENTRY_NAME;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.UNSUPPORTED_FEATURE;

import io.tensorcast.dataplane.format.torch.RestrictedUnpickler.Global;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint.Format;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import org.apache.commons.compress.archivers.zip.ZipArchiveEntry;
import org.apache.commons.compress.archivers.zip.ZipFile;

/**
 * Reads torch checkpoints ({@code .pt}, {@code .pth}, {@code .bin} written by {@code torch.save})
 * with the semantics of {@code torch.load(weights_only=True)}, reading only the container's
 * directory and the pickle; storage bytes stay in the file.
 *
 * <p>Containers (torch/serialization.py, caffe2/serialize/inline_container.cc):
 *
 * <ul>
 *   <li><b>zip</b> (default since torch 1.6): records under one inner directory {@code <prefix>/}
 *       (found as the directory holding {@code data.pkl}; it need not equal the file name): {@code
 *       data.pkl} (the pickle), {@code data/<key>} (each storage, stored uncompressed, 64-byte
 *       aligned), {@code byteorder} ({@code little}/{@code big}, absent before torch 1.12 =
 *       little), {@code version}, and since torch 2.x {@code .format_version}, {@code
 *       .storage_alignment}, {@code .data/serialization_id}. Storage data offsets come from the zip
 *       library (local file headers), so a tensor's bytes can be served straight from the file.
 *   <li><b>legacy</b> ({@code _use_new_zipfile_serialization=False}): pickles of the magic number
 *       0x1950a86a20f9469cfc6c, the protocol version 1001, sys_info, the object, the list of
 *       storage keys; then per key an 8-byte little-endian element count and the raw little-endian
 *       elements.
 * </ul>
 *
 * <p>Refused with a {@link TorchFormatException}: TorchScript archives ({@code constants.pkl},
 * {@code code/}, {@code model.json}), the pre-0.1.10 TAR container, any pickle global outside the
 * weights_only allowlist (see {@link RestrictedUnpickler}), unsafe zip entry names, storages whose
 * size disagrees with their element count, tensors reaching outside their storage, and input over
 * the {@link TorchLimits}.
 */
public final class TorchCheckpointReader {
  /** Legacy format magic number, pickled as the first object (torch.serialization.MAGIC_NUMBER). */
  static final BigInteger LEGACY_MAGIC = new BigInteger("1950a86a20f9469cfc6c", 16);

  /** Legacy protocol version (torch.serialization.PROTOCOL_VERSION). */
  static final long LEGACY_PROTOCOL_VERSION = 1001;

  private static final byte[] ZIP_MAGIC = {'P', 'K', 3, 4};

  /** Pickle protocol 2 + LONG1 10 bytes of the magic number: how every legacy file starts. */
  private static final byte[] LEGACY_PREFIX = {
    (byte) 0x80,
    2,
    (byte) 0x8a,
    0x0a,
    0x6c,
    (byte) 0xfc,
    (byte) 0x9c,
    0x46,
    (byte) 0xf9,
    0x20,
    0x6a,
    (byte) 0xa8,
    0x50,
    0x19
  };

  private TorchCheckpointReader() {}

  /**
   * Whether {@code head} (the first bytes of a file, at least 14 for a certain answer) starts like
   * a torch checkpoint: a zip local file header or the legacy format's pickled magic number.
   */
  public static boolean looksLikeCheckpoint(byte[] head) {
    return startsWith(head, ZIP_MAGIC) || startsWith(head, LEGACY_PREFIX);
  }

  /** Reads a local file with {@link TorchLimits#DEFAULT}. */
  public static TorchCheckpoint read(Path file) throws TorchFormatException, IOException {
    try (ByteSource.FileByteSource src = ByteSource.open(file)) {
      return read(file.toString(), src, TorchLimits.DEFAULT);
    }
  }

  /**
   * Reads the checkpoint held by {@code src}.
   *
   * @param fileName names the file in errors
   * @throws TorchFormatException naming the file, the rule and (for a refused global) the global
   * @throws IOException if reading {@code src} fails
   */
  public static TorchCheckpoint read(String fileName, ByteSource src, TorchLimits limits)
      throws TorchFormatException, IOException {
    long size = src.size();
    byte[] head = src.read(0, (int) Math.min(size, 512));
    if (startsWith(head, ZIP_MAGIC)) {
      return readZip(fileName, src, limits);
    }
    if (startsWith(head, LEGACY_PREFIX)) {
      return readLegacy(fileName, src, limits);
    }
    if (head.length >= 262
        && new String(head, 257, 5, StandardCharsets.ISO_8859_1).equals("ustar")) {
      throw new TorchFormatException(
          fileName,
          UNSUPPORTED_FEATURE,
          "a TAR archive: the pre-0.1.10 torch container is not supported; re-save it with a"
              + " current torch.save");
    }
    throw new TorchFormatException(
        fileName,
        NOT_A_CHECKPOINT,
        "starts with neither a zip header (PK\\3\\4) nor the legacy torch magic number; not a"
            + " torch.save checkpoint");
  }

  // ------------------------------------------------------------------------------------ zip

  private static TorchCheckpoint readZip(String fileName, ByteSource src, TorchLimits limits)
      throws TorchFormatException, IOException {
    ZipFile zip;
    try {
      zip = ZipFile.builder().setSeekableByteChannel(new ByteSourceChannel(src)).get();
    } catch (IOException | RuntimeException e) {
      TorchFormatException f =
          new TorchFormatException(
              fileName, INVALID_ARCHIVE, "unreadable zip archive: " + e.getMessage());
      f.initCause(e);
      throw f;
    }
    try (zip) {
      List<ZipArchiveEntry> entries = Collections.list(zip.getEntries());
      String prefix = null;
      for (ZipArchiveEntry e : entries) {
        String n = e.getName();
        if (n.startsWith("/")
            || n.contains("\\")
            || n.contains("\0")
            || (n.length() > 1 && n.charAt(1) == ':')
            || List.of(n.split("/", -1)).contains("..")) {
          throw new TorchFormatException(
              fileName,
              UNSAFE_ENTRY_NAME,
              "zip entry \"" + n + "\" is absolute or escapes the archive (\"..\", \"\\\")");
        }
      }
      for (ZipArchiveEntry e : entries) {
        String n = e.getName();
        int slash = n.indexOf('/');
        String rest = slash < 0 ? n : n.substring(slash + 1);
        if (rest.equals("constants.pkl")
            || rest.startsWith("code/")
            || rest.equals("model.json")
            || rest.equals("constants/")) {
          throw new TorchFormatException(
              fileName,
              TorchFormatException.TORCHSCRIPT,
              "TorchScript archive (has \""
                  + n
                  + "\"); not a weights checkpoint. Load it with torch.jit.load, or save the"
                  + " state_dict with torch.save");
        }
        if (slash > 0 && rest.equals("data.pkl")) {
          if (prefix != null) {
            throw new TorchFormatException(
                fileName,
                INVALID_ARCHIVE,
                "two pickles: \"" + prefix + "/data.pkl\" and \"" + n + "\"");
          }
          prefix = n.substring(0, slash);
        }
      }
      if (prefix == null) {
        throw new TorchFormatException(
            fileName,
            NOT_A_CHECKPOINT,
            "zip archive without a <prefix>/data.pkl record; not a torch.save checkpoint");
      }
      String p = prefix + "/";
      Map<String, ZipArchiveEntry> records = new HashMap<>();
      for (ZipArchiveEntry e : entries) {
        if (e.getName().startsWith(p) && records.put(e.getName(), e) != null) {
          throw new TorchFormatException(
              fileName, INVALID_ARCHIVE, "zip entry \"" + e.getName() + "\" appears twice");
        }
      }
      ByteOrder order = ByteOrder.LITTLE_ENDIAN;
      Optional<String> byteorder = smallRecord(fileName, zip, records.get(p + "byteorder"));
      if (byteorder.isPresent()) {
        switch (byteorder.get().trim()) {
          case "little" -> order = ByteOrder.LITTLE_ENDIAN;
          case "big" -> order = ByteOrder.BIG_ENDIAN;
          default ->
              throw new TorchFormatException(
                  fileName,
                  INVALID_ARCHIVE,
                  "byteorder record is \"" + byteorder.get() + "\"; torch writes little or big");
        }
      }
      OptionalLong alignment = OptionalLong.empty();
      Optional<String> align = smallRecord(fileName, zip, records.get(p + ".storage_alignment"));
      if (align.isPresent()) {
        try {
          long a = Long.parseLong(align.get().trim());
          if (a <= 0) {
            throw new NumberFormatException();
          }
          alignment = OptionalLong.of(a);
        } catch (NumberFormatException e) {
          throw new TorchFormatException(
              fileName,
              INVALID_ARCHIVE,
              ".storage_alignment record is \"" + align.get() + "\", not a positive integer");
        }
      }
      Optional<String> version =
          smallRecord(fileName, zip, records.get(p + "version")).map(String::trim);

      ZipArchiveEntry pkl = records.get(p + "data.pkl");
      ByteSource pickleSource;
      long start;
      long end;
      if (pkl.getSize() > limits.maxPickleBytes()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "data.pkl is " + pkl.getSize() + " bytes > limit " + limits.maxPickleBytes());
      }
      if (pkl.getMethod() == ZipArchiveEntry.STORED && pkl.getDataOffset() >= 0) {
        pickleSource = src;
        start = pkl.getDataOffset();
        end = start + pkl.getSize();
        if (end > src.size()) {
          throw new TorchFormatException(
              fileName, INVALID_ARCHIVE, "data.pkl runs past the end of the file");
        }
      } else {
        byte[] b = readEntry(fileName, zip, pkl, limits.maxPickleBytes());
        pickleSource = ByteSource.of(b);
        start = 0;
        end = b.length;
      }

      ByteOrder byteOrder = order;
      OptionalLong align0 = alignment;
      Map<String, TorchStorage> storages = new LinkedHashMap<>();
      RestrictedUnpickler.PersistentLoader loader =
          pid -> {
            if (pid.size() != 5 || !"storage".equals(pid.get(0))) {
              throw new TorchFormatException(
                  fileName,
                  MALFORMED_PICKLE,
                  "persistent id "
                      + pid.items()
                      + " is not ('storage', type, key, location, numel)");
            }
            TorchDtype dtype = dtypeOf(fileName, pid.get(1));
            if (!(pid.get(2) instanceof String key) || !(pid.get(4) instanceof Long numel)) {
              throw new TorchFormatException(
                  fileName, MALFORMED_PICKLE, "storage key/numel of " + pid.items() + " mistyped");
            }
            TorchStorage known = storages.get(key);
            if (known != null) {
              if (known.dtype() != dtype) {
                throw new TorchFormatException(
                    fileName,
                    STORAGE_SIZE,
                    "storage " + key + " referenced as " + known.dtype() + " and as " + dtype);
              }
              return known;
            }
            ZipArchiveEntry rec = records.get(p + "data/" + key);
            if (rec == null) {
              throw new TorchFormatException(
                  fileName,
                  MISSING_STORAGE,
                  "storage key \"" + key + "\" has no record " + p + "data/" + key);
            }
            long bytes;
            try {
              bytes = Math.multiplyExact(numel, (long) dtype.elementSize());
            } catch (ArithmeticException e) {
              bytes = -1;
            }
            if (numel < 0 || bytes != rec.getSize()) {
              throw new TorchFormatException(
                  fileName,
                  STORAGE_SIZE,
                  "storage "
                      + key
                      + " declares "
                      + numel
                      + " "
                      + dtype.torchName()
                      + " elements but its record holds "
                      + rec.getSize()
                      + " bytes");
            }
            if (rec.getMethod() != ZipArchiveEntry.STORED || rec.getCompressedSize() != bytes) {
              throw new TorchFormatException(
                  fileName,
                  INVALID_ARCHIVE,
                  "storage record " + rec.getName() + " is compressed; torch stores them as is");
            }
            long off = rec.getDataOffset();
            // Compared without adding: a zip64 size near 2^63 must not wrap past the check.
            if (off < 0 || bytes < 0 || bytes > src.size() - off) {
              throw new TorchFormatException(
                  fileName,
                  STORAGE_SIZE,
                  "storage record " + rec.getName() + " runs past the end of the file");
            }
            if (align0.isPresent() && off % align0.getAsLong() != 0) {
              throw new TorchFormatException(
                  fileName,
                  INVALID_ARCHIVE,
                  "storage record "
                      + rec.getName()
                      + " starts at offset "
                      + off
                      + ", not a multiple of .storage_alignment "
                      + align0.getAsLong());
            }
            TorchStorage s =
                new TorchStorage(key, dtype, numel, off, byteOrder == ByteOrder.BIG_ENDIAN);
            storages.put(key, s);
            return s;
          };
      Object raw =
          new RestrictedUnpickler(
                  fileName, prefix + "/data.pkl", pickleSource, start, end, limits, loader)
              .load();
      List<TorchTensor> tensors = new ArrayList<>();
      Object root = new TreeWalker(fileName, limits, tensors).walk(raw, "", 0);
      return new TorchCheckpoint(
          fileName,
          Format.ZIP,
          Optional.of(prefix),
          byteOrder,
          alignment,
          version,
          root,
          tensors,
          storages);
    }
  }

  private static Optional<String> smallRecord(String fileName, ZipFile zip, ZipArchiveEntry e)
      throws TorchFormatException, IOException {
    if (e == null) {
      return Optional.empty();
    }
    return Optional.of(new String(readEntry(fileName, zip, e, 4096), StandardCharsets.UTF_8));
  }

  private static byte[] readEntry(String fileName, ZipFile zip, ZipArchiveEntry e, long max)
      throws TorchFormatException, IOException {
    if (e.getSize() > max) {
      throw new TorchFormatException(
          fileName, LIMIT_EXCEEDED, e.getName() + " is " + e.getSize() + " bytes > " + max);
    }
    try (InputStream in = zip.getInputStream(e)) {
      byte[] b = in.readNBytes((int) Math.min(max, Integer.MAX_VALUE - 8) + 1);
      if (b.length > max) {
        throw new TorchFormatException(
            fileName, LIMIT_EXCEEDED, e.getName() + " inflates to more than " + max + " bytes");
      }
      return b;
    } catch (IOException | RuntimeException x) {
      TorchFormatException f =
          new TorchFormatException(
              fileName, INVALID_ARCHIVE, "cannot read " + e.getName() + ": " + x.getMessage());
      f.initCause(x);
      throw f;
    }
  }

  private static TorchDtype dtypeOf(String fileName, Object storageType)
      throws TorchFormatException {
    if (storageType instanceof Global g) {
      TorchDtype d = RestrictedUnpickler.storageOrDtype(g.qualified());
      if (d != null) {
        return d;
      }
    }
    throw new TorchFormatException(
        fileName,
        MALFORMED_PICKLE,
        "storage type "
            + RestrictedUnpickler.typeName(storageType)
            + " is not a torch storage class or dtype");
  }

  // ---------------------------------------------------------------------------------- legacy

  private record LegacyRoot(TorchDtype dtype, long numel) {}

  private static TorchCheckpoint readLegacy(String fileName, ByteSource src, TorchLimits limits)
      throws TorchFormatException, IOException {
    long size = src.size();
    RestrictedUnpickler.PersistentLoader none =
        pid -> {
          throw new TorchFormatException(
              fileName, MALFORMED_PICKLE, "persistent id in a legacy header pickle");
        };
    RestrictedUnpickler header =
        new RestrictedUnpickler(fileName, "legacy pickle", src, 0, size, limits, none);
    Object magic = header.load();
    if (!(magic instanceof BigInteger m) || !m.equals(LEGACY_MAGIC)) {
      throw new TorchFormatException(
          fileName,
          NOT_A_CHECKPOINT,
          "legacy magic number is " + magic + ", not 0x1950a86a20f9469cfc6c");
    }
    header =
        new RestrictedUnpickler(
            fileName, "legacy pickle", src, header.position(), size, limits, none);
    Object protocol = header.load();
    if (!Long.valueOf(LEGACY_PROTOCOL_VERSION).equals(protocol)) {
      throw new TorchFormatException(
          fileName,
          UNSUPPORTED_FEATURE,
          "legacy protocol version " + protocol + "; torch writes " + LEGACY_PROTOCOL_VERSION);
    }
    header =
        new RestrictedUnpickler(
            fileName, "legacy pickle", src, header.position(), size, limits, none);
    Object sysInfo = header.load();
    if (!(sysInfo instanceof Map<?, ?> info)) {
      throw new TorchFormatException(fileName, MALFORMED_PICKLE, "legacy sys_info is not a dict");
    }
    if (Boolean.FALSE.equals(info.get("little_endian"))) {
      // torch's legacy writer stores storages little-endian whatever the host (readFileRaw).
      // sys_info only records the writer's host; nothing to convert.
    }
    long objectStart = header.position();

    // Pass 1: learn each root storage's dtype and element count from the persistent ids.
    Map<String, LegacyRoot> roots = new LinkedHashMap<>();
    RestrictedUnpickler.PersistentLoader survey =
        pid -> {
          LegacyPid l = legacyPid(fileName, pid);
          LegacyRoot prev = roots.putIfAbsent(l.rootKey, new LegacyRoot(l.dtype, l.numel));
          if (prev != null && (prev.dtype() != l.dtype || prev.numel() != l.numel)) {
            throw new TorchFormatException(
                fileName,
                STORAGE_SIZE,
                "storage "
                    + l.rootKey
                    + " declared as "
                    + prev
                    + " and as "
                    + l.dtype
                    + "×"
                    + l.numel);
          }
          return new TorchStorage(l.rootKey, l.dtype, l.numel, 0, false);
        };
    RestrictedUnpickler body =
        new RestrictedUnpickler(fileName, "legacy pickle", src, objectStart, size, limits, survey);
    body.load();
    RestrictedUnpickler keysPickle =
        new RestrictedUnpickler(
            fileName, "legacy pickle", src, body.position(), size, limits, none);
    Object keys = keysPickle.load();
    if (!(keys instanceof List<?> keyList)) {
      throw new TorchFormatException(
          fileName,
          MALFORMED_PICKLE,
          "legacy storage key list is " + RestrictedUnpickler.typeName(keys));
    }
    Map<String, Long> offsets = new HashMap<>();
    long pos = keysPickle.position();
    for (Object k : keyList) {
      if (!(k instanceof String key) || !roots.containsKey(key)) {
        throw new TorchFormatException(
            fileName,
            MISSING_STORAGE,
            "legacy storage key " + k + " is not referenced by the pickle");
      }
      if (offsets.containsKey(key)) {
        throw new TorchFormatException(
            fileName, MALFORMED_PICKLE, "legacy storage key " + key + " listed twice");
      }
      LegacyRoot r = roots.get(key);
      if (pos + 8 > size) {
        throw new TorchFormatException(
            fileName, STORAGE_SIZE, "file ends before the element count of storage " + key);
      }
      long count = ByteBuffer.wrap(src.read(pos, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
      if (count != r.numel()) {
        throw new TorchFormatException(
            fileName,
            STORAGE_SIZE,
            "storage " + key + " holds " + count + " elements; the pickle declares " + r.numel());
      }
      long bytes = r.numel() * r.dtype().elementSize();
      if (bytes > size - pos - 8) {
        throw new TorchFormatException(
            fileName,
            STORAGE_SIZE,
            "storage "
                + key
                + " needs "
                + bytes
                + " bytes at offset "
                + (pos + 8)
                + "; the file has "
                + (size - pos - 8)
                + " left");
      }
      offsets.put(key, pos + 8);
      pos += 8 + bytes;
    }
    for (String k : roots.keySet()) {
      if (!offsets.containsKey(k)) {
        throw new TorchFormatException(
            fileName,
            MISSING_STORAGE,
            "storage key \"" + k + "\" is not in the file's storage list");
      }
    }

    // Pass 2: rebuild with the storages at their file offsets.
    Map<String, TorchStorage> storages = new LinkedHashMap<>();
    RestrictedUnpickler.PersistentLoader resolve =
        pid -> {
          LegacyPid l = legacyPid(fileName, pid);
          TorchStorage root =
              storages.computeIfAbsent(
                  l.rootKey, k -> new TorchStorage(k, l.dtype, l.numel, offsets.get(k), false));
          if (l.viewKey == null) {
            return root;
          }
          if (l.viewOffset < 0
              || l.viewSize < 0
              || l.viewOffset > root.numel()
              || l.viewSize > root.numel() - l.viewOffset) {
            throw new TorchFormatException(
                fileName,
                STORAGE_SIZE,
                "storage view "
                    + l.viewKey
                    + " ("
                    + l.viewOffset
                    + "+"
                    + l.viewSize
                    + ") exceeds storage "
                    + l.rootKey
                    + " of "
                    + root.numel()
                    + " elements");
          }
          String vk = l.viewKey;
          TorchStorage view = storages.get(vk);
          if (view == null) {
            view =
                new TorchStorage(
                    vk,
                    l.dtype,
                    l.viewSize,
                    root.fileOffset() + l.viewOffset * l.dtype.elementSize(),
                    false);
            storages.put(vk, view);
          }
          return view;
        };
    Object raw =
        new RestrictedUnpickler(fileName, "legacy pickle", src, objectStart, size, limits, resolve)
            .load();
    List<TorchTensor> tensors = new ArrayList<>();
    Object root = new TreeWalker(fileName, limits, tensors).walk(raw, "", 0);
    return new TorchCheckpoint(
        fileName,
        Format.LEGACY,
        Optional.empty(),
        ByteOrder.LITTLE_ENDIAN,
        OptionalLong.empty(),
        Optional.of(String.valueOf(LEGACY_PROTOCOL_VERSION)),
        root,
        tensors,
        storages);
  }

  private record LegacyPid(
      TorchDtype dtype,
      String rootKey,
      long numel,
      String viewKey,
      long viewOffset,
      long viewSize) {}

  /** {@code ('storage', type, root_key, location, numel, view_metadata)}. */
  private static LegacyPid legacyPid(String fileName, PickleTuple pid) throws TorchFormatException {
    if (pid.size() != 6
        || !"storage".equals(pid.get(0))
        || !(pid.get(2) instanceof String rootKey)
        || !(pid.get(4) instanceof Long numel)
        || numel < 0) {
      throw new TorchFormatException(
          fileName,
          MALFORMED_PICKLE,
          "legacy persistent id "
              + pid.items()
              + " is not ('storage', type, key, location, numel, view)");
    }
    TorchDtype dtype = dtypeOf(fileName, pid.get(1));
    try {
      Math.multiplyExact(numel, (long) dtype.elementSize());
    } catch (ArithmeticException e) {
      throw new TorchFormatException(
          fileName, STORAGE_SIZE, "storage " + rootKey + " numel " + numel + " overflows");
    }
    Object view = pid.get(5);
    if (view == null) {
      return new LegacyPid(dtype, rootKey, numel, null, 0, 0);
    }
    if (view instanceof PickleTuple v
        && v.size() == 3
        && v.get(0) instanceof String viewKey
        && v.get(1) instanceof Long off
        && v.get(2) instanceof Long viewSize) {
      return new LegacyPid(dtype, rootKey, numel, viewKey, off, viewSize);
    }
    throw new TorchFormatException(
        fileName, MALFORMED_PICKLE, "legacy view metadata " + view + " is not (key, offset, size)");
  }

  // ------------------------------------------------------------------------------- the tree

  /** Copies the unpickled tree into public types and names each tensor by its path. */
  private static final class TreeWalker {
    private final String fileName;
    private final TorchLimits limits;
    private final List<TorchTensor> tensors;
    private final Set<Object> onPath = Collections.newSetFromMap(new IdentityHashMap<>());

    TreeWalker(String fileName, TorchLimits limits, List<TorchTensor> tensors) {
      this.fileName = fileName;
      this.limits = limits;
      this.tensors = tensors;
    }

    Object walk(Object o, String path, int depth) throws TorchFormatException {
      if (o instanceof TorchTensor t) {
        TorchTensor named = t.withName(path);
        tensors.add(named);
        return named;
      }
      boolean container =
          o instanceof Map<?, ?>
              || o instanceof List<?>
              || o instanceof PickleTuple
              || o instanceof Set<?>;
      if (!container) {
        return o;
      }
      if (depth >= limits.maxNesting()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "object tree nested deeper than "
                + limits.maxNesting()
                + " levels (at \""
                + path
                + "\")");
      }
      if (!onPath.add(o)) {
        throw new TorchFormatException(
            fileName,
            MALFORMED_PICKLE,
            "object tree contains itself (a cycle at \"" + path + "\")");
      }
      try {
        if (o instanceof Map<?, ?> m) {
          Map<Object, Object> out = new LinkedHashMap<>();
          for (Map.Entry<?, ?> e : m.entrySet()) {
            out.put(e.getKey(), walk(e.getValue(), join(path, pyStr(e.getKey())), depth + 1));
          }
          return Collections.unmodifiableMap(out);
        }
        if (o instanceof Set<?> s) {
          return Collections.unmodifiableSet(new LinkedHashSet<>(s));
        }
        List<?> items = o instanceof PickleTuple t ? t.items() : (List<?>) o;
        List<Object> out = new ArrayList<>(items.size());
        for (int i = 0; i < items.size(); i++) {
          out.add(walk(items.get(i), join(path, Integer.toString(i)), depth + 1));
        }
        return o instanceof PickleTuple
            ? new PickleTuple(Collections.unmodifiableList(out))
            : Collections.unmodifiableList(out);
      } finally {
        onPath.remove(o);
      }
    }

    private static String join(String path, String key) {
      return path.isEmpty() ? key : path + "." + key;
    }

    /** Python's {@code str(key)} for the key types a checkpoint uses. */
    private static String pyStr(Object k) {
      if (k == null) {
        return "None";
      }
      if (k instanceof Boolean b) {
        return b ? "True" : "False";
      }
      if (k instanceof PickleTuple t) {
        List<String> parts = new ArrayList<>();
        for (Object o : t.items()) {
          parts.add(o instanceof String s ? "'" + s + "'" : pyStr(o));
        }
        return "(" + String.join(", ", parts) + (parts.size() == 1 ? ",)" : ")");
      }
      return String.valueOf(k);
    }
  }

  private static boolean startsWith(byte[] b, byte[] prefix) {
    if (b.length < prefix.length) {
      return false;
    }
    for (int i = 0; i < prefix.length; i++) {
      if (b[i] != prefix[i]) {
        return false;
      }
    }
    return true;
  }
}
