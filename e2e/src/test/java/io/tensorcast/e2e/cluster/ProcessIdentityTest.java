package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodSecurityContextBuilder;
import io.fabric8.kubernetes.api.model.SecurityContextBuilder;
import org.junit.jupiter.api.Test;

class ProcessIdentityTest {

  private static Pod pod(PodSecurityContextBuilder ctx, Container c) {
    return new PodBuilder()
        .withNewMetadata()
        .withName("p")
        .withNamespace("ns")
        .endMetadata()
        .withNewSpec()
        .withSecurityContext(ctx == null ? null : ctx.build())
        .withContainers(c)
        .endSpec()
        .build();
  }

  private static Container container(SecurityContextBuilder ctx) {
    return new ContainerBuilder()
        .withName("main")
        .withSecurityContext(ctx == null ? null : ctx.build())
        .build();
  }

  @Test
  void noSecuritySettingRunsAsTheHarnessUser() throws Exception {
    Container c = container(null);
    assertThat(ProcessIdentity.of(pod(null, c), c)).isEmpty();
    Container privileged = container(new SecurityContextBuilder().withPrivileged(true));
    assertThat(ProcessIdentity.of(pod(null, privileged), privileged)).isEmpty();
  }

  @Test
  void aNonRootContainerGetsItsUserGroupsAndOnlyTheAddedCapabilities() throws Exception {
    Container c =
        container(
            new SecurityContextBuilder()
                .withAllowPrivilegeEscalation(false)
                .withNewCapabilities()
                .withDrop("ALL")
                .withAdd("IPC_LOCK")
                .endCapabilities());
    Pod p =
        pod(
            new PodSecurityContextBuilder()
                .withRunAsNonRoot(true)
                .withRunAsUser(10001L)
                .withRunAsGroup(10001L)
                .withFsGroup(10001L)
                .withSupplementalGroups(20L),
            c);

    ProcessIdentity id = ProcessIdentity.of(p, c).orElseThrow();

    assertThat(id.uid()).isEqualTo(10001);
    assertThat(id.gid()).isEqualTo(10001);
    assertThat(id.groups()).containsExactly(10001L, 20L);
    assertThat(id.capabilities()).containsExactly("IPC_LOCK");
    assertThat(id.noNewPrivs()).isTrue();
    assertThat(id.setpriv())
        .containsExactly(
            "setpriv",
            "--reuid=10001",
            "--regid=10001",
            "--groups=10001,20",
            "--bounding-set=-all,+ipc_lock",
            "--inh-caps=-all,+ipc_lock",
            "--ambient-caps=-all,+ipc_lock",
            "--no-new-privs",
            "--");
  }

  @Test
  void aRootContainerKeepsTheRuntimeDefaultsMinusDropPlusAdd() throws Exception {
    Container c =
        container(
            new SecurityContextBuilder()
                .withRunAsUser(0L)
                .withNewCapabilities()
                .withDrop("ALL")
                .withAdd("CHOWN", "CAP_DAC_READ_SEARCH")
                .endCapabilities());
    ProcessIdentity id = ProcessIdentity.of(pod(null, c), c).orElseThrow();
    assertThat(id.capabilities()).containsExactlyInAnyOrder("CHOWN", "DAC_READ_SEARCH");
    assertThat(id.setpriv())
        .contains("--bounding-set=-all,+chown,+dac_read_search", "--inh-caps=-all")
        .noneMatch(a -> a.startsWith("--ambient-caps"));

    Container some =
        container(
            new SecurityContextBuilder()
                .withNewCapabilities()
                .withDrop("NET_RAW")
                .endCapabilities());
    assertThat(ProcessIdentity.of(pod(null, some), some).orElseThrow().capabilities())
        .hasSize(ProcessIdentity.RUNTIME_DEFAULT.size() - 1)
        .doesNotContain("NET_RAW");
  }

  @Test
  void runAsNonRootWithoutAUserDoesNotStart() {
    Container c = container(null);
    Pod p = pod(new PodSecurityContextBuilder().withRunAsNonRoot(true), c);

    assertThatThrownBy(() -> ProcessIdentity.of(p, c))
        .isInstanceOfSatisfying(
            ContainerStartException.class,
            e -> assertThat(e.reason()).isEqualTo("CreateContainerConfigError"))
        .hasMessageContaining("container has runAsNonRoot and image will run as root");
    Container root = container(new SecurityContextBuilder().withRunAsUser(0L));
    Pod q = pod(new PodSecurityContextBuilder().withRunAsNonRoot(true).withRunAsUser(10001L), root);
    assertThatThrownBy(() -> ProcessIdentity.of(q, root)).hasMessageContaining("runAsNonRoot");
  }
}
