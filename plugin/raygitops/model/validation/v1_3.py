"""ray-operator v1.3.2's ``ValidateRayClusterSpec`` (``controllers/ray/utils/validation.go``,
lines 23-91), in its order: containers, GCS fault tolerance, redis username, suspended worker
groups (worded without the group); the feature gates on by default
(``pkg/features/features.go``: RayClusterStatusConditions only)."""

from __future__ import annotations

from raygitops.model.validation import Check, EachWorker, Head, Port
from raygitops.model.validation import checks as c

SPEC = "ValidateRayClusterSpec"

PORT = Port(
    tag="v1.3.2",
    gates=frozenset({"RayClusterStatusConditions"}),
    steps=(
        Head((Check(SPEC, 25, c.head_has_container),)),
        EachWorker((Check(SPEC, 30, c.worker_has_container),)),
        Check(SPEC, 35, c.ft_annotation_and_options),
        Check(SPEC, 41, c.redis_address_without_ft),
        Check(SPEC, 50, c.ft_redis_password_param),
        Check(SPEC, 55, c.ft_redis_password_env),
        Check(SPEC, 60, c.ft_redis_address_env),
        Check(SPEC, 65, c.ft_storage_namespace_annotation),
        Check(SPEC, 70, c.redis_username),
        Check(SPEC, 77, c.worker_suspend_gate_1_3),
        Check(SPEC, 86, c.worker_suspend_with_autoscaler_1_3),
    ),
)
