"""A client of the Tensorcast data plane's put API (standard library only).

The put API is HTTP/1.1 over a unix domain socket that the data plane of the node creates in its
writes directory (``<store root>/.writes/write.sock``; a writer pod mounts that directory). Every
request carries the write token. Bytes are little-endian, row-major (what ``numpy`` and
``torch`` hold in memory); pass anything that supports the buffer protocol: ``bytes``,
``bytearray``, ``memoryview``, a contiguous ``numpy`` array, or for a ``torch`` tensor
``t.contiguous().view(torch.uint8).numpy()``.

    w = Writer("/run/tensorcast/write.sock", token)
    w.create("step-000120", kind="RLCheckpoint", metadata={"step": "120"})
    w.put_batch("step-000120", [
        dict(name="q", dtype="BF16", shape=[8192, 8192], data=q, writer_partition="tp:1/4@0"),
        dict(name="norm", dtype="BF16", shape=[8192], data=norm),
    ])
    w.seal("step-000120")

Large tensors can go zero-copy: ``put_zero_copy`` asks the data plane to allocate the batch in its
page-locked store and copies the bytes into that file (through the shared writes directory) with
``mmap``, instead of streaming them through the socket.
"""

import hashlib
import http.client
import json
import mmap
import os
import socket
import struct
import urllib.parse

__all__ = ["Writer", "WriteError"]


class WriteError(Exception):
    """The data plane refused a request: ``status`` (HTTP), ``reason`` (CamelCase), message."""

    def __init__(self, status, reason, message):
        super().__init__("HTTP %d %s: %s" % (status, reason, message))
        self.status = status
        self.reason = reason


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=600):
        super().__init__("tensorcast", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _nbytes(data):
    return memoryview(data).nbytes


def _chunks(data, size=1 << 20):
    view = memoryview(data).cast("B")
    for i in range(0, len(view), size):
        yield view[i:i + size]


class Writer:
    """Puts tensors into named versions on the node's data plane, seals and saves them."""

    def __init__(self, socket_path, token, pace=None):
        self._path = socket_path
        self._token = token
        self._pace = pace  # seconds to wait between body chunks (tests)
        self._conn = None

    def _connection(self):
        if self._conn is None:
            self._conn = _UnixConnection(self._path)
        return self._conn

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _request(self, method, path, length=0, body_parts=()):
        conn = self._connection()
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            conn.putheader("Authorization", "Bearer " + self._token)
            conn.putheader("Content-Length", str(length))
            if length:
                conn.putheader("Content-Type", "application/octet-stream")
            conn.endheaders()
            for part in body_parts:
                for chunk in _chunks(part):
                    conn.send(chunk)
                    if self._pace:
                        import time
                        time.sleep(self._pace)
            resp = conn.getresponse()
            raw = resp.read()
        except (ConnectionError, http.client.HTTPException):
            self.close()
            raise
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        body = json.loads(raw) if raw else {}
        if resp.status >= 300:
            raise WriteError(resp.status, body.get("reason", "Error"), body.get("error", raw.decode()))
        return body

    def _json(self, method, path, obj=None):
        raw = b"" if obj is None else json.dumps(obj).encode()
        return self._request(method, path, len(raw), [raw] if raw else [])

    def create(self, name, kind=None, metadata=None):
        """Creates version ``name`` (a DNS label); a repeat with the same kind and metadata is a no-op."""
        req = {"name": name}
        if kind:
            req["kind"] = kind
        if metadata:
            req["metadata"] = metadata
        return self._json("POST", "/v1/writes", req)

    def put(self, version, name, dtype, shape, data, parallelism=None, writer_partition=None,
            upsert=False):
        """Puts one tensor (upsert=True replaces a name already written)."""
        q = {"dtype": dtype, "shape": ",".join(str(d) for d in shape)}
        if parallelism:
            q["parallelism"] = parallelism
        if writer_partition:
            q["writer_partition"] = writer_partition
        path = "/v1/writes/%s/tensors/%s?%s" % (
            version, urllib.parse.quote(name, safe=""), urllib.parse.urlencode(q))
        return self._request("PUT" if upsert else "POST", path, _nbytes(data), [data])

    def put_batch(self, version, tensors, upsert=False):
        """Puts a batch: dicts of name, dtype, shape, data and parallelism or writer_partition."""
        header = json.dumps({"tensors": [_declaration(t) for t in tensors]}).encode()
        parts = [struct.pack("<I", len(header)), header] + [t["data"] for t in tensors]
        length = sum(_nbytes(p) for p in parts)
        return self._request("PUT" if upsert else "POST", "/v1/writes/%s/batches" % version,
                             length, parts)

    def put_zero_copy(self, version, tensors, writes_dir, upsert=False):
        """Reserves the batch in the page-locked store, copies each tensor's stored bytes into the
        reserved file with mmap, and commits with every tensor's SHA-256. ``writes_dir`` is the
        data plane's writes directory as this process sees it. A tensor with a writer_partition
        must be given as its shard here."""
        decl = {"upsert": upsert, "tensors": [_declaration(t) for t in tensors]}
        r = self._json("POST", "/v1/writes/%s/reservations" % version, decl)
        sums = {}
        with open(os.path.join(writes_dir, r["file"]), "r+b") as f:
            with mmap.mmap(f.fileno(), r["size"]) as m:
                for slot, t in zip(r["tensors"], tensors):
                    view = memoryview(t["data"]).cast("B")
                    if len(view) != slot["length"]:
                        raise ValueError("tensor %s: %d bytes for a slot of %d"
                                         % (t["name"], len(view), slot["length"]))
                    m[slot["offset"]:slot["offset"] + slot["length"]] = view
                    sums[t["name"]] = hashlib.sha256(view).hexdigest()
        return self._json("POST", "/v1/writes/%s/reservations/%d/commit" % (version, r["id"]),
                          {"sha256": sums})

    def seal(self, version):
        """Seals the version: immutable from now on; returns its seal record."""
        return self._json("POST", "/v1/writes/%s/seal" % version)

    def save(self, version, uri, **target):
        """Starts saving a sealed version (s3://, oss://, hf://, file://); credentials are the data
        plane's. Options: endpoint, region, pathStyle, insecureEndpoint, revision, partSize."""
        req = {"uri": uri}
        req.update(target)
        return self._json("POST", "/v1/writes/%s/save" % version, req)

    def get(self, version):
        return self._json("GET", "/v1/writes/%s" % version)

    def drop(self, version):
        return self._json("DELETE", "/v1/writes/%s" % version)


def _declaration(t):
    d = {"name": t["name"], "dtype": t["dtype"], "shape": list(t["shape"])}
    if t.get("parallelism"):
        d["parallelism"] = t["parallelism"]
    if t.get("writer_partition"):
        d["writer_partition"] = t["writer_partition"]
    return d
