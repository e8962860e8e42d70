package io.tensorcast.api.wire;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class MembershipTest {

  private static Membership.Member member(String id, String host, int port) {
    return new Membership.Member(id, new InetSocketAddress(host, port));
  }

  @Test
  void theOperatorsJsonIsWhatTheDataPlaneParsesBackToAnEqualMembership() throws Exception {
    Membership written =
        Membership.of(List.of(member("m-b", "fd00::2", 8472), member("m-a", "10.0.0.1", 8472)));

    String json = written.toJson();

    assertThat(json)
        .isEqualTo(
            "{\"epoch\":\""
                + written.epoch()
                + "\",\"members\":[{\"id\":\"m-a\",\"address\":\"10.0.0.1:8472\"},"
                + "{\"id\":\"m-b\",\"address\":\"[fd00::2]:8472\"}]}");
    assertThat(new ObjectMapper().writeValueAsString(written)).isEqualTo(json);
    Membership read = Membership.parseJson(json);
    assertThat(read).isEqualTo(written);
    assertThat(read.ids()).containsExactly("m-a", "m-b");
    assertThat(read.member("m-b").address().getPort()).isEqualTo(8472);
    assertThat(read.member("m-b").address().getAddress().getHostAddress())
        .isEqualTo("fd00:0:0:0:0:0:0:2");
  }

  @Test
  void theEpochIsTheSha256OfTheSortedIdAddressLines() throws Exception {
    Membership m =
        Membership.of(List.of(member("m-c", "10.0.0.3", 8472), member("m-b", "fd00::2", 8472)));

    String lines = "m-b=[fd00::2]:8472\nm-c=10.0.0.3:8472\n";
    assertThat(m.epoch())
        .hasSize(64)
        .isEqualTo(
            HexFormat.of()
                .formatHex(
                    MessageDigest.getInstance("SHA-256")
                        .digest(lines.getBytes(StandardCharsets.UTF_8))));
    assertThat(Membership.parseStatic("m-c=10.0.0.3:8472, m-b=[fd00::2]:8472").epoch())
        .isEqualTo(m.epoch());
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource({
    "fd00:0:0:0:0:0:0:2, [fd00::2]:8472",
    "FD00::0002, [fd00::2]:8472",
    "::, [::]:8472",
    "::1, [::1]:8472",
    "2001:db8:0:0:1:0:0:1, [2001:db8::1:0:0:1]:8472",
    "2001:db8:0:1:1:1:1:1, [2001:db8:0:1:1:1:1:1]:8472",
    "fd00:1:0:0:2:0:0:0, [fd00:1:0:0:2::]:8472",
    "10.0.0.1, 10.0.0.1:8472",
  })
  void anIpv6AddressIsWrittenInItsShortFormInBrackets(String ip, String hostPort) {
    assertThat(member("a", ip, 8472).hostPort()).isEqualTo(hostPort);
  }

  @Test
  void unknownFieldsAreIgnoredSoTheOperatorMayBeNewer() {
    Membership m =
        Membership.parseJson(
            "{\"epoch\":\"e1\",\"since\":3,\"members\":[{\"id\":\"a\",\"address\":\"10.0.0.1:1\","
                + "\"zone\":\"z\"}]}");

    assertThat(m.epoch()).isEqualTo("e1");
    assertThat(m.member("a").hostPort()).isEqualTo("10.0.0.1:1");
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "not json | {epoch | body is not JSON",
        "array | [] | body must be a JSON object with epoch and members",
        "no epoch | {\"members\":[]} | epoch: must be a non-empty string",
        "blank epoch | {\"epoch\":\" \",\"members\":[]} | epoch: must be a non-empty string",
        "members not array | {\"epoch\":\"e\",\"members\":{}} | members: must be an array",
        "member not object | {\"epoch\":\"e\",\"members\":[1]} | members[0]: must be an object",
        "blank id | {\"epoch\":\"e\",\"members\":[{\"id\":\"\",\"address\":\"10.0.0.1:1\"}]}"
            + " | members[0].id: must be a non-empty string",
        "address number | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":5}]}"
            + " | members[0].address: must be a string <ip>:<port>",
        "no port | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":\"10.0.0.1\"}]}"
            + " | members[0].address: '10.0.0.1' is not HOST:PORT",
        "port 0 | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":\"10.0.0.1:0\"}]}"
            + " | members[0].address: port 0 is not in 1..65535",
        "port too big | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":\"10.0.0.1:70000\"}]}"
            + " | members[0].address: port 70000 is not in 0..65535",
        "port not number | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":\"h:x\"}]}"
            + " | members[0].address: port of 'h:x' is not a number",
        "duplicate id | {\"epoch\":\"e\",\"members\":[{\"id\":\"a\",\"address\":\"10.0.0.1:1\"},"
            + "{\"id\":\"a\",\"address\":\"10.0.0.2:1\"}]} | members: id 'a' appears twice",
      })
  void aBrokenBodyIsRefusedNamingTheFieldAndTheRule(String name, String body, String message) {
    assertThatThrownBy(() -> Membership.parseJson(body))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message);
  }

  @Test
  void theConstructorsKeepTheRulesWhateverBuildsTheMembership() {
    assertThatThrownBy(() -> member("a", "10.0.0.1", 0))
        .hasMessage(
            "member a: port 0 is not in 1..65535 ('10.0.0.1:0'); a member is dialled on its port");
    assertThatThrownBy(() -> member(" ", "10.0.0.1", 1))
        .hasMessage("member id: must be a non-empty string");
    assertThatThrownBy(
            () ->
                new Membership(
                    "e", List.of(member("a", "10.0.0.1", 1), member("a", "10.0.0.2", 1))))
        .hasMessage("members: id 'a' appears twice");
    assertThatThrownBy(() -> new Membership("", List.of()))
        .hasMessage("epoch: must be a non-empty string");
    assertThat(
            new Membership("e", List.of(member("b", "10.0.0.2", 1), member("a", "10.0.0.1", 1)))
                .ids())
        .containsExactly("a", "b");
  }

  @Test
  void aStaticListNamesTheBrokenEntry() {
    assertThatThrownBy(() -> Membership.parseStatic("pod-0"))
        .hasMessage("--peers: entry 'pod-0' is not ID=HOST:PORT (e.g. pod-0=10.0.0.5:8472)");
    assertThatThrownBy(() -> Membership.parseStatic(" , ")).hasMessage("--peers: no members given");
    assertThatThrownBy(() -> Membership.parseStatic("a=10.0.0.1:0"))
        .hasMessageContaining("--peers entry a=10.0.0.1:0: port 0 is not in 1..65535");
  }

  @Test
  void aListenAddressMayTakeAnyFreePort() {
    assertThat(Membership.address("[::]:0", "--peer-listen").getPort()).isZero();
    assertThat(Membership.address("[::1]:8472", "--peer-listen").getAddress().isLoopbackAddress())
        .isTrue();
  }
}
