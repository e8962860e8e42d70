package io.tensorcast.dataplane.store;

import java.io.IOException;

/** A libc call failed; {@link #errno()} is the error number, the message names the call. */
final class ErrnoException extends IOException {
  private static final long serialVersionUID = 1L;

  private final int errno;

  ErrnoException(String call, int errno) {
    super(call + " failed with " + MemoryLockSupport.errnoName(errno));
    this.errno = errno;
  }

  int errno() {
    return errno;
  }
}
