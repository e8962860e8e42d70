package io.tensorcast.dataplane.format.torch;

import static io.tensorcast.dataplane.format.torch.TorchFormatException.DISALLOWED_CALL;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.DISALLOWED_GLOBAL;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.INVALID_TENSOR;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.LIMIT_EXCEEDED;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.MALFORMED_PICKLE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.UNSUPPORTED_FEATURE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.UNSUPPORTED_OPCODE;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A pickle reader with the semantics of {@code torch.load(weights_only=True)} ({@code
 * torch/_weights_only_unpickler.py}): it implements the opcodes of pickle protocols 2-5 that {@code
 * torch.save} writes and resolves only the globals of the weights_only allowlist. Any other global
 * is refused at the GLOBAL/STACK_GLOBAL opcode that names it, before anything is built: no object
 * of a foreign class is constructed and no code from the file runs (this reader has no way to call
 * anything but the rebuild functions below).
 *
 * <p>Allowed and implemented: {@code collections.OrderedDict}, {@code torch._utils} {@code
 * _rebuild_tensor}, {@code _rebuild_tensor_v2}, {@code _rebuild_parameter}, {@code
 * _rebuild_parameter_with_state}, {@code torch._tensor._rebuild_from_type_v2}, {@code torch.Size},
 * {@code torch.Tensor}, {@code torch.nn.parameter.Parameter} (NEWOBJ), the storage classes and
 * dtypes of {@link TorchDtype}. In the allowlist but refused as unsupported: quantized ({@code
 * _rebuild_qtensor}, {@code torch.QInt8Storage}, ...), sparse and meta tensors.
 *
 * <p>Floats (BINFLOAT) are accepted as torch 2.x accepts them; torch 1.13's weights_only reader did
 * not implement that opcode (see docs/DECISIONS.md, "Torch checkpoints").
 */
final class RestrictedUnpickler {
  /** Resolves a persistent id tuple ({@code ('storage', type, key, location, numel, ...)}). */
  interface PersistentLoader {
    TorchStorage load(PickleTuple pid) throws TorchFormatException;
  }

  /** An allowed global, named {@code module.name}. */
  record Global(String module, String name) {
    String qualified() {
      return module + "." + name;
    }

    @Override
    public String toString() {
      return qualified();
    }
  }

  /**
   * A Python OrderedDict/dict; {@code attributes} holds what BUILD set (e.g. {@code _metadata}).
   */
  static final class PyDict extends LinkedHashMap<Object, Object> {
    private static final long serialVersionUID = 1L;
  }

  private static final Set<String> REBUILD_FUNCTIONS =
      Set.of(
          "torch._utils._rebuild_tensor",
          "torch._utils._rebuild_tensor_v2",
          "torch._utils._rebuild_parameter",
          "torch._utils._rebuild_parameter_with_state",
          "torch._tensor._rebuild_from_type_v2");
  private static final Set<String> OTHER_ALLOWED =
      Set.of(
          "collections.OrderedDict", "torch.Size", "torch.Tensor", "torch.nn.parameter.Parameter");
  private static final Set<String> UNSUPPORTED =
      Set.of(
          "torch._utils._rebuild_qtensor",
          "torch._utils._rebuild_sparse_tensor",
          "torch._utils._rebuild_sparse_csr_tensor",
          "torch._utils._rebuild_meta_tensor_no_storage",
          "torch._utils._rebuild_wrapper_subclass",
          "torch._utils._rebuild_device_tensor_from_numpy",
          "torch.serialization._get_layout",
          "torch.per_tensor_affine",
          "torch.per_channel_affine",
          "torch.QInt8Storage",
          "torch.QUInt8Storage",
          "torch.QInt32Storage",
          "torch.QUInt4x2Storage",
          "torch.QUInt2x4Storage");

  /** Most values in one dict key or set item, counted with repetition. */
  static final int MAX_KEY_VALUES = 4096;

  /** Deepest nesting of tuples in one dict key or set item. */
  static final int MAX_KEY_DEPTH = 32;

