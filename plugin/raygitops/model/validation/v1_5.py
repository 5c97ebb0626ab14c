"""ray-operator v1.5.0's ``ValidateRayClusterSpec`` (``controllers/ray/utils/validation.go``,
lines 83-193, with ``validateRayGroupResources`` and ``validateRayGroupLabels``), in its
order; the feature gates on by default (``pkg/features/features.go``: RayClusterStatusConditions
only: a suspended worker group needs RayJobDeletionPolicy, off)."""

from __future__ import annotations

from raygitops.model.validation import Check, EachWorker, Head, Port, group_checks
from raygitops.model.validation import checks as c

SPEC = "ValidateRayClusterSpec"
GROUP = group_checks(resources=46, labels_in_params=54, label_syntax=63)

PORT = Port(
    tag="v1.5.0",
    gates=frozenset({"RayClusterStatusConditions"}),
    steps=(
        Head((Check(SPEC, 85, c.head_has_container), *GROUP)),
        EachWorker((Check(SPEC, 97, c.worker_has_container), *GROUP)),
        Check(SPEC, 109, c.ft_annotation_and_options),
        Check(SPEC, 115, c.redis_address_without_ft),
        Check(SPEC, 124, c.ft_redis_password_param),
        Check(SPEC, 129, c.ft_redis_password_env),
        Check(SPEC, 134, c.ft_redis_address_env),
        Check(SPEC, 139, c.ft_storage_namespace_annotation),
        Check(SPEC, 144, c.redis_username),
        Check(SPEC, 151, c.worker_suspend_gate),
        Check(SPEC, 163, c.v2_env_without_autoscaler),
        Check(SPEC, 172, c.worker_suspend_with_autoscaler),
        Check(SPEC, 177, c.autoscaler_version_and_env),
        Check(SPEC, 182, c.v2_head_restart_policy),
        Check(SPEC, 187, c.v2_worker_restart_policy),
    ),
)
