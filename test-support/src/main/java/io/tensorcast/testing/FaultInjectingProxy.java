package io.tensorcast.testing;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A plain HTTP/1.1 forwarding proxy on a real {@link ServerSocket} (127.0.0.1, random port) in
 * front of an upstream server, with programmable faults — the failures of ranged reads made on
 * demand:
 *
 * <ul>
 *   <li>{@link #cutBodyAfter}: the next K GET responses are cut after N body bytes (the socket is
 *       closed, so the client sees a body shorter than its {@code Content-Length});
 *   <li>{@link #stallBodyAfterWhere}: the next K matching GET responses stop after N body bytes
 *       with the connection left open (a stream the origin stopped feeding), until the client
 *       closes it or the proxy's 30 s socket timeout ends it ({@link #stalls()} records which);
 *   <li>{@link #failRequests}: the next K requests are answered by the proxy with a status (500,
 *       503 ...) and an S3-style XML error, optionally with {@code Retry-After};
 *   <li>{@link #ignoreRange}: GETs are forwarded without their {@code Range} header, so the
 *       upstream answers 200 with the whole object;
 *   <li>{@link #delay}: each request waits this long before it is forwarded;
 *   <li>{@link #holdWhere}: requests it matches wait until a latch opens (a source that answers
 *       some requests late, e.g. the digests' {@code HEAD}s);
 *   <li>{@link #throttleBodies} and {@link #throttleTotal}: an origin whose single connections are
 *       slow, and one whose bandwidth is shared by all its connections;
 *   <li>{@link #slowDownAbove}: a GET that arrives while N others are in flight is answered {@code
 *       503 SlowDown} (an origin with a limit on concurrent requests);
 *   <li>{@link #limitRequestRate}: a request that finds no token in a token bucket is answered
 *       {@code 429 Too Many Requests} with {@code Retry-After} (an origin with a limit on requests
 *       per second, as the Hugging Face Hub's and S3's per-prefix request rates).
 * </ul>
 *
 * <p>It counts the response body bytes of GETs it forwards ({@link #getBodyBytes()}) and records
 * every request (method, target, {@code Range}, {@code If-Match}) and the most client connections
 * open at once and GET requests in flight at once. Every response is sent with {@code Connection:
 * close} (one request per connection), which keeps the forwarding simple and makes "connections
 * open" equal "requests in flight". Request bodies must have a {@code Content-Length} ({@code
 * Expect: 100-continue} is answered by the proxy). Headers are forwarded as received, so a stripped
 * {@code Range} breaks a SigV4 signature; S3Mock does not check them.
 */
public final class FaultInjectingProxy implements AutoCloseable {

  /**
   * One request as the proxy received it.
   *
   * @param receivedNanos {@link System#nanoTime()} when its head was read
   */
  public record RecordedRequest(
      String method,
      String target,
      Optional<String> range,
      Optional<String> ifMatch,
      long receivedNanos) {

    /** The same request: method, target and {@code Range} equal. */
    public boolean sameAs(RecordedRequest o) {
      return method.equals(o.method) && target.equals(o.target) && range.equals(o.range);
    }

    /** The target without its query string. */
    public String path() {
      int q = target.indexOf('?');
      return q < 0 ? target : target.substring(0, q);
    }

    /** Bytes the {@code Range: bytes=a-b} header asks for (b − a + 1), if it has both ends. */
    public Optional<Long> rangeLength() {
      return range.flatMap(
          r -> {
            String spec = r.substring("bytes=".length());
            int dash = spec.indexOf('-');
            if (dash <= 0 || dash == spec.length() - 1) {
              return Optional.empty();
            }
            return Optional.of(
                Long.parseLong(spec.substring(dash + 1))
                    - Long.parseLong(spec.substring(0, dash))
                    + 1);
          });
    }

    /** First byte of the {@code Range: bytes=a-b} header, if any. */
    public Optional<Long> rangeStart() {
      return range.map(r -> Long.parseLong(r.substring("bytes=".length(), r.indexOf('-'))));
    }
  }

  private final String upstreamHost;
  private final int upstreamPort;
  private final ServerSocket server;
  private final ExecutorService handlers;
  private final Thread acceptor;
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private final List<RecordedRequest> requests = new CopyOnWriteArrayList<>();

  private final AtomicInteger connections = new AtomicInteger();
  private final AtomicInteger maxConnections = new AtomicInteger();
  private final AtomicInteger inFlightGets = new AtomicInteger();
  private final AtomicInteger finishedGets = new AtomicInteger();
  private volatile long bodyBytesPerSecond;
  private volatile long totalBytesPerSecond;
  private final Object totalPacing = new Object();
  private long totalDueNanos; // guarded by totalPacing
  private volatile int slowDownAbove;
  private final AtomicInteger slowDowns = new AtomicInteger();
  private final AtomicInteger maxInFlightGets = new AtomicInteger();
  private final Object bucket = new Object();
  private double bucketRate; // tokens per second, 0 = no limit; guarded by bucket
  private double bucketBurst; // guarded by bucket
  private double bucketTokens; // guarded by bucket
  private long bucketRefilledNanos; // guarded by bucket
  private final AtomicInteger tooManyRequests = new AtomicInteger();

  /** Nanoseconds, monotonic: the token bucket's clock (a test may move it by hand). */
  volatile java.util.function.LongSupplier nanoClock = System::nanoTime;

  private final AtomicInteger cutsLeft = new AtomicInteger();
  private volatile java.util.function.Predicate<RecordedRequest> cutWhere = r -> true;
  private final AtomicLong cutAfterBytes = new AtomicLong();
  private volatile boolean cutStalls;
  private final List<Stall> stalls = new CopyOnWriteArrayList<>();
  private final AtomicInteger failuresLeft = new AtomicInteger();
  private final AtomicInteger failureStatus = new AtomicInteger();
  private final AtomicReference<Duration> failureRetryAfter = new AtomicReference<>();
  private final AtomicLong bodyBytesForwarded = new AtomicLong();
  private volatile boolean ignoreRange;
  private volatile boolean down;
  private volatile int admitOneIn;
  private volatile Duration stormRetryAfter;
  private final AtomicLong stormCount = new AtomicLong();
  private final List<RecordedRequest> throttled = new CopyOnWriteArrayList<>();
  private volatile Duration delay = Duration.ZERO;
  private volatile java.util.function.Predicate<RecordedRequest> holdWhere = r -> false;
  private volatile java.util.concurrent.CountDownLatch holdUntil =
      new java.util.concurrent.CountDownLatch(0);
  private volatile java.util.function.Predicate<RecordedRequest> counted = r -> true;
  private volatile java.util.function.BiPredicate<String, String> failWhich = (m, t) -> true;
  private volatile java.util.function.Predicate<RecordedRequest> failWhere = r -> true;

  /** Starts forwarding {@code 127.0.0.1:<port()>} to {@code upstream} (an http:// URI). */
  public FaultInjectingProxy(URI upstream) throws IOException {
    this(upstream.getHost(), upstream.getPort());
  }

  public FaultInjectingProxy(String upstreamHost, int upstreamPort) throws IOException {
    this.upstreamHost = upstreamHost;
    this.upstreamPort = upstreamPort;
    this.server = new ServerSocket();
    server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
    AtomicInteger n = new AtomicInteger();
    this.handlers =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "fault-proxy-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    this.acceptor = new Thread(this::acceptLoop, "fault-proxy-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  public int port() {
    return server.getLocalPort();
  }

  /** {@code http://127.0.0.1:<port>}. */
  public URI endpoint() {
    return URI.create("http://127.0.0.1:" + port());
  }

  /** Cuts the body of the next {@code gets} GET responses after {@code bytes} body bytes. */
  public FaultInjectingProxy cutBodyAfter(long bytes, int gets) {
    return cutBodyAfterWhere(bytes, gets, r -> true);
  }

  /**
   * As {@link #cutBodyAfter}, but only GETs {@code which} accepts (it sees the method, target and
   * {@code Range}) are cut (and counted); the others are forwarded whole.
   */
  public FaultInjectingProxy cutBodyAfterWhere(
      long bytes, int gets, java.util.function.Predicate<RecordedRequest> which) {
    cutWhere = which;
    cutAfterBytes.set(bytes);
    cutsLeft.set(gets);
    return this;
  }

  /**
   * As {@link #cutBodyAfterWhere}, but the matching responses stall instead of being cut: after
   * {@code bytes} body bytes nothing more is sent and the connection stays open until the client
   * closes it (or 30 s without a byte from the client pass). Each stall is recorded ({@link
   * #stalls()}).
   */
  public FaultInjectingProxy stallBodyAfterWhere(
      long bytes, int gets, java.util.function.Predicate<RecordedRequest> which) {
    cutBodyAfterWhere(bytes, gets, which);
    cutStalls = true;
    return this;
  }

  /**
   * A response body that stalled ({@link #stallBodyAfterWhere}).
   *
   * @param stalledNanos {@link System#nanoTime()} when its last byte was sent
   * @param endedNanos {@link System#nanoTime()} when its connection ended
   * @param closedByClient true when the client closed the connection, false when the proxy's socket
   *     timeout ended it
   */
  public record Stall(
      RecordedRequest request, long stalledNanos, long endedNanos, boolean closedByClient) {}

  /** The stalls so far, in the order they ended. */
  public List<Stall> stalls() {
    return List.copyOf(stalls);
  }

  /**
   * Answers the next {@code count} requests itself with {@code status} and an S3-style error code
   * ({@code SlowDown} for 503, {@code InternalError} for 500, {@code AccessDenied} for 403, {@code
   * NoSuchKey} for 404, {@code Error} otherwise).
   *
   * @param retryAfter sent as {@code Retry-After} in whole seconds, or {@code null} for none
   */
  public FaultInjectingProxy failRequests(int status, int count, Duration retryAfter) {
    failureStatus.set(status);
    failureRetryAfter.set(retryAfter);
    failuresLeft.set(count);
    return this;
  }

  /**
   * As {@link #failRequests}, but only requests whose method and target (path and query) match
   * {@code which} are failed (and counted); the others are forwarded.
   */
  public FaultInjectingProxy failRequestsMatching(
      java.util.function.BiPredicate<String, String> which, int status, int count) {
    failWhich = which;
    failWhere = r -> true;
    return failRequests(status, count, null);
  }

  /**
   * As {@link #failRequests}, but only requests {@code which} accepts (it sees the method, target
   * and {@code Range}) are failed (and counted); the others are forwarded.
   */
  public FaultInjectingProxy failRequestsWhere(
      java.util.function.Predicate<RecordedRequest> which, int status, int count) {
    failWhere = which;
    failWhich = (m, t) -> true;
    return failRequests(status, count, null);
  }

  /**
   * Takes the source down as a restart of its process does: on {@code true} every open connection
   * is closed at once (responses cut mid-body) and every new one is closed as soon as it is
   * accepted, until called with {@code false}.
   */
  public FaultInjectingProxy down(boolean on) {
    this.down = on;
    if (on) {
      for (Socket s : open) {
        closeQuietly(s);
      }
    }
    return this;
  }

  /**
   * A throttling storm: of every {@code n} requests only the first is forwarded, the others are
   * answered {@code 429 Too Many Requests} ({@code SlowDown}) with {@code Retry-After} in whole
   * seconds; {@code n <= 1} ends it. {@link #throttled()} lists the refused requests.
   */
  public FaultInjectingProxy admitOneIn(int n, Duration retryAfter) {
    this.stormRetryAfter = retryAfter;
    stormCount.set(0);
    this.admitOneIn = n;
    return this;
  }

  /**
   * Requests refused by {@link #admitOneIn} or {@link #limitRequestRate} since the last {@link
   * #reset}, in arrival order.
   */
  public List<RecordedRequest> throttled() {
    return List.copyOf(throttled);
  }

  /** Forwards GETs without their {@code Range} header while on. */
  public FaultInjectingProxy ignoreRange(boolean on) {
    this.ignoreRange = on;
    return this;
  }

  /**
   * Sends each response body at most {@code bytesPerSecond} (per response, in 16 KiB writes); 0 for
   * no limit.
   */
  public FaultInjectingProxy throttleBodies(long bytesPerSecond) {
    this.bodyBytesPerSecond = bytesPerSecond;
    return this;
  }

  /**
   * Sends the response bodies of all connections together at most {@code bytesPerSecond} (16 KiB
   * writes paced in arrival order, so connections share it about equally); 0 for no limit. Applies
   * on top of {@link #throttleBodies}.
   */
  public FaultInjectingProxy throttleTotal(long bytesPerSecond) {
    this.totalBytesPerSecond = bytesPerSecond;
    return this;
  }

  /**
   * Answers a GET that arrives while {@code maxInFlight} counted GETs are already in flight with
   * {@code 503 SlowDown} (S3's answer to a request rate it does not accept); 0 for no limit. The
   * refused GETs do not count as in flight; {@link #slowDowns()} counts them.
   */
  public FaultInjectingProxy slowDownAbove(int maxInFlight) {
    this.slowDownAbove = maxInFlight;
    return this;
  }

  /**
   * GETs answered {@code 503 SlowDown} by {@link #slowDownAbove}, since the last {@link #reset}.
   */
  public int slowDowns() {
    return slowDowns.get();
  }

  /**
   * Limits the requests the origin accepts to {@code perSecond} on average with bursts of up to
   * {@code burst}: a token bucket of {@code burst} tokens (full at the start) refilled at {@code
   * perSecond}; every request (any method) takes one token, and one that finds none is answered
   * {@code 429 Too Many Requests} ({@code SlowDown}) with {@code Retry-After}: the whole seconds
   * until a token is due, at least 1. Refused requests take no token, are not forwarded and do not
   * count as in flight; {@link #tooManyRequests()} counts them and {@link #throttled()} lists them.
   * {@code perSecond} 0 ends the limit.
   *
   * @param perSecond tokens added per second, ≥ 0
   * @param burst the bucket's size, ≥ 1
   */
  public FaultInjectingProxy limitRequestRate(double perSecond, int burst) {
    if (perSecond < 0 || Double.isNaN(perSecond) || burst < 1) {
      throw new IllegalArgumentException(
          "a request rate ≥ 0 and a burst ≥ 1 are needed, got " + perSecond + ", " + burst);
    }
    synchronized (bucket) {
      bucketRate = perSecond;
      bucketBurst = burst;
      bucketTokens = burst;
      bucketRefilledNanos = nanoClock.getAsLong();
    }
    return this;
  }

  /** Requests answered {@code 429} by {@link #limitRequestRate}, since the last {@link #reset}. */
  public int tooManyRequests() {
    return tooManyRequests.get();
  }

  /**
   * Takes a token of the request-rate bucket: null when one was there (or there is no limit), else
   * the {@code Retry-After} to answer with.
   */
  private Duration takeToken() {
    synchronized (bucket) {
      if (bucketRate <= 0) {
        return null;
      }
      long now = nanoClock.getAsLong();
      bucketTokens =
          Math.min(bucketBurst, bucketTokens + (now - bucketRefilledNanos) * bucketRate / 1e9);
      bucketRefilledNanos = now;
      if (bucketTokens >= 1) {
        bucketTokens -= 1;
        return null;
      }
      long seconds = (long) Math.ceil((1 - bucketTokens) / bucketRate);
      return Duration.ofSeconds(Math.max(1, seconds));
    }
  }

  /** Counted GETs (see {@link #countInFlightOnly}) whose response was sent in full, so far. */
  public int finishedGets() {
    return finishedGets.get();
  }

  /** Waits this long before forwarding each request. */
  public FaultInjectingProxy delay(Duration d) {
    this.delay = d;
    return this;
  }

  /**
   * Requests {@code which} accepts wait until {@code until} opens (at most 2 minutes) before they
   * are forwarded; the others are forwarded at once.
   */
  public FaultInjectingProxy holdWhere(
      java.util.function.Predicate<RecordedRequest> which,
      java.util.concurrent.CountDownLatch until) {
    this.holdUntil = until;
    this.holdWhere = which;
    return this;
  }

  /**
   * Only GETs matching {@code filter} count towards {@link #maxInFlightGets()} from now on (default
   * all), e.g. the piece reads of a swarm but not its header reads.
   */
  public FaultInjectingProxy countInFlightOnly(
      java.util.function.Predicate<RecordedRequest> filter) {
    this.counted = filter;
    return this;
  }

  /** Clears faults, recorded requests and maxima. */
  public FaultInjectingProxy reset() {
    cutsLeft.set(0);
    cutWhere = r -> true;
    cutStalls = false;
    stalls.clear();
    failuresLeft.set(0);
    failWhich = (m, t) -> true;
    failWhere = r -> true;
    ignoreRange = false;
    down = false;
    admitOneIn = 0;
    throttled.clear();
    delay = Duration.ZERO;
    holdWhere = r -> false;
    bodyBytesPerSecond = 0;
    totalBytesPerSecond = 0;
    slowDownAbove = 0;
    slowDowns.set(0);
    limitRequestRate(0, 1);
    tooManyRequests.set(0);
    finishedGets.set(0);
    requests.clear();
    maxConnections.set(connections.get());
    maxInFlightGets.set(inFlightGets.get());
    return this;
  }

  /** Requests received, in arrival order. */
  public List<RecordedRequest> requests() {
    return List.copyOf(requests);
  }

  /** GET requests whose path is {@code /bucket/key}, in arrival order. */
  public List<RecordedRequest> gets(String path) {
    return requests.stream()
        .filter(r -> r.method().equals("GET") && r.path().equals(path))
        .toList();
  }

  /**
   * The most client connections that were open at once. A connection counts until the proxy has
   * closed it, which may be a moment after the client has moved on: use {@link #maxInFlightGets()}
   * to check a concurrency limit.
   */
  public int maxConcurrentConnections() {
    return maxConnections.get();
  }

  /**
   * Response body bytes of GET requests forwarded from the upstream to clients since the proxy
   * started (not cleared by {@link #reset()}): what the clients read from the source.
   */
  public long getBodyBytes() {
    return bodyBytesForwarded.get();
  }

  /** The most GET requests that were in flight (received, response not finished) at once. */
  public int maxInFlightGets() {
    return maxInFlightGets.get();
  }

  private void acceptLoop() {
    while (!server.isClosed()) {
      Socket socket;
      try {
        socket = server.accept();
      } catch (IOException e) {
        return; // closed
      }
      if (down) {
        closeQuietly(socket); // a source that is restarting: the connection is reset at once
        continue;
      }
      open.add(socket);
      max(maxConnections, connections.incrementAndGet());
      try {
        handlers.execute(() -> handle(socket));
      } catch (RuntimeException rejected) {
        closeQuietly(socket);
      }
    }
  }

  private void handle(Socket client) {
    try (client) {
      client.setSoTimeout(30_000);
      InputStream in = new BufferedInputStream(client.getInputStream());
      OutputStream out = client.getOutputStream();
      List<String> head = readHead(in);
      if (head == null || head.isEmpty()) {
        return;
      }
      String[] requestLine = head.get(0).split(" ", 3);
      if (requestLine.length != 3) {
        respond(out, 400, "BadRequest", "malformed request line", null, true);
        return;
      }
      String method = requestLine[0];
      List<String> headers = new ArrayList<>(head.subList(1, head.size()));
      Optional<String> range = header(headers, "range");
      RecordedRequest recorded =
          new RecordedRequest(
              method, requestLine[1], range, header(headers, "if-match"), System.nanoTime());
      requests.add(recorded);
      Duration retryAfter = takeToken();
      if (retryAfter != null) {
        long length = header(headers, "content-length").map(Long::parseLong).orElse(0L);
        if (header(headers, "expect").isEmpty()) {
          in.skipNBytes(length); // the request's body, so that the client reads the answer
        }
        tooManyRequests.incrementAndGet();
        throttled.add(recorded);
        respond(
            out,
            429,
            "SlowDown",
            "Please reduce your request rate (request rate limit of the test proxy).",
            retryAfter,
            !method.equals("HEAD"));
        return;
      }
      boolean isGet = method.equals("GET");
      boolean countedGet = isGet && counted.test(recorded);
      AtomicBoolean done = new AtomicBoolean(!countedGet);
      Runnable finished =
          () -> {
            if (done.compareAndSet(false, true)) {
              inFlightGets.decrementAndGet();
              finishedGets.incrementAndGet();
            }
          };
      if (countedGet) {
        int inFlight = inFlightGets.incrementAndGet();
        int limit = slowDownAbove;
        if (limit > 0 && inFlight > limit) {
          inFlightGets.decrementAndGet();
          done.set(true);
          slowDowns.incrementAndGet();
          respond(out, 503, "SlowDown", "Please reduce your request rate.", null, true);
          return;
        }
        max(maxInFlightGets, inFlight);
      }
      try {
        forward(recorded, method, requestLine, headers, in, out, isGet, finished);
      } finally {
        finished.run();
      }
    } catch (IOException e) {
      // the client or the upstream went away; the connection ends
    } finally {
      open.remove(client);
      connections.decrementAndGet();
    }
  }

  private void forward(
      RecordedRequest recorded,
      String method,
      String[] requestLine,
      List<String> headers,
      InputStream in,
      OutputStream out,
      boolean isGet,
      Runnable finished)
      throws IOException {
    if (header(headers, "transfer-encoding").isPresent()) {
      respond(out, 501, "NotImplemented", "chunked request bodies are not proxied", null, true);
      return;
    }
    long contentLength = header(headers, "content-length").map(Long::parseLong).orElse(0L);
    if (header(headers, "expect").map(v -> v.equalsIgnoreCase("100-continue")).orElse(false)) {
      out.write("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
      out.flush();
    }
    byte[] body = in.readNBytes((int) contentLength);
    if (body.length != contentLength) {
      return; // client went away mid-body
    }
    if (!delay.isZero()) {
      try {
        Thread.sleep(delay.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    if (holdWhere.test(recorded)) {
      try {
        holdUntil.await(2, java.util.concurrent.TimeUnit.MINUTES);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    if (failWhich.test(method, requestLine[1])
        && failWhere.test(recorded)
        && takeOne(failuresLeft)) {
      finished.run();
      int status = failureStatus.get();
      String code =
          switch (status) {
            case 503 -> "SlowDown";
            case 500 -> "InternalError";
            case 403 -> "AccessDenied";
            case 404 -> "NoSuchKey";
            default -> "Error";
          };
      respond(
          out,
          status,
          code,
          "fault injected by the test proxy (" + code + ")",
          failureRetryAfter.get(),
          !method.equals("HEAD"));
      return;
    }
    int oneIn = admitOneIn;
    if (oneIn > 1 && stormCount.getAndIncrement() % oneIn != 0) {
      finished.run();
      throttled.add(recorded);
      respond(
          out,
          429,
          "SlowDown",
          "fault injected by the test proxy (throttling storm)",
          stormRetryAfter,
          !method.equals("HEAD"));
      return;
    }
    boolean stripRange = isGet && ignoreRange;
    long cut = isGet && cutWhere.test(recorded) && takeOne(cutsLeft) ? cutAfterBytes.get() : -1;

    try (Socket upstream = new Socket(upstreamHost, upstreamPort)) {
      upstream.setSoTimeout(30_000);
      StringBuilder request = new StringBuilder();
      request.append(String.join(" ", requestLine)).append("\r\n");
      for (String h : headers) {
        String name = h.substring(0, h.indexOf(':')).strip().toLowerCase(Locale.ROOT);
        if (name.equals("connection")
            || name.equals("keep-alive")
            || name.equals("proxy-connection")
            || name.equals("expect")
            || (stripRange && name.equals("range"))) {
          continue;
        }
        request.append(h).append("\r\n");
      }
      request.append("Connection: close\r\n\r\n");
      OutputStream up = upstream.getOutputStream();
      up.write(request.toString().getBytes(StandardCharsets.ISO_8859_1));
      up.write(body);
      up.flush();

      InputStream down = new BufferedInputStream(upstream.getInputStream());
      List<String> responseHead = readHead(down);
      if (responseHead == null) {
        return;
      }
      StringBuilder response = new StringBuilder();
      response.append(responseHead.get(0)).append("\r\n");
      for (String h : responseHead.subList(1, responseHead.size())) {
        String name = h.substring(0, h.indexOf(':')).strip().toLowerCase(Locale.ROOT);
        if (name.equals("connection") || name.equals("keep-alive")) {
          continue;
        }
        response.append(h).append("\r\n");
      }
      response.append("Connection: close\r\n\r\n");
      // A request stops counting as in flight just before the last byte of its response is
      // written: the client cannot start another request on its slot before it has that byte,
      // so the maximum never overcounts.
      long length =
          responseHead.get(0).contains(" 304 ") || method.equals("HEAD")
              ? 0
              : header(responseHead.subList(1, responseHead.size()), "content-length")
                  .map(Long::parseLong)
                  .orElse(-1L);
      if (length == 0) {
        finished.run();
      }
      out.write(response.toString().getBytes(StandardCharsets.ISO_8859_1));
      byte[] buffer = new byte[16 * 1024];
      long sent = 0;
      long started = System.nanoTime();
      while (length < 0 || sent < length) {
        int want = buffer.length;
        if (length >= 0) {
          want = (int) Math.min(want, length - sent);
        }
        if (cut >= 0) {
          if (sent >= cut) {
            out.flush();
            if (cutStalls) {
              stall(recorded, in);
            }
            return; // closing the client socket cuts the body here
          }
          want = (int) Math.min(want, cut - sent);
        }
        int n = down.read(buffer, 0, want);
        if (n < 0) {
          break;
        }
        if (length >= 0 && sent + n >= length) {
          finished.run();
        }
        out.write(buffer, 0, n);
        sent += n;
        if (method.equals("GET")) {
          bodyBytesForwarded.addAndGet(n);
        }
        long rate = bodyBytesPerSecond;
        if (rate > 0) {
          out.flush();
          pause(started + sent * 1_000_000_000L / rate - System.nanoTime());
        }
        long total = totalBytesPerSecond;
        if (total > 0) {
          out.flush();
          long due;
          synchronized (totalPacing) {
            long now = System.nanoTime();
            totalDueNanos = Math.max(totalDueNanos, now) + n * 1_000_000_000L / total;
            due = totalDueNanos;
          }
          pause(due - System.nanoTime());
        }
      }
      out.flush();
    }
  }

  /** Sends nothing more and waits for the client to close (or the socket timeout). */
  private void stall(RecordedRequest recorded, InputStream in) {
    long at = System.nanoTime();
    boolean byClient;
    try {
      byClient = in.read() < 0;
    } catch (java.net.SocketTimeoutException e) {
      byClient = false;
    } catch (IOException e) {
      byClient = true;
    }
    stalls.add(new Stall(recorded, at, System.nanoTime(), byClient));
  }

  private static void pause(long nanos) throws IOException {
    if (nanos <= 0) {
      return;
    }
    try {
      Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while throttling", e);
    }
  }

  private static void respond(
      OutputStream out,
      int status,
      String code,
      String message,
      Duration retryAfter,
      boolean withBody)
      throws IOException {
    byte[] body =
        ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"
                + code
                + "</Code><Message>"
                + message
                + "</Message></Error>")
            .getBytes(StandardCharsets.UTF_8);
    StringBuilder head = new StringBuilder();
    head.append("HTTP/1.1 ").append(status).append(' ').append(code).append("\r\n");
    head.append("Content-Type: application/xml\r\n");
    head.append("Content-Length: ").append(withBody ? body.length : 0).append("\r\n");
    if (retryAfter != null) {
      head.append("Retry-After: ").append(retryAfter.toSeconds()).append("\r\n");
    }
    head.append("Connection: close\r\n\r\n");
    out.write(head.toString().getBytes(StandardCharsets.ISO_8859_1));
    if (withBody) {
      out.write(body);
    }
    out.flush();
  }

  /** Reads the start line and header lines up to the blank line; null at end of stream. */
  private static List<String> readHead(InputStream in) throws IOException {
    List<String> lines = new ArrayList<>();
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    int total = 0;
    while (true) {
      int b = in.read();
      if (b < 0) {
        return lines.isEmpty() && line.size() == 0 ? null : lines;
      }
      if (++total > 64 * 1024) {
        throw new IOException("header section over 64 KiB");
      }
      if (b == '\n') {
        String text = line.toString(StandardCharsets.ISO_8859_1);
        if (text.endsWith("\r")) {
          text = text.substring(0, text.length() - 1);
        }
        line.reset();
        if (text.isEmpty()) {
          return lines;
        }
        lines.add(text);
      } else {
        line.write(b);
      }
    }
  }

  private static Optional<String> header(List<String> headers, String name) {
    for (String h : headers) {
      int colon = h.indexOf(':');
      if (colon > 0 && h.substring(0, colon).strip().equalsIgnoreCase(name)) {
        return Optional.of(h.substring(colon + 1).strip());
      }
    }
    return Optional.empty();
  }

  private static boolean takeOne(AtomicInteger left) {
    while (true) {
      int n = left.get();
      if (n <= 0) {
        return false;
      }
      if (left.compareAndSet(n, n - 1)) {
        return true;
      }
    }
  }

  private static void max(AtomicInteger max, int value) {
    max.accumulateAndGet(value, Math::max);
  }

  private static void closeQuietly(Socket socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // shutting down
    }
  }

  /** Stops accepting, closes every open connection and the handler threads (bounded). */
  @Override
  public void close() {
    try {
      server.close();
    } catch (IOException ignored) {
      // shutting down
    }
    open.forEach(FaultInjectingProxy::closeQuietly);
    handlers.shutdownNow();
    try {
      handlers.awaitTermination(5, TimeUnit.SECONDS);
      acceptor.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
