package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ContainerConfigTest {

  private static final ContainerConfig.PodContext CTX =
      new ContainerConfig.PodContext("127.0.1.7", "127.0.1.7", Map.of("memory", "32Gi"));

  private final Map<String, Map<String, byte[]>> secrets = new HashMap<>();
  private final Map<String, Map<String, byte[]>> configMaps = new HashMap<>();
  private final ObjectLookup lookup =
      new ObjectLookup() {
        @Override
        public Map<String, byte[]> secret(String namespace, String name) {
          return secrets.get(namespace + "/" + name);
        }

        @Override
        public Map<String, byte[]> configMap(String namespace, String name) {
          return configMaps.get(namespace + "/" + name);
        }
      };

  private static Pod pod(Container c) {
    return new PodBuilder()
        .withNewMetadata()
        .withNamespace("ns1")
        .withName("loader-0")
        .withUid("uid-1")
        .withLabels(Map.of("app", "tc"))
        .endMetadata()
        .withNewSpec()
        .withNodeName("node-a")
        .withContainers(c)
        .endSpec()
        .build();
  }

  private ContainerConfig.Resolved resolve(Container c, MountTable mounts)
      throws ContainerStartException {
    return ContainerConfig.resolve(
        pod(c),
        c,
        CTX,
        mounts,
        lookup,
        Map.of("PATH", "/usr/bin"),
        Map.of("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        Path.of("/tmp/wd"));
  }

  @Test
  void expansionFollowsKubernetesRules() {
    Map<String, String> vars = Map.of("A", "x", "B", "y");
    assertThat(ContainerConfig.expand("$(A)-$(B)", vars::get)).isEqualTo("x-y");
    assertThat(ContainerConfig.expand("$(MISSING)", vars::get)).isEqualTo("$(MISSING)");
    assertThat(ContainerConfig.expand("$$(A)", vars::get)).isEqualTo("$(A)");
    assertThat(ContainerConfig.expand("$$", vars::get)).isEqualTo("$");
    assertThat(ContainerConfig.expand("$(A", vars::get)).isEqualTo("$(A");
    assertThat(ContainerConfig.expand("cost $5 $", vars::get)).isEqualTo("cost $5 $");
  }

  @Test
  void envResolvesDownwardApiSecretsConfigMapsAndExpandsArgs() throws Exception {
    secrets.put("ns1/creds", Map.of("key", "AKIA".getBytes(StandardCharsets.UTF_8)));
    configMaps.put(
        "ns1/settings",
        Map.of("LEVEL", "debug".getBytes(StandardCharsets.UTF_8), "bad key", new byte[] {1}));
    Container c =
        new ContainerBuilder()
            .withName("main")
            .withArgs("--bind=$(POD_IP)", "$(NODE)", "$(UNDEFINED)")
            .addNewEnvFrom()
            .withPrefix("CFG_")
            .withNewConfigMapRef()
            .withName("settings")
            .endConfigMapRef()
            .endEnvFrom()
            .addNewEnv()
            .withName("POD_IP")
            .withNewValueFrom()
            .withNewFieldRef()
            .withFieldPath("status.podIP")
            .endFieldRef()
            .endValueFrom()
            .endEnv()
            .addNewEnv()
            .withName("NODE")
            .withNewValueFrom()
            .withNewFieldRef()
            .withFieldPath("spec.nodeName")
            .endFieldRef()
            .endValueFrom()
            .endEnv()
            .addNewEnv()
            .withName("APP")
            .withNewValueFrom()
            .withNewFieldRef()
            .withFieldPath("metadata.labels['app']")
            .endFieldRef()
            .endValueFrom()
            .endEnv()
            .addNewEnv()
            .withName("AWS_ACCESS_KEY_ID")
            .withNewValueFrom()
            .withNewSecretKeyRef()
            .withName("creds")
            .withKey("key")
            .endSecretKeyRef()
            .endValueFrom()
            .endEnv()
            .addNewEnv()
            .withName("URL")
            .withValue("https://$(KUBERNETES_SERVICE_HOST)/$(POD_IP)")
            .endEnv()
            .build();

    ContainerConfig.Resolved r = resolve(c, MountTable.empty());

    assertThat(r.env())
        .containsEntry("POD_IP", "127.0.1.7")
        .containsEntry("NODE", "node-a")
        .containsEntry("APP", "tc")
        .containsEntry("AWS_ACCESS_KEY_ID", "AKIA")
        .containsEntry("CFG_LEVEL", "debug")
        .containsEntry("URL", "https://127.0.0.1/127.0.1.7")
        .containsEntry("PATH", "/usr/bin")
        .doesNotContainKey("CFG_bad key");
    assertThat(r.args()).containsExactly("--bind=127.0.1.7", "node-a", "$(UNDEFINED)");
    assertThat(r.workingDir()).isEqualTo(Path.of("/tmp/wd"));
  }

  @Test
  void missingSecretOrKeyIsACreateContainerConfigErrorNamingIt() {
    Container c =
        new ContainerBuilder()
            .withName("main")
            .addNewEnv()
            .withName("TOKEN")
            .withNewValueFrom()
            .withNewSecretKeyRef()
            .withName("hf")
            .withKey("token")
            .endSecretKeyRef()
            .endValueFrom()
            .endEnv()
            .build();
    assertThatThrownBy(() -> resolve(c, MountTable.empty()))
        .isInstanceOfSatisfying(
            ContainerStartException.class,
            e -> assertThat(e.reason()).isEqualTo("CreateContainerConfigError"))
        .hasMessage("container main: env TOKEN: secret \"hf\" not found");

    secrets.put("ns1/hf", Map.of("other", new byte[0]));
    assertThatThrownBy(() -> resolve(c, MountTable.empty()))
        .hasMessage("container main: env TOKEN: couldn't find key token in Secret ns1/hf");
  }

  @Test
  void optionalMissingReferenceLeavesTheVariableUnset() throws Exception {
    Container c =
        new ContainerBuilder()
            .withName("main")
            .addNewEnv()
            .withName("TOKEN")
            .withNewValueFrom()
            .withNewConfigMapKeyRef()
            .withName("absent")
            .withKey("k")
            .withOptional(true)
            .endConfigMapKeyRef()
            .endValueFrom()
            .endEnv()
            .build();
    assertThat(resolve(c, MountTable.empty()).env()).doesNotContainKey("TOKEN");
  }

  @Test
  void unsupportedFieldPathIsRejectedWithTheSupportedList() {
    Container c =
        new ContainerBuilder()
            .withName("main")
            .addNewEnv()
            .withName("X")
            .withNewValueFrom()
            .withNewFieldRef()
            .withFieldPath("spec.schedulerName")
            .endFieldRef()
            .endValueFrom()
            .endEnv()
            .build();
    assertThatThrownBy(() -> resolve(c, MountTable.empty()))
        .hasMessageContaining("fieldRef.fieldPath \"spec.schedulerName\" is not supported")
        .hasMessageContaining("status.podIP");
  }

  @Test
  void pathsUnderMountsAreRewrittenInEnvArgsAndWorkingDir() throws Exception {
    MountTable mounts =
        new MountTable(
            List.of(
                new MountTable.Mount("/models", Path.of("/n/root/var/lib/tc"), false),
                new MountTable.Mount("/models/cache/", Path.of("/n/pod/cache"), false)));
    Container c =
        new ContainerBuilder()
            .withName("main")
            .withWorkingDir("/models/work")
            .withCommand("/models/bin/run")
            .withArgs(
                "--dir=/models/llama",
                "/models/cache/x",
                "/modelsX",
                "see /models",
                "--flag",
                "/models")
            .addNewEnv()
            .withName("STORE")
            .withValue("/models/store")
            .endEnv()
            .build();

    ContainerConfig.Resolved r = resolve(c, mounts);

    assertThat(r.command()).containsExactly("/n/root/var/lib/tc/bin/run");
    assertThat(r.args())
        .containsExactly(
            "--dir=/n/root/var/lib/tc/llama",
            "/n/pod/cache/x",
            "/modelsX",
            "see /models",
            "--flag",
            "/n/root/var/lib/tc");
    assertThat(r.env()).containsEntry("STORE", "/n/root/var/lib/tc/store");
    assertThat(r.workingDir()).isEqualTo(Path.of("/n/root/var/lib/tc/work"));
  }
}