  private final String file;
  private final String label;
  private final long base;
  private final ByteSource src;
  private final long end;
  private final TorchLimits limits;
  private final PersistentLoader persistent;
  private final byte[] buf = new byte[64 * 1024];
  private long bufStart;
  private int bufLen;
  private long pos;
  private long opAt;

  private final ArrayList<Object> stack = new ArrayList<>();
  private final ArrayList<Integer> marks = new ArrayList<>();
  private final Map<Long, Object> memo = new HashMap<>();
  private long objects;

  /**
   * @param start offset of the pickle's first byte in {@code src}
   * @param end offset after which no pickle byte may be read (end of record or file)
   * @param label names the pickle in errors, e.g. {@code data.pkl}
   */
  RestrictedUnpickler(
      String file,
      String label,
      ByteSource src,
      long start,
      long end,
      TorchLimits limits,
      PersistentLoader persistent) {
    this.file = file;
    this.label = label;
    this.base = start;
    this.src = src;
    this.pos = start;
    this.bufStart = start;
    this.end = end;
    this.limits = limits;
    this.persistent = persistent;
  }

  /** Offset just after the STOP opcode of the last {@link #load()}. */
  long position() {
    return pos;
  }

  /**
   * Reads one pickle up to its STOP opcode.
   *
   * @return the object: null, Boolean, Long, BigInteger, Double, String, byte[], PickleTuple, List,
   *     Map, Set, TorchStorage, TorchTensor
   */
  Object load() throws TorchFormatException, IOException {
    stack.clear();
    marks.clear();
    memo.clear();
    objects = 0;
    while (true) {
      long at = pos;
      opAt = at;
      int op = u8();
      switch (op) {
        case 0x80 -> { // PROTO
          int proto = u8();
          if (proto > 5) {
            throw bad("pickle protocol " + proto + " at " + where(at) + " (torch writes 2-5)");
          }
        }
        case 0x95 -> skip(8); // FRAME: framing is only a hint
        case '.' -> { // STOP
          if (stack.size() != 1 || !marks.isEmpty()) {
            throw bad("STOP with " + stack.size() + " objects on the stack; expected 1");
          }
          return stack.remove(0);
        }
        case '(' -> {
          marks.add(stack.size());
          checkStack();
        }
        case '0' -> pop();
        case '1' -> popMark();
        case '2' -> push(peek());
        case 'N' -> push(null);
        case 0x88 -> push(Boolean.TRUE);
        case 0x89 -> push(Boolean.FALSE);
        case 'J' -> push((long) le(4, true));
        case 'K' -> push((long) u8());
        case 'M' -> push(le(2, false));
        case 0x8a -> push(longN(u8()));
        case 0x8b -> push(longN(len4("LONG4")));
        case 'G' -> push(Double.longBitsToDouble(be8()));
        case 'X' -> push(utf8(len4("BINUNICODE")));
        case 0x8c -> push(utf8(u8()));
        case 0x8d -> push(utf8(len8("BINUNICODE8")));
        case 'T' -> push(latin1(len4("BINSTRING")));
        case 'U' -> push(latin1(u8()));
        case 'B' -> push(bytes(len4("BINBYTES")));
        case 'C' -> push(bytes(u8()));
        case 0x8e -> push(bytes(len8("BINBYTES8")));
        case ')' -> push(new PickleTuple(List.of()));
        case 't' -> push(tuple(popMark()));
        case 0x85 -> push(tuple(pops(1)));
        case 0x86 -> push(tuple(pops(2)));
        case 0x87 -> push(tuple(pops(3)));
        case ']' -> push(new ArrayList<>());
        case 'l' -> push(new ArrayList<>(popMark()));
        case 'a' -> {
          Object v = pop();
          list(peek(), "APPEND").add(v);
        }
        case 'e' -> {
          List<Object> items = popMark();
          list(peek(), "APPENDS").addAll(items);
        }
        case '}' -> push(new PyDict());
        case 'd' -> {
          List<Object> items = popMark();
          PyDict d = new PyDict();
          setItems(d, items);
          push(d);
        }
        case 's' -> {
          Object v = pop();
          Object k = pop();
          setItems(dict(peek(), "SETITEM"), List.of(pair(k, v)));
        }
        case 'u' -> {
          List<Object> items = popMark();
          setItems(dict(peek(), "SETITEMS"), items);
        }
        case 0x8f -> push(new LinkedHashSet<>());
        case 0x90 -> {
          List<Object> items = popMark();
          Object s = peek();
          if (!(s instanceof Set<?>)) {
            throw bad("ADDITEMS on " + typeName(s) + ", not a set");
          }
          for (Object o : items) {
            addToSet(s, o);
          }
        }
        case 0x91 -> {
          Set<Object> s = new LinkedHashSet<>();
          for (Object o : popMark()) {
            addToSet(s, o);
          }
          push(Collections.unmodifiableSet(s));
        }
        case 'h' -> push(get(u8()));
        case 'j' -> push(get(le(4, false)));
        case 'q' -> put(u8());
        case 'r' -> put(le(4, false));
        case 0x94 -> put(memo.size());
        case 'c' -> push(global(line("GLOBAL module"), line("GLOBAL name")));
        case 0x93 -> {
          Object name = pop();
          Object module = pop();
          if (!(module instanceof String m) || !(name instanceof String n)) {
            throw bad(
                "STACK_GLOBAL needs two strings, got " + typeName(module) + ", " + typeName(name));
          }
          push(global(m, n));
        }
        case 'R' -> {
          Object args = pop();
          Object fn = pop();
          push(reduce(fn, args));
        }
        case 0x81 -> { // NEWOBJ
          Object args = pop();
          Object cls = pop();
          push(newObj(cls, args));
        }
        case 'b' -> {
          Object state = pop();
          build(peek(), state);
        }
        case 'Q' -> {
          Object pid = pop();
          if (!(pid instanceof PickleTuple t)) {
            throw bad("persistent id is " + typeName(pid) + ", not a tuple");
          }
          push(persistent.load(t));
        }
        default ->
            throw new TorchFormatException(
                file,
                UNSUPPORTED_OPCODE,
                "pickle opcode "
                    + opName(op)
                    + " at "
                    + where(at)
                    + " is not among those torch.save writes (weights_only reader)");
      }
    }
  }

