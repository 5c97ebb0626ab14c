"""ray-operator v1.5.0's ``ValidateRayClusterSpec`` (``controllers/ray/utils/validation.go``,
lines 83-193, with ``validateRayGroupResources`` and ``validateRayGroupLabels``), in its
order; the feature gates on by default (``pkg/features/features.go``: RayClusterStatusConditions
only: a suspended worker group needs RayJobDeletionPolicy, off)."""

from __future__ import annotations

from raygitops.model.validation import Check, EachWorker, Head, Port
from raygitops.model.validation import checks as c

SPEC = "ValidateRayClusterSpec"

PORT = Port(
    tag="v1.5.0",
    gates=frozenset({"RayClusterStatusConditions"}),
    steps=(
        Head((
            Check(SPEC, 85, c.head_has_container),
            Check("validateRayGroupResources", 46, c.group_resources),
            Check("validateRayGroupLabels", 54, c.group_labels_in_params),
            Check("validateRayGroupLabels", 63, c.group_label_syntax),
        )),
        EachWorker((
            Check(SPEC, 97, c.worker_has_container),
            Check("validateRayGroupResources", 46, c.group_resources),
            Check("validateRayGroupLabels", 54, c.group_labels_in_params),
            Check("validateRayGroupLabels", 63, c.group_label_syntax),
        )),
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
