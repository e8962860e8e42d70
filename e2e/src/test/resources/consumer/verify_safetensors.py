#!/usr/bin/env python3
"""A consumer pod's process in the end-to-end tests: reads a model directory the way an inference
server loads a local model (every *.safetensors file, each tensor by its header's offsets, through
mmap) and checks every tensor's bytes against the same tensor of the source directory.

usage: verify_safetensors.py MODEL_DIR SOURCE_DIR [RECHECK_SECONDS]

Prints "verified N tensors in M files from MODEL_DIR", then keeps running (as a server would) and
verifies again every RECHECK_SECONDS (default 2); exits 1 at the first difference or missing file,
0 on SIGTERM.
"""
import json
import mmap
import os
import signal
import struct
import sys
import time


def tensors(path):
    """name -> (dtype, shape, bytes) of a safetensors file, read through mmap."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise ValueError(f"{path}: {size} bytes, shorter than the 8-byte header length")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            (n,) = struct.unpack("<Q", m[:8])
            header = json.loads(m[8 : 8 + n])
            out = {}
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                out[name] = (info["dtype"], info["shape"], bytes(m[8 + n + begin : 8 + n + end]))
            return out


def safetensors_files(root):
    found = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".safetensors"):
                found.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(found)


def verify(model, source):
    expected = safetensors_files(source)
    present = safetensors_files(model)
    if present != expected:
        raise ValueError(f"safetensors files in {model}: {present}, expected {expected}")
    count = 0
    for rel in expected:
        got = tensors(os.path.join(model, rel))
        want = tensors(os.path.join(source, rel))
        if sorted(got) != sorted(want):
            raise ValueError(f"{rel}: tensors {sorted(got)} differ from the source's {sorted(want)}")
        for name, t in want.items():
            if got[name] != t:
                raise ValueError(f"{rel}: tensor {name} differs from the source")
            count += 1
    return count, len(expected)


def main():
    model, source = sys.argv[1], sys.argv[2]
    recheck = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        n, files = verify(model, source)
    except Exception as e:  # noqa: BLE001 - any failure is the test's answer
        print(f"FAILED: {e}", flush=True)
        return 1
    print(f"verified {n} tensors in {files} files from {model}", flush=True)
    rounds = 0
    while True:
        time.sleep(recheck)
        try:
            verify(model, source)
        except Exception as e:  # noqa: BLE001
            print(f"FAILED on recheck {rounds + 1}: {e}", flush=True)
            return 1
        rounds += 1
        if rounds % 5 == 0:
            print(f"still verified after {rounds} rechecks", flush=True)


if __name__ == "__main__":
    sys.exit(main())
