package io.tensorcast.dataplane.http;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ControlAuthTest {
  @Test
  void eachTokenGrantsItsScopeAndNothingElseDoes() {
    ControlAuth a =
        new ControlAuth(
            ControlToken.of("read-0123456789abcdef"), ControlToken.of("admin-0123456789abcdef"));
    assertThat(a.scope("Bearer read-0123456789abcdef")).isEqualTo(ControlAuth.Scope.READ);
    assertThat(a.scope("bearer  admin-0123456789abcdef ")).isEqualTo(ControlAuth.Scope.ADMIN);
    assertThat(a.scope(null)).isEqualTo(ControlAuth.Scope.NONE);
    assertThat(a.scope("Bearer ")).isEqualTo(ControlAuth.Scope.NONE);
    assertThat(a.scope("Basic read-0123456789abcdef")).isEqualTo(ControlAuth.Scope.NONE);
    assertThat(a.scope("Bearer read-0123456789abcde")).isEqualTo(ControlAuth.Scope.NONE);
    assertThat(a.scope("Bearer read-0123456789abcdef0")).isEqualTo(ControlAuth.Scope.NONE);
  }

  @Test
  void generatedTokensAreRandomAndDistinct() {
    ControlAuth a = ControlAuth.generated();
    ControlAuth b = ControlAuth.generated();
    assertThat(a.read().value()).hasSize(43).isNotEqualTo(a.admin().value());
    assertThat(a.read().value()).isNotEqualTo(b.read().value());
  }
}
