"""The fault-injecting proxy itself, driven by kubectl, the kubernetes client and raw HTTP
against the real apiserver (tests/e2e control plane)."""

from __future__ import annotations

import http.client
import json
import struct
import subprocess
import threading
import time

import pytest

import controlplane
from reliability.faultproxy import FAULT_KINDS, FaultProxy, Rule, classify, gone_frame

pytestmark = pytest.mark.e2e


def kubectl(plane, proxy: FaultProxy, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    argv = [str(plane.bin_dir / "kubectl"), f"--kubeconfig={proxy.write_kubeconfig()}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=plane.env)


def raw(proxy: FaultProxy, method: str, path: str, body: dict | None = None, timeout: float = 30):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    conn.request(method, path, body=data, headers=headers)
    return conn, conn.getresponse()


def watch_lines(response: http.client.HTTPResponse) -> list[dict]:
    events = []
    while True:
        line = response.readline()
        if not line:
            return events
        events.append(json.loads(line))


def test_classify() -> None:
    assert classify("GET", "/api/v1/namespaces/a/pods?labelSelector=x")[:2] == ("list", "pods")
    assert classify("GET", "/api/v1/namespaces/a/pods?watch=true&resourceVersion=1")[:2] == ("watch", "pods")
    assert classify("GET", "/apis/ray.io/v1/namespaces/a/rayclusters/c")[:2] == ("get", "rayclusters")
    assert classify("PATCH", "/apis/ray.io/v1/namespaces/a/rayclusters/c")[:2] == ("patch", "rayclusters")
    assert classify("PATCH", "/apis/ray.io/v1/namespaces/a/rayclusters/c/status")[:2] == ("patch", "rayclusters/status")
    assert classify("DELETE", "/api/v1/namespaces/a/pods/p")[:2] == ("delete", "pods")
    assert classify("POST", "/api/v1/namespaces/a/events")[:2] == ("create", "events")
    assert classify("GET", "/api/v1/namespaces")[:2] == ("list", "namespaces")
    with pytest.raises(ValueError):
        Rule("nope")


def test_transparent_kubectl(control_plane, proxy, namespace) -> None:
    assert kubectl(control_plane, proxy, "get", "namespaces", namespace).returncode == 0
    res = kubectl(control_plane, proxy, "create", "configmap", "a", "-n", namespace, "--from-literal=k=v")
    assert res.returncode == 0, res.stderr
    got = json.loads(kubectl(control_plane, proxy, "get", "configmap", "a", "-n", namespace, "-o", "json").stdout)
    assert got["data"] == {"k": "v"}
    listed = json.loads(kubectl(control_plane, proxy, "get", "configmaps", "-n", namespace, "-o", "json").stdout)
    assert "a" in [i["metadata"]["name"] for i in listed["items"]]
    counts = proxy.stats.requests
    assert counts["create configmaps"] == 1 and counts["get configmaps"] >= 1 and counts["list configmaps"] >= 1
    assert not proxy.stats.faults


def test_watch_streams_events_as_they_happen(control_plane, proxy, namespace) -> None:
    """Events created behind the proxy's back arrive through the open watch within a second."""
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=20")
    assert resp.status == 200
    assert resp.getheader("Transfer-Encoding") == "chunked"
    seen: list[tuple[float, dict]] = []

    def read() -> None:
        try:
            while True:
                line = resp.readline()
                if not line:
                    return
                seen.append((time.monotonic(), json.loads(line)))
        except (AttributeError, ValueError, OSError, http.client.HTTPException):
            return  # closed under our feet at the end of the test

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1.0)
    created = {}
    for i in range(3):
        created[f"w{i}"] = time.monotonic()
        control_plane.kubectl("create", "configmap", f"w{i}", "-n", namespace)  # direct, not proxied
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len([e for _, e in seen if e["object"]["metadata"]["name"].startswith("w")]) < 3:
        time.sleep(0.05)
    arrivals = {e["object"]["metadata"]["name"]: t for t, e in seen if e["type"] == "ADDED"}
    for name, t0 in created.items():
        assert name in arrivals, (name, [e["object"]["metadata"]["name"] for _, e in seen])
        assert arrivals[name] - t0 < 2.0, f"{name} arrived {arrivals[name] - t0:.2f} s late: not streamed"
    conn.close()
    assert proxy.stats.requests["watch configmaps"] == 1


def test_kubectl_watch_with_request_timeout(control_plane, proxy, namespace) -> None:
    control_plane.kubectl("create", "configmap", "x", "-n", namespace)
    start = time.monotonic()
    res = kubectl(control_plane, proxy, "get", "configmaps", "-n", namespace, "-w", "--request-timeout=3s",
                  timeout=30)
    assert time.monotonic() - start < 20
    assert "x" in res.stdout


def test_kubernetes_client_through_proxy(control_plane, proxy, namespace) -> None:
    from kubernetes import client, config, watch

    api = client.CoreV1Api(config.new_client_from_config(proxy.write_kubeconfig()))
    names = [n.metadata.name for n in api.list_namespace().items]
    assert namespace in names
    control_plane.kubectl("create", "configmap", "kc", "-n", namespace)
    events = list(watch.Watch().stream(api.list_namespaced_config_map, namespace, timeout_seconds=2))
    assert "kc" in [e["object"].metadata.name for e in events]


@pytest.mark.parametrize("kind", ["429", "503"])
def test_retryable_statuses_are_retried_by_kubectl(control_plane, proxy, namespace, kind) -> None:
    proxy.add_rule(Rule(kind, verbs={"get"}, resources={"namespaces"}, limit=1, retry_after=1))
    start = time.monotonic()
    res = kubectl(control_plane, proxy, "get", "namespace", namespace)
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - start >= 0.9  # honoured Retry-After
    assert proxy.stats.faults[kind] == 1
    assert proxy.stats.requests["get namespaces"] == 2


def test_500_reaches_the_client(control_plane, proxy, namespace) -> None:
    proxy.add_rule(Rule("500", verbs={"get"}, resources={"namespaces"}))
    res = kubectl(control_plane, proxy, "get", "namespace", namespace)
    assert res.returncode != 0
    assert "injected by faultproxy" in res.stderr
    assert proxy.stats.faults["500"] >= 1


def test_reset_before_forwarding(control_plane, proxy, namespace) -> None:
    proxy.add_rule(Rule("reset", verbs={"create"}, resources={"configmaps"}))
    res = kubectl(control_plane, proxy, "create", "configmap", "r", "-n", namespace)
    assert res.returncode != 0
    assert control_plane.get("configmap", "r", namespace) is None  # never reached the apiserver
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        raw(proxy, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r2"}})
    assert proxy.stats.faults["reset"] >= 2


def test_reset_after_forwarding_takes_effect(control_plane, proxy, namespace) -> None:
    proxy.add_rule(Rule("reset-after", verbs={"create"}, resources={"configmaps"}, limit=1))
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        conn, resp = raw(proxy, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ra"}})
        resp.read()
    assert control_plane.get("configmap", "ra", namespace) is not None  # the write happened
    assert proxy.stats.faults["reset-after"] == 1


def test_latency(control_plane, proxy, namespace) -> None:
    proxy.add_rule(Rule("latency", verbs={"get"}, resources={"namespaces"}, delay=1.5, limit=1))
    start = time.monotonic()
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}")
    assert resp.status == 200 and json.loads(resp.read())["metadata"]["name"] == namespace
    assert time.monotonic() - start >= 1.5


def test_watch_ends_early(control_plane, proxy, namespace) -> None:
    for i in range(3):
        control_plane.kubectl("create", "configmap", f"e{i}", "-n", namespace)
    proxy.add_rule(Rule("watch-end", events=2, after=30))
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=60")
    start = time.monotonic()
    events = watch_lines(resp)  # a clean end of stream (no IncompleteRead)
    assert len(events) == 2 and time.monotonic() - start < 10
    # ... and after a quiet period when events do not come
    proxy.set_rules([Rule("watch-end", events=1000, after=1.0)])
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=60"
                     f"&resourceVersion={events[-1]['object']['metadata']['resourceVersion']}")
    start = time.monotonic()
    watch_lines(resp)
    assert 0.8 < time.monotonic() - start < 10
    assert proxy.stats.faults["watch-end"] == 2


def test_watch_410_in_stream_and_http(control_plane, proxy, namespace) -> None:
    control_plane.kubectl("create", "configmap", "g", "-n", namespace)
    proxy.add_rule(Rule("watch-410", events=1, limit=1))
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=30")
    events = watch_lines(resp)
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    assert events[-1]["object"]["code"] == 410
    proxy.set_rules([Rule("http-410", limit=1)])
    conn, resp = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=30")
    assert resp.status == 410 and json.loads(resp.read())["code"] == 410
    # the kubernetes client surfaces both as ApiException(410) or an ERROR event: callers must relist
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException

    proxy.set_rules([Rule("http-410", limit=1)])
    api = client.CoreV1Api(config.new_client_from_config(proxy.write_kubeconfig()))
    with pytest.raises(ApiException) as info:
        list(watch.Watch().stream(api.list_namespaced_config_map, namespace, timeout_seconds=5, resource_version="1"))
    assert info.value.status == 410


PROTOBUF_WATCH = "application/vnd.kubernetes.protobuf;stream=watch"


def _frames(resp: http.client.HTTPResponse) -> list[bytes]:
    """The frames of a protobuf watch stream: a 4-byte length, then the message."""
    frames = []
    while True:
        head = resp.read(4)
        if len(head) < 4:
            return frames
        frames.append(resp.read(struct.unpack(">I", head)[0]))


def test_protobuf_watch_frames_arrive_one_by_one_and_a_410_among_them(control_plane, proxy, namespace) -> None:
    """client-go watches built-in kinds in protobuf (length-prefixed frames, no line breaks):
    each frame is relayed as it comes, and the injected 410 is a protobuf ERROR event shaped
    as the apiserver's own (a raw WatchEvent holding a Status with code 410)."""
    _, listed = raw(proxy, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
    version = json.loads(listed.read())["metadata"]["resourceVersion"]
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    conn.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=20"
                 f"&resourceVersion={version}", headers={"Accept": PROTOBUF_WATCH})
    resp = conn.getresponse()
    assert resp.getheader("Content-Type") == PROTOBUF_WATCH
    start = time.monotonic()
    threading.Timer(0.5, lambda: control_plane.kubectl("create", "configmap", "pb", "-n", namespace)).start()
    head = resp.read(4)
    frame = resp.read(struct.unpack(">I", head)[0])
    assert time.monotonic() - start < 5 and frame.startswith(b"\n\x05ADDED") and b"pb" in frame
    conn.close()
    proxy.add_rule(Rule("watch-410", events=1, limit=1))
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    conn.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=20",
                 headers={"Accept": PROTOBUF_WATCH})
    frames = _frames(conn.getresponse())
    assert [f[2:2 + f[1]] for f in frames] == [b"ADDED", b"ERROR"]  # field 1 (type), as the apiserver sends
    assert frames[-1] == gone_frame()[4:]
    assert b"Status" in frames[-1] and b"0\x9a\x03" in frames[-1]  # code (field 6) = 410


