package io.tensorcast.e2e.gitops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;
import org.luaj.vm2.Globals;
import org.luaj.vm2.LuaTable;
import org.luaj.vm2.LuaValue;
import org.luaj.vm2.lib.jse.JsePlatform;

/**
 * Runs an Argo CD resource health check (a Lua script, as in Argo CD's {@code
 * resource.customizations.health.<group>_<kind>}) on an object, the way Argo CD does: the object,
 * as JSON, is the global {@code obj}; the script returns a table with {@code status} (Healthy,
 * Progressing, Degraded, Suspended, Missing or Unknown) and {@code message}. Interpreter: LuaJ (Lua
 * 5.2; Argo CD runs gopher-lua, Lua 5.1 — the scripts keep to what both run).
 */
public final class ArgoCdHealth {

  /** Where the chart keeps the checks, in Argo CD's own layout: {@code <group>/<Kind>/}. */
  public static Path checksDir() {
    Path dir =
        Path.of(System.getProperty("tensorcast.chart.dir", "../charts/tensorcast"), "argocd");
    assertThat(dir).as("chart's argocd/ folder").isDirectory();
    return dir.toAbsolutePath().normalize();
  }

  /** An Argo CD health result. */
  public record Result(String status, String message) {}

  private final String script;
  private final String name;

  private ArgoCdHealth(String name, String script) {
    this.name = name;
    this.script = script;
  }

  /** The chart's health check of {@code group}/{@code kind}. */
  public static ArgoCdHealth of(String group, String kind) throws IOException {
    Path file = checksDir().resolve(group).resolve(kind).resolve("health.lua");
    return new ArgoCdHealth(file.toString(), Files.readString(file));
  }

  /** The script's source. */
  public String script() {
    return script;
  }

  public Result evaluate(HasMetadata object) {
    JsonNode tree = Serialization.jsonMapper().valueToTree(object);
    return evaluate(tree);
  }

  public Result evaluate(JsonNode object) {
    Globals globals = JsePlatform.standardGlobals();
    globals.set("obj", toLua(object));
    LuaValue result = globals.load(script, name).call();
    assertThat(result.istable()).as("%s returns a table", name).isTrue();
    String status = result.get("status").optjstring(null);
    String message = result.get("message").optjstring(null);
    assertThat(status)
        .as("status returned by %s", name)
        .isIn("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown");
    return new Result(status, message);
  }

  private static LuaValue toLua(JsonNode n) {
    if (n == null || n.isNull() || n.isMissingNode()) {
      return LuaValue.NIL;
    }
    if (n.isObject()) {
      LuaTable t = new LuaTable();
      for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        t.set(e.getKey(), toLua(e.getValue()));
      }
      return t;
    }
    if (n.isArray()) {
      LuaTable t = new LuaTable();
      for (int i = 0; i < n.size(); i++) {
        t.set(i + 1, toLua(n.get(i)));
      }
      return t;
    }
    if (n.isBoolean()) {
      return LuaValue.valueOf(n.booleanValue());
    }
    if (n.isIntegralNumber()) {
      return LuaValue.valueOf(n.asLong());
    }
    if (n.isNumber()) {
      return LuaValue.valueOf(n.doubleValue());
    }
    return LuaValue.valueOf(n.asText());
  }
}
