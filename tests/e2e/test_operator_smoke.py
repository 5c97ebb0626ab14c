"""Pin down the KubeRay operator behaviour raygitops relies on (real operator, real apiserver).

- pods carry the template annotations and KubeRay's labels;
- spec.suspend=true deletes every pod and reaches status.state "suspended";
- suspend=false recreates the pods from the CURRENT templates;
- a template change alone recreates nothing (the problem raygitops exists for);
- with kwok + kube-scheduler, pods become Ready and the cluster reaches state "ready".
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import yaml

from controlplane import ControlPlane, shared_dir

pytestmark = pytest.mark.e2e

CORPUS_SAMPLE = "corpus/kuberay-v1.7.0/ray-cluster.sandbox.yaml"
HASH_KEY = "raygitops.dev/template-hash"
WORKERS = 2


@pytest.fixture(scope="module")
def sample() -> dict:
    shared = shared_dir()
    path = shared / CORPUS_SAMPLE if shared else None
    if path is None or not path.is_file():
        pytest.skip(f"RayCluster corpus sample {CORPUS_SAMPLE} not found (set RAYGITOPS_SHARED)")
    return yaml.safe_load(path.read_text())


def make_cluster(sample: dict, name: str, hash_value: str = "h1-aaaaaaaaaaaaaaaa") -> dict:
    """The corpus sample, renamed, with a raygitops-style template annotation on every group."""
    rc = copy.deepcopy(sample)
    rc["metadata"] = {"name": name}
    groups = [rc["spec"]["headGroupSpec"], *rc["spec"]["workerGroupSpecs"]]
    for group in groups:
        group["template"].setdefault("metadata", {}).setdefault("annotations", {})[HASH_KEY] = hash_value
    worker = rc["spec"]["workerGroupSpecs"][0]
    worker.update(replicas=WORKERS, minReplicas=WORKERS)
    return rc


def pods(cp: ControlPlane, ns: str, cluster: str) -> list[dict]:
    return cp.kubectl_json("get", "pods", "-n", ns, "-l", f"ray.io/cluster={cluster}")["items"]


def live_pods(cp: ControlPlane, ns: str, cluster: str) -> list[dict]:
    return [p for p in pods(cp, ns, cluster) if not p["metadata"].get("deletionTimestamp")]


def wait_pods(cp: ControlPlane, ns: str, cluster: str, count: int = 1 + WORKERS, timeout: float = 60) -> list[dict]:
    def enough():
        found = live_pods(cp, ns, cluster)
        return found if len(found) == count else None

    return cp.wait_for(enough, timeout=timeout, message=f"{count} pods of RayCluster {ns}/{cluster}")


def raycluster(cp: ControlPlane, ns: str, name: str) -> dict:
    return cp.kubectl_json("get", "raycluster", name, "-n", ns)


def wait_state(cp: ControlPlane, ns: str, name: str, state: str, timeout: float = 60) -> dict:
    return cp.wait_for(lambda: (rc := raycluster(cp, ns, name)).get("status", {}).get("state") == state and rc,
                       timeout=timeout, message=f"RayCluster {ns}/{name} state {state!r}")


def condition(rc: dict, ctype: str) -> str | None:
    return next((c["status"] for c in rc.get("status", {}).get("conditions", []) if c["type"] == ctype), None)


def patch(cp: ControlPlane, ns: str, name: str, ops: list[dict] | dict, kind: str = "json") -> None:
    cp.kubectl("patch", "raycluster", name, "-n", ns, f"--type={kind}", "-p", json.dumps(ops))


def template_change_ops(hash_value: str, image: str) -> list[dict]:
    """A pod-shaping change of every group: new template annotation and a new image."""
    key = HASH_KEY.replace("/", "~1")
    return [
        {"op": "replace", "path": f"/spec/headGroupSpec/template/metadata/annotations/{key}", "value": hash_value},
        {"op": "replace", "path": "/spec/headGroupSpec/template/spec/containers/0/image", "value": image},
        {"op": "replace", "path": f"/spec/workerGroupSpecs/0/template/metadata/annotations/{key}", "value": hash_value},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/template/spec/containers/0/image", "value": image},
    ]


def uids(found: list[dict]) -> set[str]:
    return {p["metadata"]["uid"] for p in found}


def is_ready(pod: dict) -> bool:
    status = pod.get("status", {})
    return status.get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))


def test_pods_carry_template_annotations_and_kuberay_labels(control_plane, namespace, sample):
    cp, name = control_plane, "smoke-labels"
    cp.apply(make_cluster(sample, name), namespace)

    found = wait_pods(cp, namespace, name)
    rc = raycluster(cp, namespace, name)
    heads = [p for p in found if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    workers = [p for p in found if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(heads) == 1 and len(workers) == WORKERS, [p["metadata"]["labels"] for p in found]
    group = sample["spec"]["workerGroupSpecs"][0]["groupName"]
    for pod, expected_group in [(heads[0], "headgroup")] + [(w, group) for w in workers]:
        meta = pod["metadata"]
        assert meta["labels"]["ray.io/cluster"] == name
        assert meta["labels"]["ray.io/group"] == expected_group
        assert meta["annotations"][HASH_KEY] == "h1-aaaaaaaaaaaaaaaa"
        owner = next(o for o in meta["ownerReferences"] if o.get("controller"))
        assert (owner["kind"], owner["name"], owner["uid"]) == ("RayCluster", name, rc["metadata"]["uid"])
    assert heads[0]["spec"]["containers"][0]["image"] == sample["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]


def test_suspend_drains_then_resume_recreates_from_current_templates(control_plane, namespace, sample):
    cp, name = control_plane, "smoke-suspend"
    cp.apply(make_cluster(sample, name), namespace)
    before = uids(wait_pods(cp, namespace, name))

    patch(cp, namespace, name, {"spec": {"suspend": True}}, kind="merge")
    cp.wait_for(lambda: not pods(cp, namespace, name), timeout=60, message="every pod deleted after suspend")
    rc = wait_state(cp, namespace, name, "suspended")
    assert condition(rc, "RayClusterSuspended") == "True"
    time.sleep(2)  # a suspended cluster stays empty
    assert pods(cp, namespace, name) == []

    # One patch: new pod-shaping spec + resume (what the raygitops hook does).
    new_image = "rayproject/ray:2.58.0-py312-e2e"
    patch(cp, namespace, name, [*template_change_ops("h1-bbbbbbbbbbbbbbbb", new_image),
                                {"op": "replace", "path": "/spec/suspend", "value": False}])
    after = wait_pods(cp, namespace, name)
    assert not (uids(after) & before), "resume must create new pods"
    for pod in after:
        assert pod["metadata"]["annotations"][HASH_KEY] == "h1-bbbbbbbbbbbbbbbb", pod["metadata"]["name"]
        assert pod["spec"]["containers"][0]["image"] == new_image, pod["metadata"]["name"]
    rc = raycluster(cp, namespace, name)
    assert condition(rc, "RayClusterSuspended") != "True"


def test_template_change_alone_recreates_nothing(control_plane, namespace, sample):
    cp, name = control_plane, "smoke-drift"
    cp.apply(make_cluster(sample, name), namespace)
    before = wait_pods(cp, namespace, name)
    if cp.has("kwok") and cp.has("kube-scheduler"):
        wait_state(cp, namespace, name, "ready", timeout=90)

    mark = cp.operator_log_mark()
    patch(cp, namespace, name, template_change_ops("h1-cccccccccccccccc", "rayproject/ray:2.58.0-py312-e2e"))
    cp.wait_operator_reconciled(name, namespace, since=mark)
    time.sleep(4)  # give a (wrongly) recreating operator time to act: its requeue period is 2 s

    after = live_pods(cp, namespace, name)
    assert uids(after) == uids(before), "a template change alone must not recreate pods (KubeRay < 1.6)"
    for pod in after:
        assert pod["metadata"]["annotations"][HASH_KEY] == "h1-aaaaaaaaaaaaaaaa"
        assert pod["spec"]["containers"][0]["image"] != "rayproject/ray:2.58.0-py312-e2e"


def test_pods_become_ready_and_cluster_reaches_ready(control_plane, namespace, sample):
    cp, name = control_plane, "smoke-ready"
    missing = [c for c in ("kwok", "kube-scheduler") if not cp.has(c)]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (not built)")
    cp.apply(make_cluster(sample, name), namespace)

    rc = wait_state(cp, namespace, name, "ready", timeout=90)
    found = live_pods(cp, namespace, name)
    assert len(found) == 1 + WORKERS and all(is_ready(p) for p in found), [p["status"] for p in found]
    assert all(p["spec"].get("nodeName", "").startswith("kwok-node-") for p in found)
    assert rc["status"]["readyWorkerReplicas"] == WORKERS
    assert condition(rc, "HeadPodReady") == "True"
    assert condition(rc, "RayClusterProvisioned") == "True"
