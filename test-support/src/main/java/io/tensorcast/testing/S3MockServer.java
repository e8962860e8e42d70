package io.tensorcast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * A real S3-compatible server for tests: Adobe S3Mock 5.2.0 (its Spring Boot exec jar) run as a
 * separate {@code java -jar} process, so Spring stays off the test classpath.
 *
 * <p>The jar is found through the system property {@code tensorcast.s3mock.jar} (set by the
 * dataplane pom to {@code target/test-servers/s3mock-exec.jar}), else at that path relative to the
 * working directory. Flags (property names read from the 5.2.0 jar's {@code application.properties}
 * and {@code StoreProperties}): {@code --com.adobe.testing.s3mock.httpPort} (HTTP), {@code
 * --server.port=0} (HTTPS on a random port), {@code --com.adobe.testing.s3mock.store.root} (a fresh
 * temp dir) and {@code --com.adobe.testing.s3mock.max-payload-size} (raised from 10 MB). It does
 * not check signatures.
 *
 * <p>Both its listeners are bound to 127.0.0.1 only: the HTTPS one by {@code --server.address}, the
 * plain HTTP one (an extra Tomcat connector S3Mock adds, which {@code server.address} does not
 * reach) by a bean definition file passed with {@code --spring.main.sources} that sets the
 * connector's {@code address} before the server binds.
 *
 * <p>{@link #shared()} starts one instance per JVM (about 5–10 s); tests isolate themselves with
 * their own bucket names. {@link #start()} starts a private one. Every instance is stopped, and its
 * store deleted, by a shutdown hook when the JVM exits (also on SIGTERM or SIGINT) before {@link
 * #close()}.
 */
public final class S3MockServer implements AutoCloseable {
  /** Credentials the seeding client and test sources use; S3Mock accepts any. */
  public static final String ACCESS_KEY = "tensorcast-test";

  public static final String SECRET_KEY = "tensorcast-test-secret";
  public static final String REGION = "us-east-1";

  private static final Duration START_TIMEOUT = Duration.ofSeconds(120);

  /** The address both listeners bind to. */
  public static final String BIND_ADDRESS = "127.0.0.1";

  /**
   * Spring bean definitions loaded into S3Mock: binds its extra plain-HTTP Tomcat connector (bean
   * {@code httpConnector}) to {@link #BIND_ADDRESS}; runs before the web server starts listening.
   */
  private static final String LOOPBACK_BEANS =
      """
      <?xml version="1.0" encoding="UTF-8"?>
      <beans xmlns="http://www.springframework.org/schema/beans"
             xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
             xsi:schemaLocation="http://www.springframework.org/schema/beans https://www.springframework.org/schema/beans/spring-beans.xsd">
        <bean id="tensorcastHttpConnectorAddress"
              class="org.springframework.beans.factory.config.MethodInvokingFactoryBean">
          <property name="targetObject" ref="httpConnector"/>
          <property name="targetMethod" value="setProperty"/>
          <property name="arguments">
            <list><value>address</value><value>%s</value></list>
          </property>
        </bean>
      </beans>
      """
          .replace("%s", BIND_ADDRESS);

  private static S3MockServer shared;

  private final Process process;
  private final int port;
  private final Path root;
  private final Path log;
  private final Path beans;
  private final boolean isShared;
  private final Thread stopHook;
  private S3Client client;
  private boolean stopped;

  private S3MockServer(
      Process process, int port, Path root, Path log, Path beans, boolean isShared) {
    this.process = process;
    this.port = port;
    this.root = root;
    this.log = log;
    this.beans = beans;
    this.isShared = isShared;
    this.stopHook = new Thread(this::stop, "s3mock-stop");
    Runtime.getRuntime().addShutdownHook(stopHook);
  }

  /** The instance shared by every test of this JVM; {@link #close()} on it does nothing. */
  public static synchronized S3MockServer shared() {
    if (shared == null || !shared.process.isAlive()) {
      shared = launch(true);
    }
    return shared;
  }

  /** A private instance; close it to stop the process and delete its store. */
  public static S3MockServer start() {
    return launch(false);
  }

  private static S3MockServer launch(boolean isShared) {
    Path jar = jar();
    IllegalStateException last = null;
    for (int attempt = 1; attempt <= 3; attempt++) {
      Path root = null;
      try {
        root = Files.createTempDirectory("s3mock-root");
        Path log = Files.createTempFile("s3mock", ".log");
        Path beans = Files.createTempFile("s3mock-loopback", ".xml");
        Files.writeString(beans, LOOPBACK_BEANS);
        int port = freePort();
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(
            List.of(
                "-Xms64m",
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Djava.awt.headless=true",
                "-jar",
                jar.toString(),
                "--server.port=0",
                "--server.address=" + BIND_ADDRESS,
                "--spring.main.sources=" + beans.toUri(),
                "--com.adobe.testing.s3mock.httpPort=" + port,
                "--com.adobe.testing.s3mock.store.root=" + root,
                "--com.adobe.testing.s3mock.store.retain-files-on-exit=false",
                "--com.adobe.testing.s3mock.max-payload-size=512MB",
                "--spring.main.banner-mode=off"));
        Process process =
            new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        S3MockServer server = new S3MockServer(process, port, root, log, beans, isShared);
        try {
          server.awaitReady();
          return server;
        } catch (IllegalStateException e) {
          server.stop();
          last = e;
        }
      } catch (IOException e) {
        TestFiles.deleteTreeQuietly(root);
        last = new IllegalStateException("cannot start S3Mock from " + jar + ": " + e, e);
      }
    }
    throw last;
  }

  private static Path jar() {
    String property = System.getProperty("tensorcast.s3mock.jar");
    Path jar =
        property != null ? Path.of(property) : Path.of("target", "test-servers", "s3mock-exec.jar");
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(
          "S3Mock exec jar not found at "
              + jar.toAbsolutePath()
              + " (system property tensorcast.s3mock.jar="
              + property
              + "); run the tests through Maven, which copies it to target/test-servers/");
    }
    return jar;
  }

  private static int freePort() throws IOException {
    return TestPorts.freePort();
  }

  /** Polls {@code GET /} (ListBuckets) until it answers 200, the process dies or time is up. */
  private void awaitReady() {
    long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException(
            "S3Mock exited with " + process.exitValue() + " during start; log:\n" + logTail());
      }
      try {
        HttpURLConnection c = (HttpURLConnection) endpoint().toURL().openConnection();
        c.setConnectTimeout(500);
        c.setReadTimeout(2000);
        int status = c.getResponseCode();
        c.getInputStream().close();
        if (status == 200) {
          return;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for S3Mock", e);
      }
    }
    throw new IllegalStateException(
        "S3Mock did not answer on "
            + endpoint()
            + " within "
            + START_TIMEOUT
            + "; log:\n"
            + logTail());
  }

  private String logTail() {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      return "(log unreadable: " + e + ")";
    }
  }

  /** The HTTP port on which S3Mock answers. */
  public int port() {
    return port;
  }

  /** {@code http://127.0.0.1:<port>}. */
  public URI endpoint() {
    return URI.create("http://127.0.0.1:" + port);
  }

  /** A client for seeding buckets and objects (path-style, checksums only when required). */
  public synchronized S3Client client() {
    if (client == null) {
      client =
          S3Client.builder()
              .httpClient(ApacheHttpClient.builder().build())
              .endpointOverride(endpoint())
              .region(Region.of(REGION))
              .forcePathStyle(true)
              .credentialsProvider(
                  StaticCredentialsProvider.create(
                      AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
              .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
              .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
              .build();
    }
    return client;
  }

  public void createBucket(String bucket) {
    client().createBucket(b -> b.bucket(bucket));
  }

  /** Uploads a file; returns the ETag without quotes. */
  public String putFile(String bucket, String key, Path file) {
    return unquote(
        client().putObject(b -> b.bucket(bucket).key(key), RequestBody.fromFile(file)).eTag());
  }

  /** Uploads bytes; returns the ETag without quotes. */
  public String putBytes(String bucket, String key, byte[] bytes) {
    return unquote(
        client().putObject(b -> b.bucket(bucket).key(key), RequestBody.fromBytes(bytes)).eTag());
  }

  /**
   * Uploads bytes with a PUT whose path is sent exactly as given ({@code /bucket/} + {@code
   * rawKeyPath}, percent-escapes included), bypassing the SDK's key encoding and URI normalisation:
   * the way to seed keys such as {@code a/%2E%2E/b} ({@code a/../b}) that a hostile or careless
   * store may hold. Unsigned; S3Mock does not check signatures.
   */
  public void putRawPath(String bucket, String rawKeyPath, byte[] bytes) {
    try {
      HttpURLConnection c =
          (HttpURLConnection)
              URI.create(endpoint() + "/" + bucket + "/" + rawKeyPath).toURL().openConnection();
      c.setRequestMethod("PUT");
      c.setDoOutput(true);
      c.setFixedLengthStreamingMode(bytes.length);
      try (var out = c.getOutputStream()) {
        out.write(bytes);
      }
      int status = c.getResponseCode();
      if (status != 200) {
        throw new IllegalStateException("PUT " + rawKeyPath + " answered " + status);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String unquote(String etag) {
    return etag == null ? "" : etag.replace("\"", "");
  }

  /** Stops a private instance (bounded: SIGTERM, 10 s, then SIGKILL) and deletes its store. */
  @Override
  public void close() {
    if (!isShared) {
      stop();
    }
  }

  private synchronized void stop() {
    if (stopped) {
      return;
    }
    stopped = true;
    if (Thread.currentThread() != stopHook) {
      try {
        Runtime.getRuntime().removeShutdownHook(stopHook);
      } catch (IllegalStateException shuttingDown) {
        // the hook is running or about to; stop() is idempotent
      }
    }
    if (client != null) {
      client.close();
      client = null;
    }
    process.destroy();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    TestFiles.deleteTreeQuietly(root);
    try {
      Files.deleteIfExists(log);
      Files.deleteIfExists(beans);
    } catch (IOException ignored) {
      // temp files; nothing depends on them
    }
  }

  /** The process id of the S3Mock JVM (for tests that check what it listens on). */
  public long pid() {
    return process.pid();
  }
}
