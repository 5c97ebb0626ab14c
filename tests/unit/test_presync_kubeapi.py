"""kubeapi against a scripted HTTP server on loopback: retries, Retry-After, 409, watch."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raygitops.kube import client
from raygitops.kube.credentials import Credentials
from raygitops.kube.client import ApiError, Conflict, Gone, Kube


class Script:
    """Answers, in order, for each request: (status, headers, body) or "reset"."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.seen: list[tuple[str, str, dict, bytes]] = []
        self.times: list[float] = []


def serve(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append((self.command, self.path, dict(self.headers), body))
            script.times.append(time.monotonic())
            answer = script.answers.pop(0) if script.answers else (200, {}, {})
            if answer == "reset":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            status, headers, payload = answer
            if isinstance(payload, list):  # a watch stream: lines of events
                data = b"".join(json.dumps(e).encode() + b"\n" for e in payload)
            else:
                data = json.dumps(payload).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = do_DELETE = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def kube_for():
    servers = []

    def make(answers):
        script = Script(answers)
        server = serve(script)
        servers.append(server)
        creds = Credentials(host=f"http://127.0.0.1:{server.server_port}", ssl_context=None,
                            token=lambda: "Bearer t0ken")
        return Kube(creds), script

    yield make
    for s in servers:
        s.shutdown()


def test_429_honours_retry_after_then_succeeds(kube_for):
    kube, script = kube_for([(429, {"Retry-After": "1"}, {"reason": "TooManyRequests"}),
                             (200, {}, {"items": [{"metadata": {"name": "a"}}]})])
    items = kube.list_clusters("ray")
    assert items == [{"metadata": {"name": "a"}}]
    assert script.times[1] - script.times[0] >= 0.95
    assert kube.requests == 2
    assert script.seen[0][2]["Authorization"] == "Bearer t0ken"
    assert script.seen[0][1] == "/apis/ray.io/v1/namespaces/ray/rayclusters"


def test_5xx_and_connection_reset_are_retried(kube_for, monkeypatch):
    monkeypatch.setattr(client, "_retry_after", lambda headers, attempt: 0.01)
    kube, script = kube_for([(503, {}, {}), "reset", (500, {}, {}), (200, {}, {"metadata": {"name": "x"}})])
    assert kube.get_cluster("ray", "x") == {"metadata": {"name": "x"}}
    assert kube.requests == 4


def test_retries_are_bounded(kube_for, monkeypatch):
    monkeypatch.setattr(client, "_retry_after", lambda headers, attempt: 0.0)
    kube, _ = kube_for([(503, {}, {"message": "down"})] * client.MAX_ATTEMPTS)
    with pytest.raises(ApiError) as err:
        kube.list_clusters("ray")
    assert err.value.status == 503


def test_409_is_not_retried_and_is_a_conflict(kube_for):
    kube, script = kube_for([(409, {}, {"reason": "Conflict", "message": "the object has been modified"})])
    with pytest.raises(Conflict):
        kube.patch_cluster("ray", "demo", {"metadata": {"resourceVersion": "1"}})
    assert kube.requests == 1
    method, _, headers, body = script.seen[0]
    assert method == "PATCH" and headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(body) == {"metadata": {"resourceVersion": "1"}}


def test_404_get_is_none_and_delete_is_false(kube_for):
    kube, _ = kube_for([(404, {}, {"reason": "NotFound"}), (404, {}, {"reason": "NotFound"})])
    assert kube.get_cluster("ray", "nope") is None
    assert kube.delete_pod("ray", "p", uid="u") is False


def test_403_surfaces(kube_for):
    kube, _ = kube_for([(403, {}, {"reason": "Forbidden", "message": "cannot list"})])
    with pytest.raises(ApiError) as err:
        kube.list_pods("other", "ray.io/cluster")
    assert err.value.status == 403 and "cannot list" in str(err.value)


def test_watch_stream_and_410(kube_for):
    events = [{"type": "ADDED", "object": {"metadata": {"uid": "1", "resourceVersion": "5"}}},
              {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "6"}}},
              {"type": "DELETED", "object": {"metadata": {"uid": "1", "resourceVersion": "7"}}}]
    gone = [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}]
    kube, script = kube_for([(200, {}, events), (200, {}, gone)])
    got = list(kube.watch_pods("ray", "ray.io/cluster=demo", "4", 5))
    assert [k for k, _ in got] == ["ADDED", "BOOKMARK", "DELETED"]
    assert "watch=1" in script.seen[0][1] and "resourceVersion=4" in script.seen[0][1]
    assert "allowWatchBookmarks=true" in script.seen[0][1]
    with pytest.raises(Gone):
        list(kube.watch_pods("ray", "ray.io/cluster=demo", "1", 5))


def test_a_cluster_is_watched_by_name(kube_for):
    changed = [{"type": "MODIFIED", "object": {"metadata": {"name": "demo", "resourceVersion": "9"}}}]
    kube, script = kube_for([(200, {}, changed)])
    assert list(kube.watch_cluster("ray", "demo", "8", 3)) == [("MODIFIED", changed[0]["object"])]
    path = script.seen[0][1]
    assert path.startswith("/apis/ray.io/v1/namespaces/ray/rayclusters?")
    assert "fieldSelector=metadata.name%3Ddemo" in path and "resourceVersion=8" in path
    assert "watch=1" in path and "timeoutSeconds=3" in path and kube.by_verb == {"watch": 1}


def test_event_post(kube_for):
    kube, script = kube_for([(201, {}, {})])
    kube.create_event("ray", {"kind": "Event"})
    assert script.seen[0][0] == "POST" and script.seen[0][1] == "/api/v1/namespaces/ray/events"
