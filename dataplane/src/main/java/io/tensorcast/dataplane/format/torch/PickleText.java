package io.tensorcast.dataplane.format.torch;

import java.math.BigInteger;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Python-like text of unpickled values for error messages, bounded whatever the value: containers
 * deeper than {@value #MAX_DEPTH} levels print as {@code [...]}, a container that holds itself
 * prints as Python prints it ({@code [...]}, {@code (...)}), at most {@value #MAX_ITEMS} items per
 * container and {@value #MAX_STRING} characters per string are shown, and the whole text stops at
 * {@value #MAX_LENGTH} characters. Never recurses deeper than {@value #MAX_DEPTH} frames, so a
 * hostile pickle's cyclic or deeply nested values cannot overflow the stack while an error is being
 * described (Java's own {@code toString} of such lists would).
 */
final class PickleText {
  static final int MAX_DEPTH = 4;
  static final int MAX_ITEMS = 8;
  static final int MAX_STRING = 64;
  static final int MAX_LENGTH = 300;

  private final StringBuilder out = new StringBuilder();
  private final Set<Object> onPath = Collections.newSetFromMap(new IdentityHashMap<>());

  private PickleText() {}

  /** The bounded text of {@code value}. */
  static String describe(Object value) {
    PickleText t = new PickleText();
    t.append(value, 0);
    if (t.out.length() > MAX_LENGTH) {
      t.out.setLength(MAX_LENGTH);
      t.out.append('…');
    }
    return t.out.toString();
  }

  /** A name in double quotes, shortened to its first and last characters when long. */
  static String quoted(String s) {
    if (s.length() <= 2 * MAX_STRING) {
      return "\"" + s + "\"";
    }
    return "\"" + s.substring(0, MAX_STRING) + "…" + s.substring(s.length() - MAX_STRING) + "\"";
  }

  private boolean full() {
    return out.length() > MAX_LENGTH;
  }

  private void append(Object o, int depth) {
    if (full()) {
      return;
    }
    if (o == null) {
      out.append("None");
    } else if (o instanceof Boolean b) {
      out.append(b ? "True" : "False");
    } else if (o instanceof Long || o instanceof BigInteger || o instanceof Double) {
      String s = o.toString();
      out.append(s.length() > MAX_STRING ? s.substring(0, MAX_STRING) + "…" : s);
    } else if (o instanceof String s) {
      out.append('\'');
      out.append(s.length() > MAX_STRING ? s.substring(0, MAX_STRING) + "…" : s);
      out.append('\'');
    } else if (o instanceof byte[] b) {
      out.append("b'<").append(b.length).append(" bytes>'");
    } else if (o instanceof RestrictedUnpickler.Global g) {
      out.append(g.qualified());
    } else if (o instanceof TorchStorage s) {
      out.append("storage '").append(s.key()).append('\'');
    } else if (o instanceof TorchTensor) {
      out.append("tensor");
    } else if (o instanceof PickleTuple t) {
      container(o, t.items(), "(", t.size() == 1 ? ",)" : ")", depth);
    } else if (o instanceof List<?> l) {
      container(o, l, "[", "]", depth);
    } else if (o instanceof Set<?> s) {
      container(o, s, "{", "}", depth);
    } else if (o instanceof Map<?, ?> m) {
      map(m, depth);
    } else {
      out.append('<').append(o.getClass().getSimpleName()).append('>');
    }
  }

  private void container(Object o, Iterable<?> items, String open, String close, int depth) {
    if (depth >= MAX_DEPTH || onPath.contains(o)) {
      out.append(open).append("...").append(close.endsWith(")") ? ")" : close);
      return;
    }
    onPath.add(o);
    out.append(open);
    Iterator<?> it = items.iterator();
    for (int i = 0; it.hasNext() && !full(); i++) {
      Object item = it.next();
      if (i > 0) {
        out.append(", ");
      }
      if (i == MAX_ITEMS) {
        out.append("...");
        break;
      }
      append(item, depth + 1);
    }
    out.append(close);
    onPath.remove(o);
  }

  private void map(Map<?, ?> m, int depth) {
    if (depth >= MAX_DEPTH || onPath.contains(m)) {
      out.append("{...}");
      return;
    }
    onPath.add(m);
    out.append('{');
    Iterator<? extends Map.Entry<?, ?>> it = m.entrySet().iterator();
    for (int i = 0; it.hasNext() && !full(); i++) {
      Map.Entry<?, ?> e = it.next();
      if (i > 0) {
        out.append(", ");
      }
      if (i == MAX_ITEMS) {
        out.append("...");
        break;
      }
      append(e.getKey(), depth + 1);
      out.append(": ");
      append(e.getValue(), depth + 1);
    }
    out.append('}');
    onPath.remove(m);
  }
}
