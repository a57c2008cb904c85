#!/usr/bin/env python3
"""A simrun live client in Python: the JSON-lines protocol of
docs/live-targets.md on stdin/stdout, over pylock's HTTP lock API.

simrun live starts one per workload client with -client NAME -endpoints
URL,... -store URL -op-timeout D (and -opt k=v); each stdin line is a
command, each stdout line the reply with its id. Standard library only.
"""

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

out_lock = threading.Lock()


def duration(s):
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for u in ("ms", "s", "m"):
        if s.endswith(u) and s[: -len(u)].replace(".", "", 1).isdigit():
            return float(s[: -len(u)]) * units[u]
    raise argparse.ArgumentTypeError("%r is not a duration such as 5s" % s)


def http(method, url, body=None, headers=None, timeout=2.0):
    """(status, parsed JSON or text) or raises OSError when nothing came back."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


class Client:
    def __init__(self, a):
        self.name = a.client
        self.endpoints = a.endpoints.split(",")
        self.store = a.store.rstrip("/")
        self.timeout = a.op_timeout
        self.prefix = "%s-%s-" % (a.client, uuid.uuid4().hex[:8])
        self.seq = 0
        self.seq_lock = threading.Lock()

    def lock_op(self, resource, op, body):
        """One operation, tried across the endpoints while they answer
        503, 429 or nothing (the same request id each time)."""
        deadline = time.monotonic() + self.timeout
        last = "no endpoint answered"
        while time.monotonic() < deadline:
            for ep in self.endpoints:
                try:
                    status, b = http("POST", "%s/v1/locks/%s/%s" % (ep, resource, op), json.dumps(body),
                                     {"Content-Type": "application/json"},
                                     timeout=min(2.0, max(deadline - time.monotonic(), 0.05)))
                except OSError as e:
                    last = str(e)
                    continue
                if status == 200:
                    return {"ok": True, "token": int(b.get("token", "0"))} if op == "acquire" else {"ok": True}
                if status == 409 and isinstance(b, dict) and b.get("error") == "held":
                    return {"ok": False, "error": "busy", "message": b.get("message", "")}
                if status == 409 and isinstance(b, dict) and b.get("error") == "not_holder":
                    return {"ok": False, "error": "not_holder", "message": b.get("message", "")}
                last = "%s: %s %s" % (ep, status, b)
                if status not in (307, 429, 503):
                    return {"ok": False, "error": "unknown", "message": last}
            time.sleep(0.05)
        return {"ok": False, "error": "unknown", "message": "no definitive answer: " + last}

    def do(self, c):
        op = c.get("op")
        if op == "acquire":
            with self.seq_lock:
                self.seq += 1
                rid = self.prefix + str(self.seq)
            return self.lock_op(c["resource"], "acquire", {"client": self.name, "ttl_ms": c["ttl_ms"], "request_id": rid})
        if op == "renew":
            return self.lock_op(c["resource"], "renew", {"client": self.name, "token": str(c.get("token", 0)), "ttl_ms": c["ttl_ms"]})
        if op == "release":
            return self.lock_op(c["resource"], "release", {"client": self.name, "token": str(c.get("token", 0))})
        if op == "write":
            time.sleep(c.get("work_ms", 0) / 1000)  # the work window a pause can hit
            try:
                status, b = http("PUT", "%s/v1/objects/%s" % (self.store, c["key"]), str(c["value"]),
                                 {"Fencing-Token": str(c.get("token", 0))}, timeout=self.timeout)
            except OSError as e:
                return {"ok": False, "error": "unknown", "message": str(e)}
            if status == 200:
                return {"ok": True}
            if status == 409:
                return {"ok": False, "error": "stale", "message": str(b)}
            return {"ok": False, "error": "unknown", "message": "store: %s %s" % (status, b)}
        if op == "read":
            try:
                status, b = http("GET", "%s/v1/objects/%s" % (self.store, c["key"]), timeout=self.timeout)
            except OSError as e:
                return {"ok": False, "error": "unknown", "message": str(e)}
            if status == 200:
                return {"ok": True, "value": int(b["value"]), "token": int(b["token"])}
            if status == 404:
                return {"ok": True}
            return {"ok": False, "error": "unknown", "message": "store: %s %s" % (status, b)}
        return {"ok": False, "error": "invalid", "message": "unknown op %r" % op}


def serve(client, c):
    try:
        r = client.do(c)
    except Exception as e:  # any failure is an unknown outcome
        r = {"ok": False, "error": "unknown", "message": repr(e)}
    r["id"] = c.get("id")
    line = json.dumps(r)
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-client", required=True)
    p.add_argument("-endpoints", required=True)
    p.add_argument("-store", required=True)
    p.add_argument("-op-timeout", dest="op_timeout", type=duration, default=10.0)
    p.add_argument("-opt", action="append", default=[])
    client = Client(p.parse_args())
    threads = []
    for line in sys.stdin:  # EOF: the run is over
        try:
            c = json.loads(line)
        except ValueError:
            print("client.py: bad command %r" % line, file=sys.stderr)
            continue
        t = threading.Thread(target=serve, args=(client, c), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(client.timeout + 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