@pytest.mark.parametrize("which", ["control_plane", "control_plane_next"])
def test_the_operators_requests_through_the_proxy(request, which) -> None:
    """The operator started with the proxy's kubeconfig: its requests (discovery, protobuf
    watches, pod creates) go through it and a RayCluster gets its pods; with 410s injected
    into its pod watches from the start it watches again (KubeRay 1.6.2's client-go streams
    the initial list in a watch) and still does."""
    from reliability.fleet import raycluster

    plane = request.getfixturevalue(which)
    ns = plane.create_namespace(controlplane.unique_name("opproxy"))
    try:
        with FaultProxy(plane.kubeconfig, seed=3) as p:
            p.set_rules([Rule("watch-410", events=1, resources={"pods"}, limit=2)])
            plane.restart_operator(p.write_kubeconfig())
            try:
                plane.apply(raycluster("c", "rayproject/ray:2.41.0"), namespace=ns)
                plane.wait_for(lambda: len(plane.cluster_pods(ns, "c")) == 2, timeout=90, message="pods of c")
                assert p.stats.requests["create pods"] == 2 and p.stats.faults["watch-410"] >= 1
                plane.wait_for(lambda: p.stats.requests["watch pods"] >= 2, timeout=30,  # watched again after the 410
                               message=f"a new pod watch: {p.stats.snapshot()}")
            finally:
                plane.restart_operator(plane.kubeconfig)
    finally:
        plane.delete_namespace(ns, wait=False)


