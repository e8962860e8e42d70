package io.tensorcast.arch;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.library.dependencies.SliceRule;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Which module may use which, checked on the production classes of every module (test classes are
 * left out). Each module owns one package root: {@code io.tensorcast.api} (crds), {@code
 * io.tensorcast.dataplane}, {@code io.tensorcast.operator}, {@code io.tensorcast.csi} (csi-driver)
 * and {@code io.tensorcast.rdma} (rdma-device-plugin).
 */
class ModuleDependencyRulesTest {

  private static JavaClasses classes;

  @BeforeAll
  static void importProductionClasses() {
    classes =
        new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("io.tensorcast");
  }

  @Test
  void everyModuleIsOnTheImportedClasspath() {
    for (String root : List.of("api", "dataplane", "operator", "csi", "rdma")) {
      assertThat(
              classes.stream().filter(c -> c.getPackageName().startsWith("io.tensorcast." + root)))
          .as("production classes of io.tensorcast.%s", root)
          .isNotEmpty();
    }
  }

  @Test
  void theOperatorNeverUsesDataPlaneCode() {
    ArchRule rule =
        noClasses()
            .that()
            .resideInAPackage("io.tensorcast.operator..")
            .should()
            .dependOnClassesThat()
            .resideInAPackage("io.tensorcast.dataplane..")
            .because(
                "the operator and the data plane meet only through the API module's types"
                    + " (io.tensorcast.api..)");
    rule.check(classes);
  }

  @Test
  void theApiModuleUsesNothingElseOfOurs() {
    ArchRule rule =
        noClasses()
            .that()
            .resideInAPackage("io.tensorcast.api..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(
                "io.tensorcast.dataplane..",
                "io.tensorcast.operator..",
                "io.tensorcast.csi..",
                "io.tensorcast.rdma..",
                "io.tensorcast.e2e..")
            .because("every other module depends on the API module, never the other way");
    rule.check(classes);
  }

  @Test
  void theCsiDriverUsesNeitherTheDataPlaneNorTheOperator() {
    ArchRule rule =
        noClasses()
            .that()
            .resideInAPackage("io.tensorcast.csi..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage("io.tensorcast.dataplane..", "io.tensorcast.operator..")
            .because(
                "the CSI driver's image carries neither; it shares only the API module's types");
    rule.check(classes);
  }

  @Test
  void theRdmaDevicePluginUsesNeitherTheDataPlaneNorTheOperator() {
    noClasses()
        .that()
        .resideInAPackage("io.tensorcast.rdma..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage("io.tensorcast.dataplane..", "io.tensorcast.operator..")
        .check(classes);
  }

  /**
   * Class-to-class edges that close a package cycle in today's code, left out of the cycle rule one
   * by one (origin, target); docs/DECISIONS.md says why each is there. Any other edge that closes a
   * cycle, also between the same packages, fails the rule.
   */
  private static final Map<String, List<String[]>> KNOWN_CYCLE_EDGES =
      Map.of(
          "dataplane",
          List.<String[]>of(
              new String[] {
                "io.tensorcast.dataplane.pod.DataPlaneServer",
                "io.tensorcast.dataplane.cli.Quantities"
              }),
          "operator",
          List.<String[]>of(
              new String[] {
                "io.tensorcast.operator.validation.SourcePolicy",
                "io.tensorcast.operator.config.OperatorConfig"
              },
              new String[] {
                "io.tensorcast.operator.validation.SpecValidator",
                "io.tensorcast.operator.desired.ByteSize"
              },
              new String[] {
                "io.tensorcast.operator.written.WrittenArtifacts",
                "io.tensorcast.operator.desired.DataPlanePod"
              },
              new String[] {
                "io.tensorcast.operator.written.WrittenArtifacts",
                "io.tensorcast.operator.desired.PodPlan"
              }));

  @ParameterizedTest(name = "no package cycles in io.tensorcast.{0}")
  @ValueSource(strings = {"api", "dataplane", "operator", "csi", "rdma"})
  void noPackageCyclesInsideAModule(String root) {
    SliceRule rule = slices().matching("io.tensorcast." + root + ".(**)").should().beFreeOfCycles();
    for (String[] edge : KNOWN_CYCLE_EDGES.getOrDefault(root, List.of())) {
      rule = rule.ignoreDependency(edge[0], edge[1]);
    }
    rule.check(classes);
  }
}
