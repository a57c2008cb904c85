#!/usr/bin/env python3
"""pylock: seed 000's lock service design in Python, speaking fencesim's
HTTP lock API (docs/lock-api.yaml).

Stateless HTTP instances over one shared Redis: every lock operation is one
Lua script, and the fencing token is a per-resource counter incremented in
the same atomic step as the SET NX PX that takes the lease. Run two or more
instances against one Redis that fsyncs every write (appendonly yes,
appendfsync always), or a Redis restart can hand out a token again.

    python3 pylock.py --listen 127.0.0.1:7070 --redis 127.0.0.1:6379

--no-fencing removes the fencing: grants carry no token ("0"), and renew and
release check the client alone -- the lock service many people run, which a
paused holder defeats (simrun live shows it: S3 on Kleppmann's pause).

Standard library plus redis-py (Debian: python3-redis). Exit codes: 0 after
SIGTERM/SIGINT, 2 bad arguments.
"""

import argparse
import json
import random
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis

NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TOKEN = re.compile(r"^[0-9]{1,20}$")
MAX_TOKEN = 2**64 - 1
MIN_TTL_MS, MAX_TTL_MS, MAX_WAIT_MS = 100, 300_000, 10_000
MAX_BODY = 4096
RELEASED_FOR_MS = 60_000

# {1, token, ttl_ms} granted (or the same request again: its token) |
# {0, holder, pttl} held. KEYS: lease, fence counter. ARGV: client,
# request id, ttl_ms, fencing ("1" or "0"). The counter is a decimal string
# incremented digit by digit (Lua numbers are doubles: 2^53 would round).
ACQUIRE = """
local v = redis.call('GET', KEYS[1])
if v then
  local c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
  if c == ARGV[1] and r == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, t, tonumber(ARGV[3])}
  end
  return {0, c or '', redis.call('PTTL', KEYS[1])}
end
local t = '0'
if ARGV[4] == '1' then
  local f = redis.call('GET', KEYS[2]) or '0'
  if not string.match(f, '^%d+$') then
    return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not a decimal string')
  end
  local i = #f
  t = nil
  while i > 0 do
    local d = string.byte(f, i) - 48
    if d < 9 then
      t = string.sub(f, 1, i - 1) .. string.char(d + 49) .. string.rep('0', #f - i)
      break
    end
    i = i - 1
  end
  if not t then t = '1' .. string.rep('0', #f) end
  if #t > 20 or (#t == 20 and t > '18446744073709551615') then
    return redis.error_reply('fence counter ' .. KEYS[2] .. ' exhausted (2^64-1 tokens issued)')
  end
  redis.call('SET', KEYS[2], t)
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t, 'NX', 'PX', ARGV[3])
return {1, t, tonumber(ARGV[3])}
"""

