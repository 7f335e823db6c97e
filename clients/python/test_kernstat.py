"""The Python client against a live daemon (KERNSTAT_TEST_SOCKET names its socket):
run by crates/kernstat/tests/python_client.rs with `python3 -m unittest`."""

import os
import threading
import time
import unittest

import kernstat

SOCK = os.environ["KERNSTAT_TEST_SOCKET"]
SNAP = os.path.join(os.path.dirname(SOCK), "snapshot")


def osrelease():
    with open("/proc/sys/kernel/osrelease") as f:
        return f.read().strip()


def until(what, fn, timeout=10.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = fn()
        if v is not None:
            return v
        time.sleep(0.02)
    raise AssertionError("never: " + what)


class SessionTest(unittest.TestCase):
    def test_get_many_put_errors(self):
        with kernstat.Session(SOCK) as s:
            self.assertEqual(s.get("uname.release"), osrelease())
            replies = s.get_many(["uname.release", "no.such", "mem.total"])
            self.assertEqual([r["ok"] for r in replies], [True, False, True])
            self.assertEqual(replies[1]["code"], "unknown_key")
            with open("/proc/meminfo") as f:
                total = int(f.readline().split()[1]) * 1024
            self.assertEqual(replies[2]["data"], total)
            with self.assertRaises(kernstat.Error) as e:
                s.get("no.such")
            self.assertEqual(e.exception.code, "unknown_key")
            s.put("var.py", {"from": "python"}, ttl_s=60)
            self.assertEqual(s.get("var.py"), {"from": "python"})
            with self.assertRaises(kernstat.Error) as e:
                s.put("load.one", 1)
            self.assertEqual(e.exception.code, "bad_request")
            self.assertIn("requests", s.op("status"))

    def test_watch_sees_a_put(self):
        got = []
        started = threading.Event()

        def watcher():
            with kernstat.Session(SOCK, timeout=10) as w:
                stream = w.watch("var.watched")
                started.set()
                got.append(next(stream))

        t = threading.Thread(target=watcher)
        t.start()
        started.wait(5)
        time.sleep(0.2)
        with kernstat.Session(SOCK) as s:
            s.put("var.watched", 7)
        t.join(10)
        self.assertEqual(got, [7])


class SnapshotTest(unittest.TestCase):
    def test_values_from_memory(self):
        snap = kernstat.Snapshot(SNAP)
        self.assertEqual(snap.get("uname.release"), osrelease())
        self.assertGreaterEqual(snap.age_ms("uname.release"), 0)
        self.assertIsNone(snap.get("no.such"))
        with kernstat.Session(SOCK) as s:
            s.put("var.shm", "from the socket")
        self.assertEqual(until("var.shm in memory", lambda: snap.get("var.shm")), "from the socket")
        # A longer value makes the daemon write a new file: the reader follows.
        long = "x" * 5000
        with kernstat.Session(SOCK) as s:
            s.put("var.shm", long)
        self.assertEqual(until("the long value", lambda: snap.get("var.shm") if snap.get("var.shm") == long else None), long)

    def test_module_get(self):
        self.assertEqual(kernstat.get("uname.release", socket_path=SOCK), osrelease())


if __name__ == "__main__":
    unittest.main()