  // ---------------------------------------------------------------- globals and calls

  private Global global(String module, String name) throws TorchFormatException {
    String q = module + "." + name;
    if (q.equals("__builtin__.set") || q.equals("builtins.set")) {
      // torch >= 2.x allows it; protocol-2 sets are REDUCE(set, [list]).
      return new Global("builtins", "set");
    }
    if (REBUILD_FUNCTIONS.contains(q) || OTHER_ALLOWED.contains(q) || storageOrDtype(q) != null) {
      return new Global(module, name);
    }
    if (UNSUPPORTED.contains(q)) {
      throw new TorchFormatException(
          file,
          UNSUPPORTED_FEATURE,
          q,
          "global "
              + q
              + " is in torch's weights_only allowlist but quantized, sparse and meta tensors are"
              + " not supported by this reader");
    }
    throw new TorchFormatException(
        file,
        DISALLOWED_GLOBAL,
        q,
        "global "
            + q
            + " is not allowed: torch.load(weights_only=True) admits only tensors, storages,"
            + " dtypes, OrderedDict and primitive containers; loading it would run code from the"
            + " file");
  }

  /** The dtype that {@code torch.<Storage class>} or {@code torch.<dtype>} names, else null. */
  static TorchDtype storageOrDtype(String qualified) {
    if (!qualified.startsWith("torch.") || qualified.indexOf('.', 6) >= 0) {
      return null;
    }
    String n = qualified.substring(6);
    return TorchDtype.fromStorageClass(n).or(() -> TorchDtype.fromTorchName(n)).orElse(null);
  }

  private Object reduce(Object fn, Object args) throws TorchFormatException {
    if (!(fn instanceof Global g)) {
      throw new TorchFormatException(
          file,
          DISALLOWED_CALL,
          "REDUCE on " + typeName(fn) + ": only allowed functions may be called");
    }
    return reduce(g, args, 0);
  }