# 1 renewed | 0 not the holder. ARGV: client, token ('' = any), ttl_ms.
RENEW = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
if c ~= ARGV[1] or (ARGV[2] ~= '' and t ~= ARGV[2]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# 1 released | 0 not the holder. KEYS: lease, last release. ARGV: client,
# token ('' = any), request id ('' = none), ms to remember it. A retry of a
# release that took effect (same client, token, request id) answers 1.
RELEASE = """
local v = redis.call('GET', KEYS[1])
local c, r, t
if v then c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$') end
if not v or c ~= ARGV[1] or (ARGV[2] ~= '' and t ~= ARGV[2]) then
  if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) == ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] then
    return 1
  end
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[4])
end
return 1
"""

GET = """
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0'}
"""


class Invalid(Exception):
    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


class Service:
    def __init__(self, rdb, prefix, fencing):
        self.rdb = rdb
        self.prefix = prefix
        self.fencing = fencing
        self.acquire_script = rdb.register_script(ACQUIRE)
        self.renew_script = rdb.register_script(RENEW)
        self.release_script = rdb.register_script(RELEASE)
        self.get_script = rdb.register_script(GET)

    def keys(self, resource):
        k = "%s{%s}:" % (self.prefix, resource)
        return [k + "lock", k + "fence", k + "released"]

    def acquire(self, resource, client, ttl_ms, request_id, wait_ms):
        lock, fence, _ = self.keys(resource)
        deadline = time.monotonic() + wait_ms / 1000
        backoff = 0.001
        while True:
            ok, a, b = self.acquire_script(keys=[lock, fence], args=[client, request_id, ttl_ms, "1" if self.fencing else "0"])
            if ok == 1:
                return 200, {"token": a.decode(), "ttl_ms": int(b)}
            left = deadline - time.monotonic()
            if left <= 0:
                return 409, {"error": "held", "message": "resource is held by another lease",
                             "holder": a.decode(), "retry_after_ms": max(int(b), 0)}
            # No queue in Redis: ask again after a jittered backoff, the
            # same request id each time (a grant is never doubled).
            time.sleep(min(backoff * (0.5 + random.random()), left))
            backoff = min(backoff * 2, 0.032)

    def renew(self, resource, client, token, ttl_ms):
        lock, _, _ = self.keys(resource)
        if self.renew_script(keys=[lock], args=[client, self.token_arg(token), ttl_ms]) != 1:
            return not_holder()
        return 200, {"token": str(token), "ttl_ms": ttl_ms}

    def release(self, resource, client, token, request_id):
        lock, _, released = self.keys(resource)
        if self.release_script(keys=[lock, released], args=[client, self.token_arg(token), request_id, RELEASED_FOR_MS]) != 1:
            return not_holder()
        return 200, {"released": True}

    def get(self, resource):
        lock, fence, _ = self.keys(resource)
        v, pttl, last = self.get_script(keys=[lock, fence])
        out = {"resource": resource, "held": False, "last_token": last.decode()}
        m = re.match(r"^(\S+) (\S+) (\d+)$", v.decode())
        if m and pttl > 0:
            out.update(held=True, holder=m.group(1), token=m.group(3), ttl_ms=int(pttl))
        return 200, out

    def token_arg(self, token):
        return str(token) if self.fencing else ""


def not_holder():
    return 409, {"error": "not_holder",
                 "message": "client does not hold this resource with this token (expired, released or taken over)"}


def unavailable(msg):
    return 503, {"error": "unavailable", "message": "backend unavailable: " + msg, "retry_after_ms": 50}


def field(body, name, kind, required=True):
    if name not in body:
        if required:
            raise Invalid(name, "%s: is required" % name)
        return None
    v = body[name]
    if kind == "name" and not (isinstance(v, str) and NAME.match(v)):
        raise Invalid(name, "%s: must be 1..128 characters of [A-Za-z0-9._-]" % name)
    if kind == "request_id" and not (isinstance(v, str) and REQUEST_ID.match(v)):
        raise Invalid(name, "%s: must be 1..64 characters of [A-Za-z0-9._-]" % name)
    if kind == "int" and (not isinstance(v, int) or isinstance(v, bool)):
        raise Invalid(name, "%s: must be a JSON integer" % name)
    if kind == "token":
        # A decimal string: a JSON number would be rounded above 2^53 by a
        # JavaScript client, so numbers are refused.
        if not (isinstance(v, str) and TOKEN.match(v)) or int(v) > MAX_TOKEN:
            raise Invalid(name, '%s: must be a decimal string such as "42" (a uint64)' % name)
        v = int(v)
    return v


def ttl(body):
    v = field(body, "ttl_ms", "int")
    if not MIN_TTL_MS <= v <= MAX_TTL_MS:
        raise Invalid("ttl_ms", "ttl_ms: must be between %d and %d (milliseconds), got %d" % (MIN_TTL_MS, MAX_TTL_MS, v))
    return v


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    service = None  # set by main
    draining = threading.Event()

    def log_message(self, fmt, *args):  # quiet: one line per error only
        pass

    def reply(self, status, body):
        b = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        if status in (429, 503):
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(b)

    def route(self):
        parts = self.path.split("?", 1)[0].split("/")
        if len(parts) >= 4 and parts[1] == "v1" and parts[2] == "locks":
            if not NAME.match(parts[3]):
                raise Invalid("resource", "resource: must be 1..128 characters of [A-Za-z0-9._-]")
            return parts[3], parts[4] if len(parts) == 5 else None, len(parts) <= 5
        return None, None, False

    def do_GET(self):
        if self.path == "/healthz":
            return self.reply(200, {"status": "ok"})
        if self.path == "/readyz":
            if self.draining.is_set():
                return self.reply(503, {"error": "draining", "message": "draining"})
            try:
                self.service.rdb.ping()
            except redis.RedisError as e:
                return self.reply(503, {"error": "unavailable", "message": "redis: %s" % e})
            return self.reply(200, {"status": "ready"})
        try:
            resource, op, ok = self.route()
            if not ok or op is not None:
                return self.reply(404, {"error": "not_found", "message": "no such route"})
            self.reply(*self.service.get(resource))
        except Invalid as e:
            self.reply(400, {"error": "invalid", "field": e.field, "message": str(e)})
        except redis.RedisError as e:
            self.reply(*unavailable(str(e)))

    def do_POST(self):
        try:
            resource, op, ok = self.route()
            if not ok or op not in ("acquire", "renew", "release"):
                return self.reply(404, {"error": "not_found", "message": "no such route"})
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                self.close_connection = True
                return self.reply(413, {"error": "too_large", "message": "body exceeds %d bytes" % MAX_BODY})
            try:
                body = json.loads(self.rfile.read(n) or b"null")
            except ValueError as e:
                raise Invalid("body", "body: malformed JSON: %s" % e)
            if not isinstance(body, dict):
                raise Invalid("body", "body: must be one JSON object")
            known = {"acquire": {"client", "ttl_ms", "request_id", "wait_ms"},
                     "renew": {"client", "token", "ttl_ms"},
                     "release": {"client", "token", "request_id"}}[op]
            for k in sorted(body):
                if k not in known:
                    raise Invalid(k, "%s: unknown field" % k)
            if self.draining.is_set():
                return self.reply(503, {"error": "draining", "message": "instance is draining; retry on another", "retry_after_ms": 50})
            client = field(body, "client", "name")
            svc = self.service
            if op == "acquire":
                request_id = field(body, "request_id", "request_id")
                t = ttl(body)
                wait = field(body, "wait_ms", "int", required=False) or 0
                if not 0 <= wait <= MAX_WAIT_MS:
                    raise Invalid("wait_ms", "wait_ms: must be between 0 and %d (milliseconds), got %d" % (MAX_WAIT_MS, wait))
                return self.reply(*svc.acquire(resource, client, t, request_id, wait))
            token = field(body, "token", "token", required=svc.fencing)
            if svc.fencing and token == 0:
                raise Invalid("token", "token: is required (a decimal string, never 0)")
            if op == "renew":
                return self.reply(*svc.renew(resource, client, token, ttl(body)))
            request_id = field(body, "request_id", "request_id", required=False) or ""
            return self.reply(*svc.release(resource, client, token or 0, request_id))
        except Invalid as e:
            self.reply(400, {"error": "invalid", "field": e.field, "message": str(e)})
        except redis.RedisError as e:
            # Fail closed: no grant without Redis's answer.
            self.reply(*unavailable(str(e)))


def hostport(s):
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("%r is not host:port" % s)
    return host, int(port)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", type=hostport, default=("127.0.0.1", 7070), help="host:port to serve the lock API on")
    p.add_argument("--redis", type=hostport, default=("127.0.0.1", 6379), help="host:port of the shared Redis")
    p.add_argument("--prefix", default="pylock:", help="prefix of every Redis key")
    p.add_argument("--no-fencing", action="store_true", help="issue no fencing tokens (the unsafe lock service)")
    a = p.parse_args()
    rdb = redis.Redis(host=a.redis[0], port=a.redis[1], socket_timeout=2, socket_connect_timeout=1,
                      health_check_interval=0)
    Handler.service = Service(rdb, a.prefix, not a.no_fencing)
    srv = ThreadingHTTPServer(a.listen, Handler)
    srv.daemon_threads = True

    def stop(*_):
        Handler.draining.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("pylock: serving the lock API on http://%s:%d over redis %s:%d%s" % (
        a.listen + a.redis + (" WITHOUT FENCING" if a.no_fencing else "",)), file=sys.stderr, flush=True)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