def test_random_mix_is_seeded_and_counted(control_plane, namespace) -> None:
    """Same seed, same sequence of faults; every fault and request counted."""
    sequences = []
    for _ in range(2):
        with FaultProxy(control_plane.kubeconfig, seed=42) as p:
            p.set_rules([Rule(k, probability=0.15, retry_after=0, delay=0.01) for k in
                         ("429", "500", "503", "latency", "reset")])
            outcomes = []
            for _ in range(30):
                try:
                    conn, resp = raw(p, "GET", f"/api/v1/namespaces/{namespace}")
                    outcomes.append(resp.status)
                    resp.read()
                except (ConnectionError, http.client.HTTPException):
                    outcomes.append("reset")
            sequences.append(outcomes)
            assert sum(p.stats.requests.values()) == 30
            assert sum(p.stats.faults.values()) == sum(1 for o in outcomes if o != 200) + p.stats.faults["latency"]
    assert sequences[0] == sequences[1]
    assert set(FAULT_KINDS) >= {"429", "500", "503", "latency", "reset"}


def test_operator_stop_start(control_plane) -> None:
    """The control plane's stop/start of the operator, used by the hook campaigns."""
    from reliability.chaos import operator_paused

    with operator_paused(control_plane):
        assert not control_plane.operator_running
    assert control_plane.operator_running


