#!/usr/bin/python3
"""Records what the reference (Debian python3-torch 1.13) makes of every torch file in the corpus.

Usage: /usr/bin/python3 hack/torch/record-conformance.py CORPUS_DIR > \
           dataplane/src/test/resources/torch/conformance.json

For every file under CORPUS_DIR/torch (recursively) it runs torch.load(weights_only=True) and
records, per tensor reached in the loaded object tree (dict keys / list and tuple indexes joined by
"."): dtype, shape, stride, storage_offset, a storage group (tensors whose storages share one data
pointer get the same group; empty storages get none) and the SHA-256 of the tensor's contiguous
little-endian bytes. For files torch refuses it records the error class, the message and the global
the message names.

torch 1.13's weights_only unpickler lacks the BINFLOAT opcode (Python floats), which torch >= 2.0
reads. For files refused only for that reason the script loads them again with torch 1.13's own
weights_only unpickler plus exactly that opcode (as torch 2.x implements it) and records the
tensors under "reference": "torch-1.13+binfloat"; the 1.13 refusal is kept in "torch_1_13".
Only derived values are written; no corpus bytes.
"""
import hashlib
import importlib.util
import inspect
import json
import os
import re
import sys
import types
import warnings

import torch
import torch._weights_only_unpickler as wou


def binfloat_unpickler():
    """torch 1.13's weights_only unpickler with BINFLOAT added as in torch >= 2.0."""
    src = inspect.getsource(wou)
    anchor = "            elif key[0] == BINPERSID[0]:\n"
    assert src.count(anchor) == 1, "unexpected torch._weights_only_unpickler source"
    src = src.replace(
        anchor,
        "            elif key[0] == 71:  # BINFLOAT, as torch >= 2.0 reads it\n"
        "                self.append(unpack('>d', read(8))[0])\n" + anchor,
    )
    mod = types.ModuleType("weights_only_unpickler_binfloat")
    exec(compile(src, "weights_only_unpickler_binfloat", "exec"), mod.__dict__)
    return mod


def contiguous_le_bytes(t):
    c = t.detach().contiguous().reshape(-1)
    if c.numel() == 0:
        return b""
    return c.view(torch.uint8).numpy().tobytes()


def walk(obj, path, out, groups):
    if isinstance(obj, torch.Tensor):
        st = obj.storage()
        group = None
        if st.nbytes() > 0:
            group = groups.setdefault(st.data_ptr(), len(groups))
        out.append(
            {
                "name": path,
                "dtype": str(obj.dtype).replace("torch.", ""),
                "shape": list(obj.shape),
                "stride": list(obj.stride()),
                "storage_offset": obj.storage_offset(),
                "storage_group": group,
                "parameter": isinstance(obj, torch.nn.Parameter),
                "sha256": hashlib.sha256(contiguous_le_bytes(obj)).hexdigest(),
            }
        )
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, f"{path}.{k}" if path else str(k), out, groups)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, f"{path}.{i}" if path else str(i), out, groups)


def refusal(e):
    msg = str(e)
    m = re.search(r"Unsupported class (\S+)", msg)
    op = re.search(r"Unsupported operand (\d+)", msg)
    return {
        "error_class": type(e).__name__,
        "message": msg.splitlines()[-1][-300:] if msg else "",
        "global": m.group(1) if m else None,
        "opcode": int(op.group(1)) if op else None,
    }


def main():
    corpus = sys.argv[1]
    root = os.path.join(corpus, "torch")
    patched = binfloat_unpickler()
    files = []
    for d, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if n.endswith(".txt"):
                continue
            p = os.path.join(d, n)
            rel = os.path.relpath(p, corpus)
            with open(p, "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            rec = {"path": rel, "sha256": sha}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    obj = torch.load(p, map_location="cpu", weights_only=True)
                    rec["torch_1_13"] = {"status": "loaded"}
                    rec["reference"] = "torch-1.13"
                except Exception as e:  # noqa: BLE001 - recorded, not handled
                    rec["torch_1_13"] = {"status": "refused", **refusal(e)}
                    obj = None
                    if rec["torch_1_13"]["opcode"] == 71:
                        obj = torch.load(
                            p, map_location="cpu", pickle_module=patched, weights_only=False
                        )
                        rec["reference"] = "torch-1.13+binfloat"
            if any("TorchScript" in str(w.message) for w in caught):
                rec["torchscript"] = True
            if obj is not None:
                if isinstance(obj, torch.jit.ScriptModule):
                    rec["torchscript"] = True
                    rec["tensors"] = []
                else:
                    tensors = []
                    walk(obj, "", tensors, {})
                    rec["tensors"] = tensors
            files.append(rec)
    json.dump(
        {
            "recorded_with": f"torch {torch.__version__}, python {sys.version.split()[0]}",
            "files": files,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
