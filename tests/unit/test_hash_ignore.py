"""Label churn (issue #14): bookkeeping keys on pod templates (``helm.sh/chart`` …) are left out
of the template hash, so a chart bump recreates nothing; the preview says the key changed and
is not hashed; upgrading raygitops or changing the list recreates nothing by itself.

Scheme h3 tags every hash with its rules (the list and the operator line's pod rules):
``h3.<6 hex>``. Under the legacy scheme h1 (clusters that keep KubeRay's own Recreate) a group
whose template holds none of the keys keeps its h1 hash; one that held a key is hashed as
``h2.<6 hex of the list>``. Pods whose hash was made under other rules are compared by spec
(the hook's fallback), never by hash value.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import yaml

from raygitops.model.hashing import DEFAULT_IGNORED_KEYS, NEWEST, NO_RULES, HashRules, hash_cluster, scheme_of
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.model.hashing import split_spec
from raygitops.model import verdict

from test_presync_fakes import NS, FakeKube, cluster_spec, with_crd_defaults

DEFAULT = HashRules(DEFAULT_IGNORED_KEYS)


def charted(spec: dict, chart: str = "raydemo-0.3.0", extra: dict | None = None) -> dict:
    """The spec with Helm's bookkeeping labels on every pod template."""
    spec = copy.deepcopy(spec)
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        group["template"].setdefault("metadata", {})["labels"] = {"helm.sh/chart": chart, "app": "ray",
                                                                  **(extra or {})}
    return spec


def test_a_chart_bump_keeps_the_hash() -> None:
    old, new = hash_cluster(charted(cluster_spec()), DEFAULT), hash_cluster(charted(cluster_spec(), "raydemo-0.4.0"), DEFAULT)
    assert old == new and scheme_of(old.head) == DEFAULT.tag() and DEFAULT.tag().startswith("h3.")
    assert DEFAULT.tag() != NEWEST.tag() != HashRules(DEFAULT_IGNORED_KEYS, "1.5").tag()  # the tag names the rules
    # a label that is not bookkeeping is hashed; so is every key with an empty list
    assert hash_cluster(charted(cluster_spec(), extra={"team": "b"}), DEFAULT) != old
    assert hash_cluster(charted(cluster_spec()), NEWEST) != hash_cluster(charted(cluster_spec(), "raydemo-0.4.0"), NEWEST)
    # patterns
    rules = HashRules(("example.com/*",))
    assert hash_cluster(charted(cluster_spec(), extra={"example.com/build": "1"}), rules) == \
        hash_cluster(charted(cluster_spec(), extra={"example.com/build": "2"}), rules)


def test_scheme_h1_keeps_h1_where_no_key_is_ignored() -> None:
    """The legacy scheme (clusters that keep KubeRay's own Recreate): a group without an
    ignored key keeps its h1 hash, one with it is tagged h2.<list>."""
    legacy = DEFAULT.as_legacy()
    plain = hash_cluster(cluster_spec(), legacy)
    assert plain == hash_cluster(cluster_spec(), NO_RULES) and scheme_of(plain.head) == "h1"
    old, new = hash_cluster(charted(cluster_spec()), legacy), hash_cluster(charted(cluster_spec(), "raydemo-0.4.0"), legacy)
    assert old == new and scheme_of(old.head) == legacy.tag() and legacy.tag().startswith("h2.")
    assert hash_cluster(charted(cluster_spec()), NO_RULES) != hash_cluster(charted(cluster_spec(), "raydemo-0.4.0"), NO_RULES)


def plan_for(spec: dict, rules: HashRules) -> ClusterPlan:
    return ClusterPlan("demo", "Recreate", hash_cluster(spec, rules), split_spec(spec), rules=rules)


def live_with_pods(spec: dict, rules: HashRules) -> tuple[dict, list]:
    """A cluster rendered under ``rules`` (its pods carry those hashes), as the API server keeps it."""
    kube = FakeKube()
    rendered = copy.deepcopy(spec)
    hashes = hash_cluster(spec, rules)
    for name, group in [("head", rendered["headGroupSpec"])] + [(g["groupName"], g) for g in rendered["workerGroupSpecs"]]:
        group["template"].setdefault("metadata", {}).setdefault("annotations", {})["raygitops.dev/template-hash"] = \
            hashes.head if name == "head" else hashes.workers[name]
    live = kube.add_cluster("demo", with_crd_defaults(rendered), pods=False)
    kube.create_pods(NS, "demo")
    return live, kube.pods_of("demo")