@pytest.mark.parametrize("kind", ["429", "500", "503", "reset", "reset-after", "latency", "watch-end",
                                  "watch-410", "http-410"])
def test_kubectl_get_list_watch_under_each_fault(control_plane, proxy, namespace, kind) -> None:
    """kubectl get / list / watch (--request-timeout) through every fault: it always ends
    in bounded time, and a fault that cannot be retried reaches the user as an error."""
    control_plane.kubectl("create", "configmap", "k", "-n", namespace)
    proxy.add_rule(Rule(kind, limit=1, retry_after=1, delay=0.5, events=1, after=1.0))
    results = {}
    for name, args in {"get": ["get", "configmap", "k"], "list": ["get", "configmaps"],
                       "watch": ["get", "configmaps", "-w", "--request-timeout=4s"]}.items():
        proxy.set_rules([Rule(kind, limit=1, retry_after=1, delay=0.5, events=1, after=1.0)])
        start = time.monotonic()
        res = kubectl(control_plane, proxy, *args, "-n", namespace, timeout=60)
        results[name] = (res.returncode, time.monotonic() - start, res.stderr.strip()[-200:])
        assert time.monotonic() - start < 30, (name, results[name])
        if kind in ("429", "503", "latency") or (kind.startswith(("watch", "http")) and name != "watch"):
            assert res.returncode == 0 or name == "watch", (name, results[name])
        if kind == "http-410" and name == "watch":
            assert res.returncode != 0 or "410" in res.stderr or "Expired" in res.stderr or "k" in res.stdout
    assert proxy.stats.faults[kind] >= 1, (proxy.stats.snapshot(), results)
