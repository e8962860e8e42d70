"""A writer process of the round-trip tests: puts one batch (from files), then optionally seals.

Usage: rank_writer.py CLIENT_DIR SPEC.json
SPEC: {"socket", "token", "version", "kind", "metadata", "tensors": [{"name", "dtype", "shape",
"file", "writer_partition"?}], "pace"?: seconds between 1 MiB body chunks, "zeroCopy"?:
writes dir, "seal"?: true, "save"?: {"uri", ...}}
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
from tensorcast_write import Writer  # noqa: E402

spec = json.load(open(sys.argv[2]))
w = Writer(spec["socket"], spec["token"], pace=spec.get("pace"))
w.create(spec["version"], kind=spec.get("kind"), metadata=spec.get("metadata"))
tensors = []
for t in spec["tensors"]:
    with open(t["file"], "rb") as f:
        d = dict(name=t["name"], dtype=t["dtype"], shape=t["shape"], data=f.read())
    if t.get("writer_partition"):
        d["writer_partition"] = t["writer_partition"]
    tensors.append(d)
print("@@ putting", flush=True)
if spec.get("zeroCopy"):
    print("@@ put=" + json.dumps(w.put_zero_copy(spec["version"], tensors, spec["zeroCopy"])), flush=True)
else:
    print("@@ put=" + json.dumps(w.put_batch(spec["version"], tensors)), flush=True)
if spec.get("seal"):
    print("@@ seal=" + json.dumps(w.seal(spec["version"])), flush=True)
if spec.get("save"):
    print("@@ save=" + json.dumps(w.save(spec["version"], **spec["save"])), flush=True)
print("@@ done=ok", flush=True)