def test_upgrading_raygitops_recreates_nothing_and_a_chart_bump_neither() -> None:
    """Pods rendered by a raygitops that hashed the labels (h1 with them) against a plan of
    today's rules: compared by spec, in sync; the chart bump too; an image change drifts."""
    live, pods = live_with_pods(charted(cluster_spec()), NO_RULES)
    assert verdict.decide(NS, plan_for(charted(cluster_spec()), DEFAULT), live, pods).action == verdict.IN_SYNC
    bumped = verdict.decide(NS, plan_for(charted(cluster_spec(), "raydemo-0.4.0"), DEFAULT), live, pods)
    assert bumped.action == verdict.IN_SYNC, bumped.reason
    image = verdict.decide(NS, plan_for(charted(cluster_spec(image="rayproject/ray:2.42.0"), "raydemo-0.4.0"), DEFAULT),
                         live, pods)
    assert image.action == verdict.RECREATE and {g.how for g in image.drift.values()} == {"spec-hash"}


def test_same_rules_compare_by_pod_hash_and_changed_rules_by_spec() -> None:
    live, pods = live_with_pods(charted(cluster_spec()), DEFAULT)
    assert verdict.decide(NS, plan_for(charted(cluster_spec(), "raydemo-0.9.9"), DEFAULT), live, pods).action == verdict.IN_SYNC
    image = verdict.decide(NS, plan_for(charted(cluster_spec(image="x:2")), DEFAULT), live, pods)
    assert {g.how for g in image.drift.values()} == {"pod-hash"}
    other = HashRules((*DEFAULT_IGNORED_KEYS, "app"))  # the user extends the list: no recreate by itself
    assert verdict.decide(NS, plan_for(charted(cluster_spec()), other), live, pods).action == verdict.IN_SYNC
    # and back to hashing every key: the chart label is then a real difference only if it differs
    assert verdict.decide(NS, plan_for(charted(cluster_spec()), NO_RULES), live, pods).action == verdict.IN_SYNC
    assert verdict.decide(NS, plan_for(charted(cluster_spec(), "raydemo-0.4.0"), NO_RULES), live, pods).action \
        == verdict.RECREATE


def test_the_plan_carries_the_rules_to_the_hook() -> None:
    spec = charted(cluster_spec())
    plan = Plan(namespace="ray", clusters=[plan_for(spec, DEFAULT)], hash_ignore=DEFAULT.ignore)
    again = Plan.from_json(json.loads(plan.dumps()))
    assert again.hash_ignore == DEFAULT.ignore and again.clusters[0].rules == DEFAULT
    old = json.loads(plan.dumps())
    del old["hashIgnore"], old["podRules"]  # a plan of an earlier raygitops: no rules, the h1 scheme
    assert Plan.from_json(old).clusters[0].rules == NO_RULES


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def write_app(root: Path, chart: str, config: str = "") -> None:
    root.mkdir(parents=True, exist_ok=True)
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "demo", "namespace": "ray", "annotations": {"raygitops.dev/upgrade-strategy": "Recreate"}},
               "spec": charted(cluster_spec(), chart)}
    (root / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (root / "raygitops.yaml").write_text(config)


def test_the_preview_shows_the_bump_and_that_it_recreates_nothing(tmp_path: Path) -> None:
    write_app(tmp_path / "base", "raydemo-0.3.0")
    write_app(tmp_path / "head", "raydemo-0.4.0")
    res = run("diff", "--base", "base", "--head", "head", "--output", "json", "--exit-code", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (cluster,) = json.loads(res.stdout)["clusters"]
    assert cluster["class"] != "recreate"
    changes = [c for c in cluster["changes"] if "helm.sh~1chart" in c["path"]]
    assert len(changes) == 2 and all(c["hashIgnored"] and not c["podShaping"] for c in changes), changes
    text = run("diff", "--base", "base", "--head", "head", cwd=tmp_path).stdout
    assert "not hashed (hash.ignore)" in text, text


def test_raygitops_yaml_replaces_the_list(tmp_path: Path) -> None:
    write_app(tmp_path / "base", "raydemo-0.3.0", "hash:\n  ignore: []\n")
    write_app(tmp_path / "head", "raydemo-0.4.0", "hash:\n  ignore: []\n")
    res = run("diff", "--base", "base", "--head", "head", "--output", "json", "--exit-code", cwd=tmp_path)
    assert res.returncode == 3 and json.loads(res.stdout)["clusters"][0]["class"] == "recreate"
    write_app(tmp_path / "bad", "x", "hash:\n  ignore: 7\n")
    bad = run("render", "bad", cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.startswith("raygitops: bad/raygitops.yaml:2: hash.ignore: "), bad.stderr


def test_a_chart_bump_between_two_commits_of_a_real_repository(tmp_path: Path) -> None:
    """The same between two revisions of a Git repository (the pull-request case)."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    write_app(tmp_path / "app", "raydemo-0.3.0")
    git("add", ".")
    git("commit", "-qm", "chart 0.3.0")
    git("checkout", "-qb", "bump")
    write_app(tmp_path / "app", "raydemo-0.4.0")
    git("commit", "-qam", "chart 0.4.0")
    res = run("diff", "--base", "main", "--head", "bump", "app", "--output", "json", "--exit-code", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (cluster,) = json.loads(res.stdout)["clusters"]
    assert cluster["class"] != "recreate" and any(c.get("hashIgnored") for c in cluster["changes"])
