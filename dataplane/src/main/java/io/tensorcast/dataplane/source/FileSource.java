package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A directory on the node ({@code file:///abs/dir}) as an artifact source.
 *
 * <p>Listing walks the directory recursively without following links and returns regular files
 * sorted by path, with their sizes; {@code etag} and {@code sha256} are empty (the loader hashes
 * the bytes it loads). A symbolic link (to a file or a directory) or a special file (FIFO, socket,
 * device) that the include/exclude filter selects fails the listing with reason {@code UnsafePath}:
 * a link can point outside the artifact root, so none is followed. Links the filter does not select
 * are skipped without being followed.
 *
 * <p>Reads are positional ({@link FileChannel#read(ByteBuffer, long)}), so concurrent ranges of one
 * file do not interfere. Each open re-checks that the file is still a regular file below the root
 * (no link swapped in since listing) and still has the listed size ({@code ObjectChanged}
 * otherwise). Thread-safe.
 */
public final class FileSource implements ArtifactSource {
  private final Path root;
  private final PathFilter filter;
  private final String description;

  private FileSource(Path root, PathFilter filter) {
    this.root = root;
    this.filter = filter;
    this.description = root.toUri().toString();
  }

  /**
   * Opens a directory source.
   *
   * @param dir the artifact root; a link here is resolved once (the root is the user's choice)
   * @throws SourceException {@code SourceNotFound} if the directory is missing or not a directory,
   *     {@code AccessDenied} if it cannot be read
   */
  public static FileSource open(Path dir, PathFilter filter) throws SourceException {
    Objects.requireNonNull(filter, "filter");
    Path absolute = dir.toAbsolutePath().normalize();
    Path real;
    try {
      real = absolute.toRealPath();
    } catch (NoSuchFileException e) {
      throw new SourceException(
          Reason.SourceNotFound, "source directory " + absolute + " does not exist", false, e);
    } catch (AccessDeniedException e) {
      throw new SourceException(
          Reason.AccessDenied,
          "source directory " + absolute + " cannot be read: permission denied",
          false,
          e);
    } catch (IOException e) {
      throw new SourceException(
          Reason.SourceUnavailable,
          "cannot resolve source directory " + absolute + ": " + e,
          true,
          e);
    }
    if (!Files.isDirectory(real)) {
      throw new SourceException(
          Reason.SourceNotFound,
          "source " + absolute + " is not a directory; a file source names the artifact's folder",
          false);
    }
    return new FileSource(real, filter);
  }

  /** The artifact root (real path, links resolved). */
  public Path root() {
    return root;
  }

  @Override
  public List<SourceFile> list() throws SourceException {
    List<SourceFile> files = new ArrayList<>();
    SourceException[] failure = new SourceException[1];
    try {
      Files.walkFileTree(
          root,
          new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
              String relative = relative(file);
              Optional<String> problem = SourcePaths.problem(relative);
              if (problem.isPresent()) {
                failure[0] = unsafe(relative, "the path " + problem.get());
                return FileVisitResult.TERMINATE;
              }
              if (!filter.accepts(relative)) {
                return FileVisitResult.CONTINUE;
              }
              if (attrs.isSymbolicLink()) {
                failure[0] =
                    unsafe(
                        relative,
                        "it is a symbolic link; file sources do not follow links (one can point"
                            + " outside the artifact root): copy the target in, point the URI at"
                            + " the real directory, or exclude the link");
                return FileVisitResult.TERMINATE;
              }
              if (!attrs.isRegularFile()) {
                failure[0] =
                    unsafe(relative, "it is not a regular file (a FIFO, socket or device)");
                return FileVisitResult.TERMINATE;
              }
              files.add(new SourceFile(relative, attrs.size(), identity(attrs), Optional.empty()));
              return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) {
              failure[0] = ioFailure("cannot list " + file, e);
              return FileVisitResult.TERMINATE;
            }
          });
    } catch (IOException e) {
      throw ioFailure("cannot list " + root, e);
    }
    if (failure[0] != null) {
      throw failure[0];
    }
    files.sort(Comparator.comparing(SourceFile::path));
    return List.copyOf(files);
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    checkRange(file, offset, length);
    SourcePaths.requireSafe(file.path(), description);
    Path path = root.resolve(file.path());
    FileChannel channel = null;
    try {
      BasicFileAttributes attrs =
          Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      if (attrs.isSymbolicLink() || !attrs.isRegularFile()) {
        throw unsafe(file.path(), "it is no longer a regular file (a link or special file)");
      }
      if (!path.getParent().toRealPath().startsWith(root)) {
        throw unsafe(file.path(), "its directory now resolves outside the artifact root");
      }
      channel = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS);
      long size = channel.size();
      if (size != file.size()) {
        throw new SourceException(
            Reason.ObjectChanged,
            description
                + file.path()
                + " is now "
                + size
                + " bytes but was listed with "
                + file.size()
                + "; resolve the artifact again",
            false);
      }
      requireListedIdentity(file, attrs);
      return new FileRangeInputStream(channel, offset, length);
    } catch (SourceException e) {
      closeQuietly(channel);
      throw e;
    } catch (NoSuchFileException e) {
      closeQuietly(channel);
      throw new SourceException(
          Reason.ObjectNotFound,
          description + file.path() + " no longer exists (it was listed)",
          false,
          e);
    } catch (IOException e) {
      closeQuietly(channel);
      throw ioFailure("cannot open " + description + file.path(), e);
    }
  }

  static void checkRange(SourceFile file, long offset, long length) {
    if (offset < 0 || length < 0 || offset > file.size() - length) {
      throw new IllegalArgumentException(
          "range ["
              + offset
              + ", "
              + offset
              + "+"
              + length
              + ") is outside "
              + file.path()
              + " ("
              + file.size()
              + " bytes)");
    }
  }

  private String relative(Path file) {
    Path rel = root.relativize(file);
    String separator = rel.getFileSystem().getSeparator();
    String text = rel.toString();
    return separator.equals("/") ? text : text.replace(separator, "/");
  }

  private SourceException unsafe(String relative, String why) {
    return new SourceException(
        Reason.UnsafePath,
        "refusing '" + SourcePaths.printable(relative) + "' under " + description + ": " + why,
        false);
  }

  private static SourceException ioFailure(String what, IOException e) {
    if (e instanceof AccessDeniedException) {
      return new SourceException(Reason.AccessDenied, what + ": permission denied", false, e);
    }
    if (e instanceof NotDirectoryException || e instanceof NoSuchFileException) {
      return new SourceException(Reason.SourceNotFound, what + ": " + e.getMessage(), false, e);
    }
    return new SourceException(Reason.SourceUnavailable, what + ": " + e, true, e);
  }

  private static void closeQuietly(FileChannel channel) {
    if (channel != null) {
      try {
        channel.close();
      } catch (IOException ignored) {
        // Nothing was read from it; the open failure is what matters.
      }
    }
  }

  /**
   * The identity a local file is listed with, kept in {@link SourceFile#etag()}: size, modification
   * time (ns) and file key (device + inode). Rewriting a file in place, even with the same size,
   * changes it.
   */
  static String identity(BasicFileAttributes attrs) {
    return attrs.size()
        + "-"
        + attrs.lastModifiedTime().to(java.util.concurrent.TimeUnit.NANOSECONDS)
        + "-"
        + attrs.fileKey();
  }

  private void requireListedIdentity(SourceFile file, BasicFileAttributes attrs)
      throws SourceException {
    if (!file.etag().isEmpty() && !file.etag().equals(identity(attrs))) {
      throw new SourceException(
          Reason.ObjectChanged,
          description
              + file.path()
              + " was modified after it was listed (size, modification time or inode changed);"
              + " its bytes may mix two versions: resolve the artifact again",
          false);
    }
  }

  /**
   * Checks that the file is still the one listed, after its last byte was read: a file rewritten in
   * place while ranges were read would otherwise leave a copy that matches neither version.
   */
  @Override
  public void checkUnchanged(SourceFile file) throws SourceException {
    Path path = root.resolve(file.path());
    try {
      requireListedIdentity(
          file, Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS));
    } catch (NoSuchFileException e) {
      throw new SourceException(
          Reason.ObjectNotFound,
          description + file.path() + " no longer exists (it was listed)",
          false,
          e);
    } catch (IOException e) {
      throw ioFailure("cannot check " + description + file.path(), e);
    }
  }

  @Override
  public PathFilter filter() {
    return filter;
  }

  @Override
  public String describe() {
    return description;
  }

  @Override
  public void close() {
    // Channels are per range and closed by their streams.
  }

  /** Bytes [offset, offset + length) of a channel, read positionally; closes the channel. */
  private static final class FileRangeInputStream extends RangeInputStream {
    private final FileChannel channel;
    private long position;

    FileRangeInputStream(FileChannel channel, long offset, long length) {
      super(length);
      this.channel = channel;
      this.position = offset;
    }

    @Override
    protected int readBody(byte[] b, int off, int len) throws IOException {
      // -1 when the file shrank under us: the stream ends early; the reader resumes and the open
      // then reports ObjectChanged.
      int n = channel.read(ByteBuffer.wrap(b, off, len), position);
      if (n > 0) {
        position += n;
      }
      return n;
    }

    @Override
    public void close() throws IOException {
      channel.close();
    }
  }
}