  private Object reduce(Global g, Object args, int depth) throws TorchFormatException {
    PickleTuple a = argsTuple(g, args);
    switch (g.qualified()) {
      case "collections.OrderedDict" -> {
        PyDict d = new PyDict();
        if (a.size() == 1) {
          for (Object p : iterable(a.get(0), "OrderedDict argument")) {
            if (!(p instanceof PickleTuple t) || t.size() != 2) {
              throw bad("OrderedDict item is " + typeName(p) + ", not a (key, value) pair");
            }
            setItems(d, List.of(pair(t.get(0), t.get(1))));
          }
        } else if (a.size() != 0) {
          throw bad("OrderedDict called with " + a.size() + " arguments");
        }
        return d;
      }
      case "builtins.set" -> {
        Set<Object> s = new LinkedHashSet<>();
        if (a.size() == 1) {
          for (Object o : iterable(a.get(0), "set argument")) {
            addToSet(s, o);
          }
        }
        return s;
      }
      case "torch.Size" -> {
        if (a.size() != 1) {
          throw bad("torch.Size called with " + a.size() + " arguments");
        }
        return new PickleTuple(List.copyOf(iterable(a.get(0), "torch.Size argument")));
      }
      case "torch._utils._rebuild_tensor_v2" -> {
        if (a.size() < 6 || a.size() > 7) {
          throw bad("_rebuild_tensor_v2 called with " + a.size() + " arguments, expected 6 or 7");
        }
        return rebuildTensor(a);
      }
      case "torch._utils._rebuild_tensor" -> {
        if (a.size() != 4) {
          throw bad("_rebuild_tensor called with " + a.size() + " arguments, expected 4");
        }
        return rebuildTensor(a);
      }
      case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state" -> {
        if (a.size() < 3 || a.size() > 4 || !(a.get(0) instanceof TorchTensor t)) {
          throw bad(g + " needs (tensor, requires_grad, hooks[, state])");
        }
        return t.asParameter();
      }
      case "torch._tensor._rebuild_from_type_v2" -> {
        if (a.size() != 4
            || !(a.get(1) instanceof Global type)
            || !(type.qualified().equals("torch.Tensor")
                || type.qualified().equals("torch.nn.parameter.Parameter"))) {
          throw new TorchFormatException(
              file,
              DISALLOWED_CALL,
              "_rebuild_from_type_v2 for "
                  + (a.size() > 1 ? typeName(a.get(1)) : "?")
                  + ": only torch.Tensor and torch.nn.parameter.Parameter are allowed");
        }
        if (depth >= limits.maxNesting()) {
          throw new TorchFormatException(
              file,
              LIMIT_EXCEEDED,
              "_rebuild_from_type_v2 nested deeper than "
                  + limits.maxNesting()
                  + " calls (--max-nesting) at "
                  + where(opAt));
        }
        if (!(a.get(0) instanceof Global inner0)) {
          throw new TorchFormatException(
              file,
              DISALLOWED_CALL,
              "_rebuild_from_type_v2 calls "
                  + typeName(a.get(0))
                  + ": only allowed functions may be called");
        }
        Object inner = reduce(inner0, a.get(2), depth + 1);
        if (!(inner instanceof TorchTensor t)) {
          throw bad("_rebuild_from_type_v2 did not rebuild a tensor");
        }
        return type.name().equals("Parameter") ? t.asParameter() : t;
      }
      default ->
          throw new TorchFormatException(
              file,
              DISALLOWED_CALL,
              g.qualified(),
              "REDUCE calls " + g.qualified() + ", which is not a rebuild function or container");
    }
  }

  private Object newObj(Object cls, Object args) throws TorchFormatException {
    if (cls instanceof Global g && g.qualified().equals("torch.nn.parameter.Parameter")) {
      PickleTuple a = argsTuple(g, args);
      if (a.size() >= 1 && a.get(0) instanceof TorchTensor t) {
        return t.asParameter();
      }
      throw bad("Parameter() needs a tensor argument");
    }
    throw new TorchFormatException(
        file,
        DISALLOWED_CALL,
        cls instanceof Global g ? g.qualified() : null,
        "NEWOBJ instantiates " + typeName(cls) + "; only torch.nn.parameter.Parameter is allowed");
  }

  private void build(Object inst, Object state) throws TorchFormatException {
    if (inst instanceof PyDict) {
      if (state == null || state instanceof Map<?, ?>) {
        return; // instance attributes such as a state_dict's _metadata; not part of the tree
      }
      throw bad("BUILD state for an OrderedDict is " + typeName(state) + ", not a dict");
    }
    if (inst instanceof TorchTensor
        && (state == null || state instanceof Map<?, ?> m && m.isEmpty())) {
      return;
    }
    throw new TorchFormatException(
        file,
        DISALLOWED_CALL,
        "BUILD (setstate) on "
            + typeName(inst)
            + " is not allowed: only OrderedDict attributes may be set");
  }

  private PickleTuple argsTuple(Global g, Object args) throws TorchFormatException {
    if (!(args instanceof PickleTuple t)) {
      throw bad("arguments of " + g + " are " + typeName(args) + ", not a tuple");
    }
    return t;
  }

  /** {@code _rebuild_tensor[_v2](storage, storage_offset, size, stride, ...)}. */
  private TorchTensor rebuildTensor(PickleTuple a) throws TorchFormatException {
    if (!(a.get(0) instanceof TorchStorage storage)) {
      throw bad("tensor rebuilt from " + typeName(a.get(0)) + ", not a storage");
    }
    long offset = integer(a.get(1), "storage_offset");
    long[] shape = ints(a.get(2), "size");
    long[] stride = ints(a.get(3), "stride");
    if (shape.length != stride.length) {
      throw new TorchFormatException(
          file,
          INVALID_TENSOR,
          "tensor on storage "
              + storage.key()
              + " has "
              + shape.length
              + " sizes but "
              + stride.length
              + " strides");
    }
    String what = "tensor on storage " + storage.key() + " (numel " + storage.numel() + ")";
    if (offset < 0) {
      throw new TorchFormatException(
          file, INVALID_TENSOR, what + ": negative storage offset " + offset);
    }
    long numel = 1;
    long last = offset;
    try {
      for (int d = 0; d < shape.length; d++) {
        if (shape[d] < 0 || stride[d] < 0) {
          throw new TorchFormatException(
              file,
              INVALID_TENSOR,
              what
                  + ": size "
                  + shape[d]
                  + " / stride "
                  + stride[d]
                  + " of dim "
                  + d
                  + " is negative");
        }
        numel = Math.multiplyExact(numel, shape[d]);
      }
      if (numel > 0) {
        for (int d = 0; d < shape.length; d++) {
          last = Math.addExact(last, Math.multiplyExact(shape[d] - 1, stride[d]));
        }
      }
      Math.multiplyExact(numel, (long) storage.dtype().elementSize());
    } catch (ArithmeticException e) {
      throw new TorchFormatException(
          file,
          INVALID_TENSOR,
          what
              + ": shape "
              + java.util.Arrays.toString(shape)
              + " / stride "
              + java.util.Arrays.toString(stride)
              + " overflows 64 bits");
    }
    if (numel > 0 ? last >= storage.numel() : offset > storage.numel()) {
      throw new TorchFormatException(
          file,
          INVALID_TENSOR,
          what
              + ": shape "
              + java.util.Arrays.toString(shape)
              + ", stride "
              + java.util.Arrays.toString(stride)
              + ", offset "
              + offset
              + " reaches element "
              + last
              + ", outside the storage's "
              + storage.numel()
              + " elements");
    }
    return new TorchTensor(null, shape, stride, offset, storage, false);
  }

  private long integer(Object o, String what) throws TorchFormatException {
    if (o instanceof Long l) {
      return l;
    }
    if (o instanceof BigInteger) {
      throw new TorchFormatException(file, INVALID_TENSOR, what + " " + o + " overflows 64 bits");
    }
    throw bad(what + " is " + typeName(o) + ", not an int");
  }

  private long[] ints(Object o, String what) throws TorchFormatException {
    List<?> items;
    if (o instanceof PickleTuple t) {
      items = t.items();
    } else if (o instanceof List<?> l) {
      items = l;
    } else {
      throw bad(what + " is " + typeName(o) + ", not a tuple of ints");
    }
    if (items.size() > limits.maxRank()) {
      throw new TorchFormatException(
          file,
          LIMIT_EXCEEDED,
          what
              + " has "
              + items.size()
              + " dims, more than the limit of "
              + limits.maxRank()
              + " (--max-rank)");
    }
    long[] r = new long[items.size()];
    for (int i = 0; i < r.length; i++) {
      r[i] = integer(items.get(i), what + "[" + i + "]");
    }
    return r;
  }

  // ---------------------------------------------------------------- containers

  private record Pair(Object key, Object value) {}

  private static Pair pair(Object k, Object v) {
    return new Pair(k, v);
  }

  private void setItems(Map<Object, Object> d, List<Object> items) throws TorchFormatException {
    List<Pair> pairs = new ArrayList<>();
    if (!items.isEmpty() && items.get(0) instanceof Pair) {
      for (Object o : items) {
        pairs.add((Pair) o);
      }
    } else {
      if (items.size() % 2 != 0) {
        throw bad("SETITEMS with an odd number (" + items.size() + ") of keys and values");
      }
      for (int i = 0; i < items.size(); i += 2) {
        pairs.add(new Pair(items.get(i), items.get(i + 1)));
      }
    }
    for (Pair p : pairs) {
      checkHashable(p.key());
      d.put(p.key(), p.value());
    }
  }

  private void addToSet(Object set, Object o) throws TorchFormatException {
    checkHashable(o);
    @SuppressWarnings("unchecked")
    Set<Object> s = (Set<Object>) set;
    s.add(o);
  }

  /**
   * Dict keys and set items: primitives or tuples of them (Python's hashable values we model), of
   * at most {@value #MAX_KEY_VALUES} values counted with repetition (a tuple reached twice counts
   * twice): hashing and comparing a key visits each of them, so a key whose tuples double through
   * the memo must be refused before it is hashed.
   */
  private void checkHashable(Object k) throws TorchFormatException {
    ArrayList<Object> todo = new ArrayList<>();
    ArrayList<Integer> depths = new ArrayList<>();
    todo.add(k);
    depths.add(0);
    int seen = 0;
    while (!todo.isEmpty()) {
      Object o = todo.remove(todo.size() - 1);
      int depth = depths.remove(depths.size() - 1);
      if (depth > MAX_KEY_DEPTH) {
        throw new TorchFormatException(
            file,
            LIMIT_EXCEEDED,
            "a dict key or set item nests tuples deeper than "
                + MAX_KEY_DEPTH
                + " at "
                + where(opAt));
      }
      if (++seen > MAX_KEY_VALUES) {
        throw new TorchFormatException(
            file,
            LIMIT_EXCEEDED,
            "a dict key or set item holds more than "
                + MAX_KEY_VALUES
                + " values (tuples shared through the memo count each time) at "
                + where(opAt));
      }
      if (o == null
          || o instanceof String
          || o instanceof Long
          || o instanceof BigInteger
          || o instanceof Double
          || o instanceof Boolean) {
        continue;
      }
      if (o instanceof PickleTuple t) {
        for (Object item : t.items()) {
          todo.add(item);
          depths.add(depth + 1);
        }
        continue;
      }
      throw bad("dict key or set item of type " + typeName(o) + " is not supported");
    }
  }

  @SuppressWarnings("unchecked")
  private List<Object> list(Object o, String op) throws TorchFormatException {
    if (o instanceof ArrayList<?> l) {
      return (List<Object>) l;
    }
    throw bad(op + " on " + typeName(o) + ", not a list");
  }

  private Map<Object, Object> dict(Object o, String op) throws TorchFormatException {
    if (o instanceof PyDict d) {
      return d;
    }
    throw bad(op + " on " + typeName(o) + ", not a dict");
  }

  private List<Object> iterable(Object o, String what) throws TorchFormatException {
    if (o instanceof PickleTuple t) {
      return t.items();
    }
    if (o instanceof List<?> l) {
      return new ArrayList<>(l);
    }
    throw bad(what + " is " + typeName(o) + ", not a list or tuple");
  }

  private static PickleTuple tuple(List<Object> items) {
    return new PickleTuple(Collections.unmodifiableList(new ArrayList<>(items)));
  }

  static String typeName(Object o) {
    if (o == null) {
      return "None";
    }
    if (o instanceof Global g) {
      return g.qualified();
    }
    if (o instanceof PickleTuple) {
      return "tuple";
    }
    if (o instanceof List<?>) {
      return "list";
    }
    if (o instanceof Map<?, ?>) {
      return "dict";
    }
    if (o instanceof TorchTensor) {
      return "tensor";
    }
    if (o instanceof TorchStorage) {
      return "storage";
    }
    if (o instanceof String) {
      return "str";
    }
    if (o instanceof Long || o instanceof BigInteger) {
      return "int";
    }
    return o.getClass().getSimpleName();
  }

  // ---------------------------------------------------------------- stack and memo

  private void push(Object o) throws TorchFormatException {
    if (++objects > limits.maxObjects()) {
      throw new TorchFormatException(
          file,
          LIMIT_EXCEEDED,
          label
              + " builds more than "
              + limits.maxObjects()
              + " objects (--max-pickle-objects) by "
              + where(opAt));
    }
    stack.add(o);
    checkStack();
  }

  private void checkStack() throws TorchFormatException {
    if (stack.size() + marks.size() > limits.maxStackDepth()) {
      throw new TorchFormatException(
          file, LIMIT_EXCEEDED, "pickle stack deeper than " + limits.maxStackDepth() + " entries");
    }
  }

  private Object pop() throws TorchFormatException {
    int floor = marks.isEmpty() ? 0 : marks.get(marks.size() - 1);
    if (stack.size() <= floor) {
      throw bad("stack underflow at " + where(pos - 1));
    }
    return stack.remove(stack.size() - 1);
  }

  private Object peek() throws TorchFormatException {
    int floor = marks.isEmpty() ? 0 : marks.get(marks.size() - 1);
    if (stack.size() <= floor) {
      throw bad("stack underflow at " + where(pos - 1));
    }
    return stack.get(stack.size() - 1);
  }

  private List<Object> pops(int n) throws TorchFormatException {
    Object[] r = new Object[n];
    for (int i = n - 1; i >= 0; i--) {
      r[i] = pop();
    }
    return java.util.Arrays.asList(r);
  }

  private List<Object> popMark() throws TorchFormatException {
    if (marks.isEmpty()) {
      throw bad("no MARK on the stack at " + where(pos - 1));
    }
    int m = marks.remove(marks.size() - 1);
    List<Object> items = new ArrayList<>(stack.subList(m, stack.size()));
    stack.subList(m, stack.size()).clear();
    return items;
  }

  private Object get(long index) throws TorchFormatException {
    if (!memo.containsKey(index)) {
      throw bad("memo index " + index + " read before it was written");
    }
    return memo.get(index);
  }

  private void put(long index) throws TorchFormatException {
    if (memo.size() >= limits.maxMemoEntries() && !memo.containsKey(index)) {
      throw new TorchFormatException(
          file, LIMIT_EXCEEDED, "more than " + limits.maxMemoEntries() + " memo entries");
    }
    memo.put(index, peek());
  }

  // ---------------------------------------------------------------- input

  private int u8() throws TorchFormatException, IOException {
    if (pos >= end) {
      throw bad("pickle ends at " + where(pos) + " before its STOP opcode");
    }
    if (pos < bufStart || pos >= bufStart + bufLen) {
      bufStart = pos;
      bufLen = (int) Math.min(buf.length, end - pos);
      src.read(pos, ByteBuffer.wrap(buf, 0, bufLen));
    }
    return buf[(int) (pos++ - bufStart)] & 0xff;
  }

  private void skip(long n) throws TorchFormatException, IOException {
    for (long i = 0; i < n; i++) {
      u8();
    }
  }

  private long le(int n, boolean signed) throws TorchFormatException, IOException {
    long v = 0;
    for (int i = 0; i < n; i++) {
      v |= ((long) u8()) << (8 * i);
    }
    if (signed && n < 8) {
      v = (v << (64 - 8 * n)) >> (64 - 8 * n);
    }
    return v;
  }

  private long be8() throws TorchFormatException, IOException {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | u8();
    }
    return v;
  }

  private int len4(String op) throws TorchFormatException, IOException {
    return checkLength(le(4, false), op);
  }

  private int len8(String op) throws TorchFormatException, IOException {
    return checkLength(le(8, false), op);
  }

  private int checkLength(long n, String op) throws TorchFormatException {
    if (n < 0 || n > limits.maxStringBytes() || n > end - pos) {
      throw new TorchFormatException(
          file,
          LIMIT_EXCEEDED,
          op
              + " at "
              + where(opAt)
              + " claims "
              + Long.toUnsignedString(n)
              + " bytes; "
              + (end - pos)
              + " remain in the pickle (limit "
              + limits.maxStringBytes()
              + ")");
    }
    return (int) n;
  }

  private byte[] bytes(int n) throws TorchFormatException, IOException {
    checkLength(n, "string");
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) u8();
    }
    return b;
  }

  private String utf8(int n) throws TorchFormatException, IOException {
    byte[] b = bytes(n);
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(b))
          .toString();
    } catch (CharacterCodingException e) {
      throw bad("string at " + where(pos - n) + " is not valid UTF-8");
    }
  }

  private String latin1(int n) throws TorchFormatException, IOException {
    return new String(bytes(n), StandardCharsets.ISO_8859_1);
  }

  private Object longN(int n) throws TorchFormatException, IOException {
    if (n > 1024) {
      throw new TorchFormatException(file, LIMIT_EXCEEDED, "integer of " + n + " bytes");
    }
    byte[] b = bytes(n);
    if (n == 0) {
      return 0L;
    }
    byte[] be = new byte[n];
    for (int i = 0; i < n; i++) {
      be[i] = b[n - 1 - i];
    }
    BigInteger v = new BigInteger(be);
    return v.bitLength() < 64 ? (Object) v.longValue() : v;
  }

  private String line(String what) throws TorchFormatException, IOException {
    StringBuilder sb = new StringBuilder();
    while (true) {
      int c = u8();
      if (c == '\n') {
        return sb.toString();
      }
      if (sb.length() >= 1024) {
        throw new TorchFormatException(file, LIMIT_EXCEEDED, what + " longer than 1024 bytes");
      }
      sb.append((char) c);
    }
  }

  /** {@code data.pkl byte 17}: a position relative to the pickle's first byte. */
  private String where(long at) {
    return label + " byte " + (at - base);
  }

  private TorchFormatException bad(String detail) {
    return new TorchFormatException(file, MALFORMED_PICKLE, detail);
  }

  private static String opName(int op) {
    String name =
        switch (op) {
          case 'i' -> "INST";
          case 'o' -> "OBJ";
          case 0x92 -> "NEWOBJ_EX";
          case 'P' -> "PERSID";
          case 0x82, 0x83, 0x84 -> "EXT";
          case 0x96 -> "BYTEARRAY8";
          case 0x97 -> "NEXT_BUFFER";
          case 0x98 -> "READONLY_BUFFER";
          case 'I' -> "INT";
          case 'L' -> "LONG";
          case 'F' -> "FLOAT";
          case 'S' -> "STRING";
          case 'V' -> "UNICODE";
          case 'g' -> "GET";
          case 'p' -> "PUT";
          default -> "?";
        };
    return String.format("0x%02x (%s)", op, name);
  }
}
