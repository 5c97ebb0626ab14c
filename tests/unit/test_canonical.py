"""The canonical form (schemes h1 and h3): what must and must not change a hash."""

from __future__ import annotations

import copy

from hypothesis import given, settings, strategies as st

from raygitops.model import quantity
from raygitops.model.canonical import canonical_bytes
from raygitops.model.hashing import hash_cluster

BASE_SPEC = {
    "rayVersion": "2.41.0",
    "headGroupSpec": {
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "1"},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-head",
                        "image": "rayproject/ray:2.41.0",
                        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                        "env": [{"name": "A", "value": "1"}],
                    }
                ]
            }
        },
    },
    "workerGroupSpecs": [
        {
            "groupName": "small",
            "replicas": 2,
            "minReplicas": 1,
            "maxReplicas": 5,
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-worker",
                            "image": "rayproject/ray:2.41.0",
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                        }
                    ]
                }
            },
        },
        {
            "groupName": "big",
            "replicas": 1,
            "minReplicas": 0,
            "maxReplicas": 2,
            "template": {"spec": {"containers": [{"name": "w", "image": "rayproject/ray:2.41.0"}]}},
        },
    ],
}


def spec() -> dict:
    return copy.deepcopy(BASE_SPEC)


def test_quantities_compare_by_value() -> None:
    assert quantity.canonical("1") == quantity.canonical(1) == quantity.canonical("1000m")
    assert quantity.canonical("1Gi") == quantity.canonical("1073741824") == quantity.canonical(1073741824)
    assert quantity.canonical("500m") == quantity.canonical(0.5) == quantity.canonical("0.5")
    assert quantity.canonical("1k") == quantity.canonical("1e3") == quantity.canonical("1000")
    assert quantity.canonical("1Ki") != quantity.canonical("1k")
    assert quantity.canonical("not-a-quantity") == "not-a-quantity"
    assert quantity.canonical(True) is True


def test_nulls_and_empty_collections_are_dropped() -> None:
    assert canonical_bytes({"a": 1, "b": None, "c": {}, "d": [], "e": {"f": None}}) == b'{"a":1}'


def test_list_order_is_kept() -> None:
    assert canonical_bytes({"a": [1, 2]}) != canonical_bytes({"a": [2, 1]})


def _reorder(value):
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


def test_key_order_quoting_and_quantity_notation_keep_hashes() -> None:
    base = hash_cluster(spec())
    assert hash_cluster(_reorder(spec())) == base
    alt = spec()
    alt["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "memory": 2147483648, "cpu": "1000m"}
    alt["headGroupSpec"]["rayStartParams"]["num-cpus"] = 1  # unquoted
    assert hash_cluster(alt) == base


def test_scaling_fields_keep_hashes() -> None:
    base = hash_cluster(spec())
    alt = spec()
    alt["workerGroupSpecs"][0].update(replicas=7, minReplicas=3, maxReplicas=9,
                                      scaleStrategy={"workersToDelete": ["x"]}, suspend=False,
                                      idleTimeoutSeconds=60)
    alt["headGroupSpec"]["serviceType"] = "NodePort"
    alt["suspend"] = True
    alt["upgradeStrategy"] = {"type": "Recreate"}
    alt["headServiceAnnotations"] = {"a": "b"}
    assert hash_cluster(alt) == base


def test_own_annotations_do_not_feed_the_hash() -> None:
    base = hash_cluster(spec())
    alt = spec()
    alt["headGroupSpec"]["template"]["metadata"] = {
        "annotations": {"raygitops.dev/template-hash": "h1-0000000000000000"}}
    assert hash_cluster(alt) == base


def _changed(mutate) -> set[str]:
    before = hash_cluster(spec()).groups()
    alt = spec()
    mutate(alt)
    after = hash_cluster(alt).groups()
    return {g for g in before if before[g] != after[g]}


def test_group_changes_touch_only_their_group() -> None:
    def image(s):
        s["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.42.0"

    def env(s):
        s["headGroupSpec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2"

    def volume(s):
        s["workerGroupSpecs"][1]["template"]["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]

    def resources(s):
        s["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"

    def start_params(s):
        s["workerGroupSpecs"][1]["rayStartParams"] = {"num-gpus": "1"}

    assert _changed(image) == {"worker:small"}
    assert _changed(env) == {"head"}
    assert _changed(volume) == {"worker:big"}
    assert _changed(resources) == {"worker:small"}
    assert _changed(start_params) == {"worker:big"}


def test_cluster_level_changes_touch_the_groups_whose_pods_they_reach() -> None:
    """Cluster-level fields reach the groups the operator's pod builder puts them in
    (model/podrules.py): the autoscaler container only the head, autoscaler v2 every pod's
    restartPolicy, the Ray version only across 2.53 (the probes, KubeRay 1.6), the autoscaler's
    idle timeout none."""
    def ray_version(s):
        s["rayVersion"] = "2.42.0"

    def ray_version_probes(s):
        s["rayVersion"] = "2.53.0"

    def autoscaler(s):
        s["enableInTreeAutoscaling"] = True

    def autoscaler_v2(s):
        s["enableInTreeAutoscaling"] = True
        s["autoscalerOptions"] = {"version": "v2"}

    def idle_timeout(s):
        s["autoscalerOptions"] = {"idleTimeoutSeconds": 300}

    def fault_tolerance(s):
        s["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}

    every = {"head", "worker:small", "worker:big"}
    assert _changed(ray_version) == set()
    assert _changed(ray_version_probes) == every
    assert _changed(autoscaler) == {"head"}
    assert _changed(autoscaler_v2) == every
    assert _changed(idle_timeout) == set()
    assert _changed(fault_tolerance) == every


# --- properties -------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.text(max_size=8))
_trees = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=4),
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(_trees)
def test_key_order_never_matters(tree) -> None:
    assert canonical_bytes(tree) == canonical_bytes(_reorder(tree))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=6), _trees, max_size=5))
def test_adding_nulls_and_empties_never_matters(tree) -> None:
    padded = {"zz-null": None, "zz-map": {}, "zz-list": [], "zz-nested": {"x": None}, **tree}
    assert canonical_bytes(padded) == canonical_bytes(tree)


_binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_decimal = {"m": None, "": 1, "k": 10**3, "M": 10**6, "G": 10**9}


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(_binary)))
def test_binary_quantities_equal_their_byte_counts(n, suffix) -> None:
    assert quantity.canonical(f"{n}{suffix}") == quantity.canonical(n * _binary[suffix])
    assert quantity.canonical(f"{n}{suffix}") == quantity.canonical(str(n * _binary[suffix]))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6))
def test_millis_equal_their_decimal(n) -> None:
    assert quantity.canonical(f"{n * 1000}m") == quantity.canonical(n) == quantity.canonical(f"{n}")


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 64), st.integers(1, 10**4), st.integers(0, 10**4))
def test_replicas_never_change_hashes_and_images_always_do(replicas, lo, tag) -> None:
    base = hash_cluster(spec())
    scaled = spec()
    scaled["workerGroupSpecs"][0].update(replicas=replicas, minReplicas=lo, maxReplicas=lo + replicas)
    assert hash_cluster(scaled) == base
    moved = spec()
    moved["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = f"ray:{tag}-x"
    assert hash_cluster(moved).workers["small"] != base.workers["small"]
    assert hash_cluster(moved).head == base.head
