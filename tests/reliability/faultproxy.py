"""A fault-injecting loopback proxy in front of a real kube-apiserver.

Clients (the hook, kubectl) speak plain HTTP to ``127.0.0.1:<port>`` with a kubeconfig that
has no credentials (:meth:`FaultProxy.write_kubeconfig`); the proxy forwards every request
over HTTPS to the real apiserver with the admin client certificate read from the admin
kubeconfig.  Responses are relayed faithfully: bodies with a Content-Length as such,
streamed ones (watches, chunked lists) chunk by chunk, watch events one by one (JSON lines,
or the length-prefixed frames of a protobuf stream, which client-go asks for built-in kinds),
as soon as the apiserver sends them.

Faults are rules, evaluated in order for every request; the first that matches and wins
its coin toss (``probability``, drawn from a seeded ``random.Random``) is injected:

=============  ===========================================================================
``429``        429 Too Many Requests with ``Retry-After`` (``retry_after`` s) and a Status
``500``        500 Internal Server Error (Status body)
``503``        503 Service Unavailable with ``Retry-After`` (Status body)
``reset``      the request is NOT forwarded; partial response headers, then a TCP reset
``reset-after``  forwarded (it takes effect!), then a partial body and a TCP reset: the
               client cannot know whether its write happened
``latency``    ``delay`` seconds, then forwarded normally
``watch-end``  (watch only) forwarded, but the stream ends cleanly after ``events``
               events or ``after`` seconds, whichever first
``watch-410``  (watch only) forwarded; after ``events`` events an ERROR event with a 410
               Status ("too old resource version") and the stream ends
``http-410``   (watch only) 410 Gone as the HTTP response
``watch-delay``  (watch only) forwarded; each event relayed ``delay`` seconds after it
               arrived (in order): a client whose view of that resource runs behind
=============  ===========================================================================

Besides the rules, :meth:`FaultProxy.hold` stops the events of every watch of a resource
(``rayclusters``, ``pods``) where they are, and :meth:`FaultProxy.release` lets them go on, in
order: a client (the operator) whose view of one resource is frozen while another moves, the
order of deliveries a test needs to force a race every time (tests/e2e/test_removed_group_race.py).

Rules are changed at runtime (:meth:`set_rules`, :meth:`add_rule`, :meth:`clear`) and are
thread-safe.  :attr:`stats` counts requests by ``verb resource`` and faults by kind.

Used by tests/reliability (phase 2 and 3) and tests/bench/bench_reliability.py.
"""

from __future__ import annotations

import base64
import collections
import http.client
import json
import queue
import random
import socket
import socketserver
import ssl
import struct
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Iterable

import yaml

FAULT_KINDS = ("429", "500", "503", "reset", "reset-after", "latency", "watch-end", "watch-410", "http-410",
               "watch-delay")
WATCH_ONLY = frozenset({"watch-end", "watch-410", "http-410", "watch-delay"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"})


@dataclass
class Rule:
    """Inject ``kind`` into requests matching ``verbs`` / ``resources`` (empty: any), with
    ``probability``, at most ``limit`` times (None: unlimited)."""

    kind: str
    probability: float = 1.0
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    limit: int | None = None
    retry_after: int = 1
    delay: float = 0.5
    events: int = 1
    after: float = 2.0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r} (known: {', '.join(FAULT_KINDS)})")
        self.verbs = frozenset(self.verbs)
        self.resources = frozenset(self.resources)

    def matches(self, verb: str, resource: str) -> bool:
        if self.limit is not None and self.fired >= self.limit:
            return False
        if self.kind in WATCH_ONLY and verb != "watch":
            return False
        if self.verbs and verb not in self.verbs:
            return False
        return not self.resources or resource in self.resources


@dataclass
class Stats:
    requests: collections.Counter = field(default_factory=collections.Counter)  # "verb resource"
    faults: collections.Counter = field(default_factory=collections.Counter)  # kind
    watch_events: int = 0

    def snapshot(self) -> dict[str, Any]:
        return {"requests": dict(self.requests), "faults": dict(self.faults), "watch_events": self.watch_events}


def classify(method: str, path: str) -> tuple[str, str, dict[str, list[str]]]:
    """(verb, resource, query) of a Kubernetes API request, as RBAC names them."""
    parsed = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parsed.query)
    parts = [p for p in parsed.path.split("/") if p]
    resource, has_name = "", False
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return method.lower(), parsed.path, query
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    if rest:
        resource = rest[0]
        has_name = len(rest) >= 2
        if len(rest) >= 3:
            resource = f"{rest[0]}/{rest[2]}"
    watch = query.get("watch", ["false"])[0] in ("1", "true")
    verb = {"GET": "get" if has_name else ("watch" if watch else "list"), "POST": "create", "PUT": "update",
            "PATCH": "patch", "DELETE": "delete" if has_name else "deletecollection"}.get(method, method.lower())
    if watch:
        verb = "watch"
    return verb, resource, query


