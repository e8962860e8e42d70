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
    ByteSourceChannel channel = new ByteSourceChannel(src);
    ZipDirectory.checkRecords(fileName, channel, limits);
    ZipFile zip;
    try {
      zip = ZipFile.builder().setSeekableByteChannel(channel).get();
    } catch (IOException | RuntimeException e) {
      TorchFormatException f =
          new TorchFormatException(
              fileName, INVALID_ARCHIVE, "unreadable zip archive: " + e.getMessage());
      f.initCause(e);
      throw f;
    }
    try (zip) {
      List<ZipArchiveEntry> entries = Collections.list(zip.getEntries());
      if (entries.size() > limits.maxZipEntries()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "zip central directory holds "
                + entries.size()
                + " entries, more than the limit of "
                + limits.maxZipEntries()
                + " (--max-zip-entries)");
      }
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
      Optional<String> byteorder = smallRecord(fileName, zip, limits, records.get(p + "byteorder"));
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
      Optional<String> align =
          smallRecord(fileName, zip, limits, records.get(p + ".storage_alignment"));
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
          smallRecord(fileName, zip, limits, records.get(p + "version")).map(String::trim);

      ZipArchiveEntry pkl = records.get(p + "data.pkl");
      InputStream inflating = null;
      ByteSource pickleSource;
      long start;
      long end;
      if (pkl.getSize() > limits.maxPickleBytes()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            pkl.getName()
                + " is "
                + pkl.getSize()
                + " bytes, more than the limit of "
                + limits.maxPickleBytes()
                + " (--max-pickle-bytes)");
      }
      checkInflatable(fileName, pkl, limits);
      if (pkl.getMethod() == ZipArchiveEntry.STORED && pkl.getDataOffset() >= 0) {
        pickleSource = src;
        start = pkl.getDataOffset();
        end = start + pkl.getSize();
        if (pkl.getSize() < 0 || pkl.getSize() > src.size() - start) {
          throw new TorchFormatException(
              fileName, INVALID_ARCHIVE, "data.pkl runs past the end of the file");
        }
      } else {
        inflating = inputStream(fileName, zip, pkl);
        pickleSource = new InflatingSource(inflating, pkl.getSize(), pkl.getName());
        start = 0;
        end = pkl.getSize();
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
                      + PickleText.describe(pid)
                      + " is not ('storage', type, key, location, numel)");
            }
            TorchDtype dtype = dtypeOf(fileName, pid.get(1));
            if (!(pid.get(2) instanceof String key) || !(pid.get(4) instanceof Long numel)) {
              throw new TorchFormatException(
                  fileName,
                  MALFORMED_PICKLE,
                  "storage key/numel of " + PickleText.describe(pid) + " mistyped");
            }
            checkKey(fileName, key);
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
      Object raw;
      try {
        raw =
            new RestrictedUnpickler(
                    fileName, prefix + "/data.pkl", pickleSource, start, end, limits, loader)
                .load();
      } catch (InflatingSource.BadEntry e) {
        TorchFormatException f =
            new TorchFormatException(fileName, INVALID_ARCHIVE, e.getMessage());
        f.initCause(e);
        throw f;
      } finally {
        if (inflating != null) {
          inflating.close(); // ends the inflater's native memory now, not at collection
        }
      }
      List<TorchTensor> tensors = new ArrayList<>();
      Object root = new TreeWalker(fileName, limits, tensors, storages.values()).walk(raw);
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

  private static Optional<String> smallRecord(
      String fileName, ZipFile zip, TorchLimits limits, ZipArchiveEntry e)
      throws TorchFormatException, IOException {
    if (e == null) {
      return Optional.empty();
    }
    return Optional.of(
        new String(readEntry(fileName, zip, e, 4096, limits), StandardCharsets.UTF_8));
  }

  /**
   * Reads a small record whole: at most {@code max} bytes, and never more than its central
   * directory record declares.
   */
  private static byte[] readEntry(
      String fileName, ZipFile zip, ZipArchiveEntry e, int max, TorchLimits limits)
      throws TorchFormatException, IOException {
    if (e.getSize() > max) {
      throw new TorchFormatException(
          fileName,
          LIMIT_EXCEEDED,
          e.getName() + " is " + e.getSize() + " bytes, more than the " + max + " it may hold");
    }
    checkInflatable(fileName, e, limits);
    try (InputStream in = inputStream(fileName, zip, e)) {
      byte[] b = in.readNBytes((int) e.getSize() + 1);
      if (b.length != e.getSize()) {
        throw new TorchFormatException(
            fileName,
            INVALID_ARCHIVE,
            e.getName()
                + " inflates to "
                + (b.length > e.getSize() ? "more than" : "only " + b.length + " of")
                + " the "
                + e.getSize()
                + " bytes its central directory record declares");
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

  private static InputStream inputStream(String fileName, ZipFile zip, ZipArchiveEntry e)
      throws TorchFormatException {
    try {
      return zip.getInputStream(e);
    } catch (IOException | RuntimeException x) {
      TorchFormatException f =
          new TorchFormatException(
              fileName, INVALID_ARCHIVE, "cannot read " + e.getName() + ": " + x.getMessage());
      f.initCause(x);
      throw f;
    }
  }

  /**
   * Before an entry is inflated: it must be stored or deflated (what torch's readers accept), its
   * sizes known, and a deflated entry over {@link TorchLimits#ZIP_RATIO_FLOOR_BYTES} may not
   * declare more than {@link TorchLimits#maxZipRatio()} inflated bytes per compressed byte.
   */
  private static void checkInflatable(String fileName, ZipArchiveEntry e, TorchLimits limits)
      throws TorchFormatException {
    int method = e.getMethod();
    if (method != ZipArchiveEntry.STORED && method != ZipArchiveEntry.DEFLATED) {
      throw new TorchFormatException(
          fileName,
          INVALID_ARCHIVE,
          e.getName()
              + " uses compression method "
              + method
              + "; torch archives are stored (0) or deflated (8)");
    }
    long size = e.getSize();
    long compressed = e.getCompressedSize();
    if (size < 0 || compressed < 0) {
      throw new TorchFormatException(
          fileName, INVALID_ARCHIVE, e.getName() + " has no sizes in its central directory record");
    }
    if (method == ZipArchiveEntry.DEFLATED
        && size > TorchLimits.ZIP_RATIO_FLOOR_BYTES
        && size > compressed * (double) limits.maxZipRatio()) {
      throw new TorchFormatException(
          fileName,
          LIMIT_EXCEEDED,
          e.getName()
              + " declares "
              + size
              + " bytes inflated from "
              + compressed
              + " compressed: a ratio of "
              + size / Math.max(1, compressed)
              + ":1, over the limit of "
              + limits.maxZipRatio()
              + ":1 (--max-zip-ratio)");
    }
  }

  /** Longest storage key accepted: torch's are decimal numbers. */
  static final int MAX_KEY_LENGTH = 1024;

  private static void checkKey(String fileName, String key) throws TorchFormatException {
    if (key.length() > MAX_KEY_LENGTH) {
      throw new TorchFormatException(
          fileName,
          MALFORMED_PICKLE,
          "storage key "
              + PickleText.describe(key)
              + " has "
              + key.length()
              + " characters; torch's keys are short numbers (at most "
              + MAX_KEY_LENGTH
              + " accepted)");
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
          "legacy magic number is " + PickleText.describe(magic) + ", not 0x1950a86a20f9469cfc6c");
    }
    header =
        new RestrictedUnpickler(
            fileName, "legacy pickle", src, header.position(), size, limits, none);
    Object protocol = header.load();
    if (!Long.valueOf(LEGACY_PROTOCOL_VERSION).equals(protocol)) {
      throw new TorchFormatException(
          fileName,
          UNSUPPORTED_FEATURE,
          "legacy protocol version "
              + PickleText.describe(protocol)
              + "; torch writes "
              + LEGACY_PROTOCOL_VERSION);
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
            "legacy storage key " + PickleText.describe(k) + " is not referenced by the pickle");
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
    List<TorchStorage> rootStorages =
        storages.values().stream().filter(st -> roots.containsKey(st.key())).toList();
    Object root = new TreeWalker(fileName, limits, tensors, rootStorages).walk(raw);
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
              + PickleText.describe(pid)
              + " is not ('storage', type, key, location, numel, view)");
    }
    checkKey(fileName, rootKey);
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
      checkKey(fileName, viewKey);
      return new LegacyPid(dtype, rootKey, numel, viewKey, off, viewSize);
    }
    throw new TorchFormatException(
        fileName,
        MALFORMED_PICKLE,
        "legacy view metadata " + PickleText.describe(view) + " is not (key, offset, size)");
  }

  // ------------------------------------------------------------------------------- the tree

  /**
   * Copies the unpickled object graph into public types and names each tensor by its path, within
   * bounds: a container is converted once however often it is reached (the copy shares it as the
   * pickle did), a container or tensor that leads to tensors may be reached by at most {@link
   * TorchLimits#maxReuse()} paths (each path names its tensors again, so memo reuse would otherwise
   * multiply the tensors listed exponentially), every step of the walk counts against {@link
   * TorchLimits#maxObjects()}, the listed tensors against {@link TorchLimits#maxTensors()} and
   * their bytes against {@code maxReuse ×} the storages' bytes. Recursion is bounded by {@link
   * TorchLimits#maxNesting()}.
   */
  private static final class TreeWalker {
    /** Longest tensor name kept, in characters. */
    static final int MAX_NAME_LENGTH = 65_536;

    /** One step of a path: a dict key, or a list/tuple index. */
    private record Step(Step parent, Object key, boolean index) {}

    /** A container converted once, with whether tensors are below it and how often it was met. */
    private static final class Converted {
      Object value;
      boolean hasTensors;
      int reached = 1;
    }

    private final String fileName;
    private final TorchLimits limits;
    private final List<TorchTensor> tensors;
    private final long storageBytes;
    private final Set<Object> onPath = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Map<Object, Converted> converted = new IdentityHashMap<>();
    private final Map<TorchTensor, TorchTensor> firstNamed = new IdentityHashMap<>();
    private final Map<TorchTensor, Integer> tensorReached = new IdentityHashMap<>();
    private final Map<String, Step> names = new HashMap<>();
    private long steps;
    private long tensorBytes;

    TreeWalker(
        String fileName,
        TorchLimits limits,
        List<TorchTensor> tensors,
        java.util.Collection<TorchStorage> storages) {
      this.fileName = fileName;
      this.limits = limits;
      this.tensors = tensors;
      long bytes = 0;
      for (TorchStorage s : storages) {
        bytes = saturatedAdd(bytes, s.byteLength());
      }
      this.storageBytes = bytes;
    }

    /**
     * @return the converted tree
     * @throws TorchFormatException past a bound, on a cycle, or for two tensors of one name
     */
    Object walk(Object root) throws TorchFormatException {
      Object out = visit(root, null, 0);
      long allowed =
          storageBytes > Long.MAX_VALUE / limits.maxReuse()
              ? Long.MAX_VALUE
              : storageBytes * limits.maxReuse();
      if (tensorBytes > allowed) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "the "
                + tensors.size()
                + " tensors listed hold "
                + tensorBytes
                + " bytes, more than "
                + limits.maxReuse()
                + " × the "
                + storageBytes
                + " bytes of its storages (--max-reuse): views and shared tensors this"
                + " many times over their storages are not a checkpoint's weights");
      }
      return out;
    }

    private static boolean isContainer(Object o) {
      return o instanceof Map<?, ?>
          || o instanceof List<?>
          || o instanceof PickleTuple
          || o instanceof Set<?>;
    }

    private void step(long n) throws TorchFormatException {
      steps += n;
      if (steps > limits.maxObjects()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "walking the object tree takes more than "
                + limits.maxObjects()
                + " steps (--max-pickle-objects)");
      }
    }

    private Object visit(Object o, Step path, int depth) throws TorchFormatException {
      if (o instanceof TorchTensor t) {
        return tensor(t, path);
      }
      if (!isContainer(o)) {
        return o;
      }
      Converted c = converted.get(o);
      if (c != null) {
        if (!c.hasTensors) {
          return c.value; // nothing below to name: a shared leaf costs nothing more
        }
        if (++c.reached > limits.maxReuse()) {
          throw reusedTooOften(o, path);
        }
      } else if (onPath.contains(o)) {
        throw new TorchFormatException(
            fileName,
            MALFORMED_PICKLE,
            "object tree contains itself (a cycle at " + render(path) + ")");
      }
      if (depth >= limits.maxNesting()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "object tree nested deeper than "
                + limits.maxNesting()
                + " levels (--max-nesting) at "
                + render(path));
      }
      onPath.add(o);
      try {
        int before = tensors.size();
        Object value = children(o, path, depth, c == null);
        if (c == null) {
          c = new Converted();
          c.value = value;
          c.hasTensors = tensors.size() > before;
          converted.put(o, c);
        }
        return c.value;
      } finally {
        onPath.remove(o);
      }
    }

    /** Visits the children; builds the converted container when {@code build}, else only names. */
    private Object children(Object o, Step path, int depth, boolean build)
        throws TorchFormatException {
      if (o instanceof Map<?, ?> m) {
        step(1 + m.size());
        Map<Object, Object> out = build ? new LinkedHashMap<>() : null;
        for (Map.Entry<?, ?> e : m.entrySet()) {
          Object v = visit(e.getValue(), new Step(path, e.getKey(), false), depth + 1);
          if (build) {
            out.put(e.getKey(), v);
          }
        }
        return build ? Collections.unmodifiableMap(out) : null;
      }
      if (o instanceof Set<?> s) {
        step(1 + s.size());
        return build ? Collections.unmodifiableSet(new LinkedHashSet<>(s)) : null;
      }
      List<?> items = o instanceof PickleTuple t ? t.items() : (List<?>) o;
      step(1 + items.size());
      List<Object> out = build ? new ArrayList<>(items.size()) : null;
      for (int i = 0; i < items.size(); i++) {
        Object v = visit(items.get(i), new Step(path, i, true), depth + 1);
        if (build) {
          out.add(v);
        }
      }
      if (!build) {
        return null;
      }
      return o instanceof PickleTuple
          ? new PickleTuple(Collections.unmodifiableList(out))
          : Collections.unmodifiableList(out);
    }

    private TorchTensor tensor(TorchTensor t, Step path) throws TorchFormatException {
      step(1);
      int reached = tensorReached.merge(t, 1, Integer::sum);
      if (reached > limits.maxReuse()) {
        throw reusedTooOften(t, path);
      }
      if (tensors.size() >= limits.maxTensors()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "the object tree holds more than "
                + limits.maxTensors()
                + " tensors (--max-tensors); the next is at "
                + render(path));
      }
      String name = name(path);
      Step other = names.putIfAbsent(name, path == null ? new Step(null, "", true) : path);
      if (other != null) {
        throw new TorchFormatException(
            fileName,
            TorchFormatException.DUPLICATE_TENSOR_NAME,
            "the tensors at "
                + render(other)
                + " and "
                + render(path)
                + " are both named "
                + PickleText.quoted(name)
                + " once keys are joined with '.'; rename one of the keys");
      }
      TorchTensor named = t.withName(name);
      tensors.add(named);
      tensorBytes = saturatedAdd(tensorBytes, named.byteLength());
      return firstNamed.computeIfAbsent(t, k -> named);
    }

    private TorchFormatException reusedTooOften(Object o, Step path) {
      return new TorchFormatException(
          fileName,
          LIMIT_EXCEEDED,
          "the "
              + RestrictedUnpickler.typeName(o)
              + " at "
              + render(path)
              + " is reached by more than "
              + limits.maxReuse()
              + " paths through the pickle memo (--max-reuse); each path would list its tensors"
              + " again");
    }

    /** Keys and indexes joined with {@code .}, as torch state_dict keys are. */
    private String name(Step path) throws TorchFormatException {
      List<String> parts = new ArrayList<>();
      long length = 0;
      for (Step s = path; s != null; s = s.parent()) {
        String part = s.index() ? s.key().toString() : pyStr(s.key());
        length += part.length() + 1;
        if (length > MAX_NAME_LENGTH + 1) {
          throw new TorchFormatException(
              fileName,
              LIMIT_EXCEEDED,
              "the tensor at "
                  + render(path)
                  + " would be named with more than "
                  + MAX_NAME_LENGTH
                  + " characters");
        }
        parts.add(part);
      }
      Collections.reverse(parts);
      return String.join(".", parts);
    }

    /** A path as Python subscripts, {@code ['model']['layers'][0]}; {@code the root} when empty. */
    private static String render(Step path) {
      if (path == null || (path.parent() == null && "".equals(path.key()) && path.index())) {
        return "the root";
      }
      List<String> parts = new ArrayList<>();
      for (Step s = path; s != null; s = s.parent()) {
        parts.add(s.index() ? "[" + s.key() + "]" : "[" + PickleText.describe(s.key()) + "]");
      }
      Collections.reverse(parts);
      String joined = String.join("", parts);
      return joined.length() > 300 ? "…" + joined.substring(joined.length() - 300) : joined;
    }

    /**
     * Python's {@code str(key)} for the key types a checkpoint uses (tuples at most 4096 values).
     */
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

    private static long saturatedAdd(long a, long b) {
      long r = a + b;
      return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
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
