"""ray-operator v1.4.2's ``ValidateRayClusterSpec`` (``controllers/ray/utils/validation.go``,
lines 36-119), in its order: 1.5's checks without the group resources and labels and the
autoscaler v2 env check; the feature gates on by default (``pkg/features/features.go``:
RayClusterStatusConditions only)."""

from __future__ import annotations

from raygitops.model.validation import Check, EachWorker, Head, Port
from raygitops.model.validation import checks as c

SPEC = "ValidateRayClusterSpec"

PORT = Port(
    tag="v1.4.2",
    gates=frozenset({"RayClusterStatusConditions"}),
    steps=(
        Head((Check(SPEC, 38, c.head_has_container),)),
        EachWorker((Check(SPEC, 43, c.worker_has_container),)),
        Check(SPEC, 48, c.ft_annotation_and_options),
        Check(SPEC, 54, c.redis_address_without_ft),
        Check(SPEC, 63, c.ft_redis_password_param),
        Check(SPEC, 68, c.ft_redis_password_env),
        Check(SPEC, 73, c.ft_redis_address_env),
        Check(SPEC, 78, c.ft_storage_namespace_annotation),
        Check(SPEC, 83, c.redis_username),
        Check(SPEC, 90, c.worker_suspend_gate),
        Check(SPEC, 99, c.worker_suspend_with_autoscaler),
        Check(SPEC, 104, c.autoscaler_version_and_env),
        Check(SPEC, 109, c.v2_head_restart_policy),
        Check(SPEC, 114, c.v2_worker_restart_policy),
    ),
)
