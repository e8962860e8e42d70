package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class ForwardingArtifactSourceTest {
  private static final SourceFile FILE =
      new SourceFile("a.safetensors", 5, "etag-1", Optional.empty());

  /** A source whose every answer differs from the interface's defaults. */
  private static final class Answering implements ArtifactSource {
    final List<String> calls = new ArrayList<>();

    @Override
    public List<SourceFile> list() {
      calls.add("list");
      return List.of(FILE);
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) {
      calls.add("openRange " + file.path() + "@" + offset + "+" + length);
      return new ByteArrayInputStream("hello".getBytes(StandardCharsets.US_ASCII));
    }

    @Override
    public Optional<String> resolvedRevision() {
      return Optional.of("rev-7");
    }

    @Override
    public void checkUnchanged(SourceFile file) throws SourceException {
      throw new SourceException(Reason.SourceChanged, file.path() + " changed", false);
    }

    @Override
    public PathFilter filter() {
      return PathFilter.of(List.of("*.safetensors"), List.of());
    }

    @Override
    public PublishedDigest publishedDigest(SourceFile file) {
      return PublishedDigest.hex(
          PublishedDigest.Algorithm.SHA256,
          "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
          "test");
    }

    @Override
    public String describe() {
      return "answering source";
    }

    @Override
    public void close() {
      calls.add("close");
    }
  }

  @Test
  void everyMethodOfTheInterfaceIsForwardedItsDefaultsIncluded() throws Exception {
    for (Method m : ArtifactSource.class.getMethods()) {
      if (java.lang.reflect.Modifier.isStatic(m.getModifiers())) {
        continue;
      }
      assertThat(
              ForwardingArtifactSource.class
                  .getDeclaredMethod(m.getName(), m.getParameterTypes())
                  .getDeclaringClass())
          .as("ForwardingArtifactSource overrides %s", m)
          .isEqualTo(ForwardingArtifactSource.class);
    }
  }

  @Test
  void aWrapperThatOverridesNothingAnswersWithTheWrappedSourcesAnswers() throws Exception {
    Answering inner = new Answering();
    ArtifactSource wrapper = new ForwardingArtifactSource(inner) {};

    assertThat(wrapper.list()).containsExactly(FILE);
    try (InputStream in = wrapper.openRange(FILE, 0, 5)) {
      assertThat(in.readAllBytes()).isEqualTo("hello".getBytes(StandardCharsets.US_ASCII));
    }
    assertThat(wrapper.resolvedRevision()).contains("rev-7");
    assertThatThrownBy(() -> wrapper.checkUnchanged(FILE))
        .isInstanceOf(SourceException.class)
        .hasMessageContaining("a.safetensors changed");
    assertThat(wrapper.filter().include()).containsExactly("*.safetensors");
    assertThat(wrapper.publishedDigest(FILE)).isEqualTo(inner.publishedDigest(FILE));
    assertThat(wrapper.describe()).isEqualTo("answering source");
    wrapper.close();
    assertThat(inner.calls).containsExactly("list", "openRange a.safetensors@0+5", "close");
  }

  @Test
  void theWireCountingSourceCountsBodyBytesAndForwardsTheRest() throws Exception {
    Answering inner = new Answering();
    WireCountingSource counting = new WireCountingSource(inner);
    try (InputStream in = counting.openRange(FILE, 0, 5)) {
      assertThat(in.readAllBytes()).hasSize(5);
    }
    assertThat(counting.wireBytes()).isEqualTo(5);
    assertThat(counting.publishedDigest(FILE))
        .as("the published digest is the wrapped source's, not the interface's 'none'")
        .isEqualTo(inner.publishedDigest(FILE));
    assertThat(counting.filter().include()).containsExactly("*.safetensors");
  }
}
