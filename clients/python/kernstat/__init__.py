"""A client for the kernstat daemon, with nothing but the standard library.

- ``Session``: one connection to the daemon's Unix socket (newline-delimited JSON,
  docs/protocol.md), kept open for many requests; ``get``, ``get_many`` (pipelined),
  ``watch``, ``put``, ``op``.
- ``Snapshot``: the daemon's shared-memory snapshot beside its socket, read without a
  connection (docs/protocol.md "Shared memory": a seqlock per entry; a value is copied
  between two reads of its sequence counter and read again if it moved).
- ``get``: one value, from the snapshot when it has it, else from the socket.

    >>> import kernstat
    >>> kernstat.get("load.one")
    0.42
"""

import json
import mmap
import os
import socket
import struct
import time

__all__ = ["Session", "Snapshot", "Error", "default_socket", "get"]

MAGIC = b"KSSNAP\0\x01"
VERSION = 2
_HEADER = 64
_SLOT = 64


class Error(Exception):
    """The daemon refused a request: ``code`` is its error code (no_data, unknown_key,
    bad_request, too_long, refused, failed, full)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def default_socket():
    """The user daemon's socket if it exists, else the system daemon's."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if os.geteuid() == 0 and not run:
        user = "/run/kernstat/sock"
    elif run:
        user = os.path.join(run, "kernstat", "sock")
    else:
        user = "/tmp/kernstat-%d/sock" % os.geteuid()
    return user if os.path.exists(user) else "/run/kernstat/sock"


class Session:
    """One connection to the daemon, for many requests."""

    def __init__(self, path=None, timeout=5.0):
        self.path = path or default_socket()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(self.path)
        self.file = self.sock.makefile("rb")

    def close(self):
        self.file.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, requests):
        data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in requests)
        self.sock.sendall(data)

    def _reply(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("the daemon closed the connection")
        return json.loads(line)

    @staticmethod
    def _request(op, key, path=None, env=None):
        r = {"op": op, "key": key}
        if path is not None:
            r["path"] = path
        if env is not None:
            r["env"] = env
        return r

    def reply(self, key, path=None, env=None):
        """The daemon's whole reply for ``key`` (a dict with ok, data, age_ms...)."""
        self._send([self._request("get", key, path, env)])
        return self._reply()

    def get(self, key, path=None, env=None):
        """The value of ``key``; raises Error when there is none."""
        r = self.reply(key, path, env)
        if not r.get("ok"):
            raise Error(r.get("code"), r.get("error"))
        return r.get("data")

    def get_many(self, keys, path=None, env=None):
        """The replies for several keys, pipelined in one write."""
        self._send([self._request("get", k, path, env) for k in keys])
        return [self._reply() for _ in keys]

    def put(self, key, value, ttl_s=None):
        """Sets ``var.NAME`` for other clients."""
        r = {"op": "put", "key": key, "data": value}
        if ttl_s is not None:
            r["ttl_s"] = ttl_s
        self._send([r])
        reply = self._reply()
        if not reply.get("ok"):
            raise Error(reply.get("code"), reply.get("error"))

    def op(self, name):
        """``status``, ``list``, ``hello`` or ``refresh``: its data."""
        self._send([{"op": name}])
        return self._reply().get("data")

    def watch(self, key, path=None, env=None):
        """Every new value of ``key``, as it comes (the connection is the stream's)."""
        self._send([self._request("watch", key, path, env)])
        while True:
            r = self._reply()
            if not r.get("ok"):
                raise Error(r.get("code"), r.get("error"))
            yield r.get("data")


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rindex(b")") + 2:].split(b" ")
    return int(rest[19])


class Snapshot:
    """The daemon's shared-memory snapshot (``snapshot`` beside its socket), layout
    version 2 (docs/protocol.md): read only when it is this user's or root's, looked up
    inside the layout seqlock, mapped again when it grows, opened again when closed."""

    def __init__(self, path=None):
        self.path = path or os.path.join(os.path.dirname(default_socket()), "snapshot")
        self._open()

    def _open(self):
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if st.st_uid not in (os.geteuid(), 0):
                raise ValueError("%s belongs to uid %d, neither you nor root" % (self.path, st.st_uid))
            self.map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        if self.map[:8] != MAGIC or struct.unpack_from("=I", self.map, 8)[0] != VERSION:
            raise ValueError("%s is not a kernstat snapshot of version %d" % (self.path, VERSION))
        pid, self.interval_ms = struct.unpack_from("=II", self.map, 24)
        start = struct.unpack_from("=Q", self.map, 32)[0]
        if _start_time(pid) != start:
            raise ValueError("the daemon of %s (pid %d) is gone" % (self.path, pid))

    def _key(self, i):
        off, length = struct.unpack_from("=II", self.map, _HEADER + i * _SLOT + 8)
        return self.map[off:off + length]

    def raw(self, key, scope=None):
        """(JSON bytes, error flag, CLOCK_MONOTONIC ns when computed) of a stored key, or
        None; ``scope`` is a git path or a context's scope."""
        want = key.encode() if scope is None else key.encode() + b"\0" + scope.encode()
        for _ in range(10000):
            if struct.unpack_from("=Q", self.map, 16)[0] != 0:
                self._open()  # the daemon stopped; a new one may have made the file
            layout = struct.unpack_from("=Q", self.map, 56)[0]
            if layout & 1:
                continue
            length, = struct.unpack_from("=Q", self.map, 48)
            if length > len(self.map):
                self._open()  # it grew past this mapping
                continue
            count = struct.unpack_from("=I", self.map, 12)[0]
            found = None
            if _HEADER + count * _SLOT <= length:
                lo, hi = 0, count
                while lo < hi:
                    mid = (lo + hi) // 2
                    k = self._key(mid)
                    if k < want:
                        lo = mid + 1
                    elif k > want:
                        hi = mid
                    else:
                        found = self._read(mid)
                        break
            if struct.unpack_from("=Q", self.map, 56)[0] == layout:
                return found
        return None

    def _read(self, i):
        base = _HEADER + i * _SLOT
        for _ in range(1000):
            seq = struct.unpack_from("=Q", self.map, base)[0]
            if seq & 1:
                continue
            val_off, cap, length, flags = struct.unpack_from("=IIII", self.map, base + 16)
            updated = struct.unpack_from("=Q", self.map, base + 32)[0]
            value = self.map[val_off:val_off + min(length, cap)]
            if struct.unpack_from("=Q", self.map, base)[0] == seq:
                return value, flags == 1, updated
        return None

    def get(self, key, scope=None):
        """The value of a stored key (decoded JSON), or None when the snapshot lacks it;
        raises Error for a provider's failure or a key without a value."""
        got = self.raw(key, scope)
        if got is None:
            return None
        value, error, _ = got
        if error:
            raise Error("failed", value.decode(errors="replace"))
        data = json.loads(value)
        if data is None:
            raise Error("no_data", "no data for %s" % key)
        return data

    def age_ms(self, key, scope=None):
        """How old a stored value is."""
        got = self.raw(key, scope)
        if got is None:
            return None
        return (time.clock_gettime_ns(time.CLOCK_MONOTONIC) - got[2]) // 1_000_000


def get(key, path=None, socket_path=None):
    """One value: from the snapshot when it has it, else from the daemon."""
    sock = socket_path or default_socket()
    try:
        snap = Snapshot(os.path.join(os.path.dirname(sock), "snapshot"))
        value = snap.get(key, path)
        if value is not None:
            return value
    except (OSError, ValueError):
        pass
    with Session(sock) as s:
        return s.get(key, path)
