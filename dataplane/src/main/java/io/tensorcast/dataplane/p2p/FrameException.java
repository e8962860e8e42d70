package io.tensorcast.dataplane.p2p;

import io.netty.handler.codec.CorruptedFrameException;

/** A frame that breaks the peer protocol; the message names the frame and the rule broken. */
public final class FrameException extends CorruptedFrameException {
  public FrameException(String message) {
    super(message);
  }
}