def status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


GONE_MESSAGE = "too old resource version: injected by faultproxy"
GONE_EVENT = json.dumps({"type": "ERROR", "object": {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": GONE_MESSAGE, "reason": "Expired", "code": 410}}).encode() + b"\n"


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def gone_frame() -> bytes:
    """GONE_EVENT in a protobuf watch stream (``application/vnd.kubernetes.protobuf;stream=watch``,
    what client-go asks for built-in kinds): a 4-byte length, then a raw ``metav1.WatchEvent``
    {type "ERROR", object: the Status as the protobuf serializer writes an object: ``k8s\\0``
    and a ``runtime.Unknown`` {typeMeta {apiVersion, kind}, raw}}."""
    status = (_field(2, b"Failure") + _field(3, GONE_MESSAGE.encode()) + _field(4, b"Expired")
              + _varint(6 << 3) + _varint(410))
    unknown = b"k8s\x00" + _field(1, _field(1, b"v1") + _field(2, b"Status")) + _field(2, status)
    event = _field(1, b"ERROR") + _field(2, _field(1, unknown))
    return struct.pack(">I", len(event)) + event


def read_event(upstream: http.client.HTTPResponse, protobuf: bool) -> bytes:
    """One event of a watch stream, as sent (b"" at its end): a JSON line, or a protobuf
    frame (its 4-byte length and the message)."""
    if not protobuf:
        return upstream.readline()
    head = upstream.read(4)
    if len(head) < 4:
        return b""
    body = upstream.read(struct.unpack(">I", head)[0])
    return head + body


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: "FaultProxy"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed hook) is normal here; anything else is not."""
        import sys
        import traceback

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        traceback.print_exc()


class FaultProxy:
    """``with FaultProxy(admin_kubeconfig, seed=1) as proxy: ...`` (see the module docstring)."""

    def __init__(self, admin_kubeconfig: str | Path, seed: int | None = 0, port: int = 0):
        self.upstream, self._ssl = _upstream_from_kubeconfig(Path(admin_kubeconfig))
        self.random = random.Random(seed)
        self.rules: list[Rule] = []
        self.stats = Stats()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), _Handler, bind_and_activate=True)
        self._server.proxy = self
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None
        self._kubeconfig_dir: tempfile.TemporaryDirectory | None = None
        self._held: set[str] = set()
        self._released = threading.Condition(self._lock)

    # --- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FaultProxy":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"faultproxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._kubeconfig_dir is not None:
            self._kubeconfig_dir.cleanup()
            self._kubeconfig_dir = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path | None = None) -> str:
        """A kubeconfig pointing at the proxy, without credentials (the proxy adds them)."""
        if path is None:
            if self._kubeconfig_dir is None:
                self._kubeconfig_dir = tempfile.TemporaryDirectory(prefix="faultproxy-")
            path = Path(self._kubeconfig_dir.name) / "kubeconfig"
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "anonymous"}}],
        }
        Path(path).write_text(yaml.safe_dump(config))
        return str(path)

    # --- faults

    def set_rules(self, rules: Iterable[Rule], seed: int | None = None) -> None:
        with self._lock:
            self.rules = list(rules)
            if seed is not None:
                self.random.seed(seed)

    def add_rule(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.set_rules([])

    def reset_stats(self) -> Stats:
        with self._lock:
            old, self.stats = self.stats, Stats()
        return old

    def _decide(self, verb: str, resource: str) -> Rule | None:
        with self._lock:
            self.stats.requests[f"{verb} {resource}"] += 1
            for rule in self.rules:
                if rule.matches(verb, resource) and self.random.random() < rule.probability:
                    rule.fired += 1
                    self.stats.faults[rule.kind] += 1
                    return rule
        return None

    def hold(self, *resources: str) -> None:
        """Stop relaying watch events of ``resources`` (they wait, in order, until released)."""
        with self._lock:
            self._held.update(resources)

    def release(self, *resources: str) -> None:
        with self._lock:
            self._held.difference_update(resources)
            self._released.notify_all()

    def _wait_released(self, resource: str) -> None:
        with self._lock:
            while resource in self._held:
                self._released.wait(1.0)

    def _count_event(self) -> None:
        with self._lock:
            self.stats.watch_events += 1

    # --- upstream

    def connect(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        host, port = self.upstream
        return http.client.HTTPSConnection(host, port, context=self._ssl, timeout=timeout)


def _upstream_from_kubeconfig(path: Path) -> tuple[tuple[str, int], ssl.SSLContext]:
    config = yaml.safe_load(path.read_text())
    context_name = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    url = urllib.parse.urlsplit(cluster["server"])
    tmp = tempfile.mkdtemp(prefix="faultproxy-pki-")

    def materialise(data_key: str, file_key: str, holder: dict, name: str) -> str | None:
        if holder.get(data_key):
            target = Path(tmp) / name
            target.write_bytes(base64.b64decode(holder[data_key]))
            target.chmod(0o600)
            return str(target)
        return holder.get(file_key)

    ca = materialise("certificate-authority-data", "certificate-authority", cluster, "ca.crt")
    cert = materialise("client-certificate-data", "client-certificate", user, "client.crt")
    key = materialise("client-key-data", "client-key", user, "client.key")
    ctx = ssl.create_default_context(cafile=ca)
    if cert and key:
        ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return (url.hostname or "127.0.0.1", url.port or 443), ctx


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # every method goes through one path
    def do_GET(self) -> None:
        self._proxy()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _read_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _reset(self, partial: bytes) -> None:
        """Send ``partial`` then abort the connection with a TCP RST."""
        try:
            self.wfile.write(partial)
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def _proxy(self) -> None:
        proxy = self.server.proxy
        body = self._read_body()
        verb, resource, query = classify(self.command, self.path)
        rule = proxy._decide(verb, resource)
        kind = rule.kind if rule else None
        if kind == "latency":
            time.sleep(rule.delay)
        elif kind == "429":
            return self._reply(429, status_body(429, "TooManyRequests", "injected by faultproxy"),
                               {"Retry-After": str(rule.retry_after)})
        elif kind in ("500", "503"):
            code = int(kind)
            headers = {"Retry-After": str(rule.retry_after)} if code == 503 else {}
            return self._reply(code, status_body(code, "InternalError" if code == 500 else "ServiceUnavailable",
                                                 "injected by faultproxy"), headers)
        elif kind == "http-410":
            return self._reply(410, status_body(410, "Expired", "too old resource version: injected by faultproxy"))
        elif kind == "reset":
            return self._reset(b"HTTP/1.1 200 OK\r\nContent-Type: appl")

        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if verb == "watch":
            headers.pop("Accept-Encoding", None)
        if body is not None:
            headers["Content-Length"] = str(len(body))
        elif self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = "0"
        timeout = None if verb == "watch" else 120
        conn = proxy.connect(timeout=timeout)
        try:
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                upstream = conn.getresponse()
            except OSError as err:
                return self._reply(502, status_body(502, "BadGateway", f"faultproxy: upstream: {err}"))
            if kind == "reset-after":
                data = upstream.read()
                return self._reset(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                   % (upstream.status, upstream.reason.encode(), len(data)) + data[: len(data) // 2])
            self.send_response_only(upstream.status, upstream.reason)
            for k, v in upstream.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            length = upstream.getheader("Content-Length")
            streamed = length is None or verb == "watch"
            if streamed:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", length)
            self.end_headers()
            if not streamed:
                self.wfile.write(upstream.read())
                self.wfile.flush()
                return
            if self.command == "HEAD":
                return
            if verb == "watch" and upstream.status == 200:
                self._relay_watch(upstream, rule, conn, resource)
            else:
                while True:
                    data = upstream.read1(65536)
                    if not data:
                        break
                    self._chunk(data)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            conn.close()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _relay_watch(self, upstream: http.client.HTTPResponse, rule: Rule | None, conn: http.client.HTTPSConnection,
                     resource: str) -> None:
        proxy = self.server.proxy
        kind = rule.kind if rule else None
        protobuf = "protobuf" in (upstream.getheader("Content-Type") or "")
        events = 0
        timer = None
        if kind == "watch-end":
            # End the stream after `after` seconds even when no event comes: cut the upstream.
            def cut() -> None:
                try:
                    if conn.sock is not None:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            timer = threading.Timer(rule.after, cut)
            timer.daemon = True
            timer.start()
        arrivals = _arrivals(upstream, protobuf)
        try:
            while True:
                if kind in ("watch-end", "watch-410") and events >= rule.events:
                    if kind == "watch-410":
                        self._chunk(gone_frame() if protobuf else GONE_EVENT)
                    return
                arrived, line = arrivals.get()
                if not line:
                    return
                if kind == "watch-delay":
                    time.sleep(max(0.0, arrived + rule.delay - time.monotonic()))
                proxy._wait_released(resource)
                events += 1
                proxy._count_event()
                self._chunk(line)
        finally:
            if timer is not None:
                timer.cancel()
            if conn.sock is not None:  # ends the reader too
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _arrivals(upstream: http.client.HTTPResponse, protobuf: bool) -> "queue.Queue[tuple[float, bytes]]":
    """The watch's events as they arrive, each with its ``time.monotonic()``, read by a thread
    of their own (so a held or delayed relay does not delay their arrival); ``b""`` at the end."""
    arrivals: "queue.Queue[tuple[float, bytes]]" = queue.Queue()

    def read() -> None:
        while True:
            try:
                line = read_event(upstream, protobuf)
            except Exception:  # noqa: BLE001 - the stream cut under it (any way http.client says so): its end
                line = b""
            arrivals.put((time.monotonic(), line))
            if not line:
                return

    threading.Thread(target=read, name="faultproxy-watch-reader", daemon=True).start()
    return arrivals
