package io.tensorcast.dataplane.http;

import java.util.Objects;

/**
 * Who may call what on the control endpoint: two bearer tokens with two scopes.
 *
 * <ul>
 *   <li>{@link Scope#READ} (consumers, monitoring): {@code GET /status}, {@code /v1/tensors}.
 *   <li>{@link Scope#ADMIN} (the operator): {@code PUT /v1/peers}, and everything {@code read} may.
 * </ul>
 *
 * <p>{@code /healthz}, {@code /readyz} and {@code /metrics} need no token. Both tokens are compared
 * on every request, in constant time, so the answer's timing does not tell which one was close.
 */
public final class ControlAuth {
  /** What a request's token allows. */
  public enum Scope {
    /** No valid token. */
    NONE,
    /** Reads: status and tensors. */
    READ,
    /** Reads and the peer membership. */
    ADMIN
  }

  private final ControlToken read;
  private final ControlToken admin;

  /**
   * @throws IllegalArgumentException when both tokens are the same (the read scope would be admin)
   */
  public ControlAuth(ControlToken read, ControlToken admin) {
    this.read = Objects.requireNonNull(read, "read");
    this.admin = Objects.requireNonNull(admin, "admin");
    if (read.matches(admin.value())) {
      throw new IllegalArgumentException(
          "the read and admin tokens are the same; the read scope would allow PUT /v1/peers");
    }
  }

  /** Two random tokens. */
  public static ControlAuth generated() {
    return new ControlAuth(ControlToken.random(), ControlToken.random());
  }

  public ControlToken read() {
    return read;
  }

  public ControlToken admin() {
    return admin;
  }

  /** The scope an {@code Authorization} header grants. */
  public Scope scope(String authorization) {
    String presented = bearer(authorization);
    if (presented == null) {
      return Scope.NONE;
    }
    boolean isAdmin = admin.matches(presented);
    boolean isRead = read.matches(presented);
    return isAdmin ? Scope.ADMIN : isRead ? Scope.READ : Scope.NONE;
  }

  /** The token of a {@code Bearer} header value, or null. */
  static String bearer(String authorization) {
    if (authorization == null || !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
      return null;
    }
    String t = authorization.substring(7).strip();
    return t.isEmpty() ? null : t;
  }
}
