"""The fixture's own guarantees that later e2e tests build on."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request

import pytest

from controlplane import TERMINATE_AFTER, ControlPlane, unique_name

pytestmark = pytest.mark.e2e


def test_binaries_report_pinned_versions(control_plane: ControlPlane):
    v = control_plane.versions
    client = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert client["clientVersion"]["gitVersion"] == v["KUBERNETES_VERSION"]
    assert client["serverVersion"]["gitVersion"] == v["KUBERNETES_VERSION"]
    # the built kubectl is first on PATH of .env
    assert control_plane.env["PATH"].split(":")[0] == str(control_plane.bin_dir)


def _get(cp: ControlPlane, path: str, token: str) -> int:
    ctx = ssl.create_default_context(cafile=str(cp.pki.dir / "ca.crt"))
    req = urllib.request.Request(cp.server + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_serviceaccount_token_is_authenticated_and_rbac_enforced(control_plane, namespace):
    cp = control_plane
    cp.create_service_account("hook", namespace)
    token = cp.create_token("hook", namespace)
    path = f"/api/v1/namespaces/{namespace}/pods"
    assert _get(cp, path, token) == 403  # authenticated, not authorized
    cp.kubectl("create", "role", "pods", "-n", namespace, "--verb=list", "--resource=pods")
    cp.kubectl("create", "rolebinding", "pods", "-n", namespace, "--role=pods", f"--serviceaccount={namespace}:hook")
    cp.wait_for(lambda: _get(cp, path, token) == 200, timeout=10, message="RoleBinding takes effect")
    assert _get(cp, path, "not-a-token") == 401


def minimal_raycluster(name: str) -> dict:
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}},
    }


def test_stopped_operator_creates_no_pods_until_restarted(control_plane, namespace):
    cp = control_plane
    cluster = minimal_raycluster("paused")
    cp.stop_operator()
    try:
        assert not cp.operator_running
        cp.apply(cluster, namespace)
        time.sleep(3)
        assert cp.kubectl_json("get", "pods", "-n", namespace)["items"] == []
    finally:
        cp.start_operator()
    assert cp.operator_running
    cp.wait_for(lambda: cp.kubectl_json("get", "pods", "-n", namespace, "-l", "ray.io/cluster=paused")["items"],
                timeout=60, message="head pod after operator restart")


def test_deleted_raycluster_pods_are_garbage_collected(control_plane, namespace):
    cp = control_plane
    cp.apply(minimal_raycluster("gc"), namespace)
    selector = ("get", "pods", "-n", namespace, "-l", "ray.io/cluster=gc")
    cp.wait_for(lambda: cp.kubectl_json(*selector)["items"], timeout=60, message="head pod")
    cp.kubectl("delete", "raycluster", "gc", "-n", namespace, "--wait=false")
    cp.wait_for(lambda: not cp.kubectl_json(*selector)["items"], timeout=60,
                message="pods of the deleted RayCluster garbage-collected (kube-controller-manager)")


def test_garbage_collector_and_namespace_deletion(control_plane):
    cp = control_plane
    ns = cp.create_namespace(unique_name("e2e-gc"))
    owner = cp.kubectl_json("create", "configmap", "owner", "-n", ns)
    cp.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}}, ns)
    cp.kubectl("delete", "configmap", "owner", "-n", ns)
    cp.wait_for(lambda: cp.get("configmap", "child", ns) is None, timeout=30, message="child garbage-collected")
    cp.delete_namespace(ns, wait=True)
    assert cp.get("namespace", ns) is None


def test_python_client_accepts_kubeconfig(control_plane):
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.config.new_client_from_config(config_file=control_plane.kubeconfig)
    crds = kubernetes.client.ApiextensionsV1Api(client).list_custom_resource_definition()
    assert {"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"} <= {c.metadata.name for c in crds.items}


def test_a_pod_takes_the_shutdown_time_its_annotation_gives(control_plane, namespace):
    """kwok deletes a pod at once, or after the time its TERMINATE_AFTER annotation gives
    (a pod that takes its time to shut down): the hook's drain must follow it."""
    cp = control_plane
    if not cp.has("kwok"):
        pytest.skip("kwok not built")

    def pod(name: str, annotations: dict[str, str]) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
                "spec": {"nodeName": "kwok-node-0", "containers": [{"name": "c", "image": "busybox"}]}}

    cp.apply([pod("quick", {}), pod("slow", {TERMINATE_AFTER: "3s"})], namespace)
    cp.wait_for(lambda: all((cp.get("pod", n, namespace) or {}).get("status", {}).get("phase") == "Running"
                            for n in ("quick", "slow")), timeout=60, message="both pods Running")
    start = time.monotonic()
    cp.kubectl("delete", "pod", "quick", "slow", "-n", namespace, "--wait=false")
    cp.wait_for(lambda: cp.get("pod", "quick", namespace) is None, timeout=10, message="quick pod gone")
    assert time.monotonic() - start < 2.0
    assert cp.get("pod", "slow", namespace)["metadata"].get("deletionTimestamp")  # still terminating
    cp.wait_for(lambda: cp.get("pod", "slow", namespace) is None, timeout=20, message="slow pod gone")
    assert 2.5 < time.monotonic() - start < 10
