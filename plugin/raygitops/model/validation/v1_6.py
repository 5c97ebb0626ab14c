"""ray-operator v1.6.2's ``ValidateRayClusterSpec`` (``controllers/ray/utils/validation.go``,
lines 102-270, with ``validateRayGroupResources``, ``validateRayGroupLabels`` and
``validateWorkerGroupIdleTimeout``) and ``ValidateRayClusterUpgradeOptions`` (lines 41-56),
in the order the reconciler runs them (``rayClusterReconcile``); the feature gates on by
default (``pkg/features/features.go``: RayClusterStatusConditions, RayJobDeletionPolicy,
RayMultiHostIndexing).  The minReplicas/maxReplicas presence check (line 125) never fires on a
stored cluster (the CRD defaults both) and is left out."""

from __future__ import annotations

from raygitops.model.validation import Check, EachWorker, Head, Port, group_checks
from raygitops.model.validation import checks as c

SPEC = "ValidateRayClusterSpec"
GROUP = group_checks(resources=65, labels_in_params=73, label_syntax=82)

PORT = Port(
    tag="v1.6.2",
    gates=frozenset({"RayClusterStatusConditions", "RayJobDeletionPolicy", "RayMultiHostIndexing"}),
    steps=(
        Head((Check(SPEC, 104, c.head_has_container), *GROUP)),
        EachWorker((
            Check(SPEC, 119, c.worker_has_container),
            Check(SPEC, 128, c.replicas_not_negative_min),
            Check(SPEC, 131, c.replicas_not_negative_max),
            Check(SPEC, 135, c.replicas_ordered),
            *GROUP,
            Check("validateWorkerGroupIdleTimeout", 737, c.idle_timeout_not_negative),
            Check("validateWorkerGroupIdleTimeout", 750, c.idle_timeout_needs_v2),
        )),
        Check(SPEC, 150, c.ft_annotation_and_options),
        Check(SPEC, 156, c.redis_address_without_ft),
        Check(SPEC, 165, c.ft_redis_password_param),
        Check(SPEC, 170, c.ft_redis_password_env),
        Check(SPEC, 175, c.ft_redis_address_env),
        Check(SPEC, 180, c.ft_storage_namespace_annotation),
        Check(SPEC, 185, c.redis_username),
        Check(SPEC, 192, c.worker_suspend_gate),
        Check(SPEC, 201, c.v2_env_without_autoscaler),
        Check(SPEC, 210, c.worker_suspend_with_autoscaler),
        Check(SPEC, 215, c.autoscaler_version_and_env),
        Check(SPEC, 220, c.v2_head_restart_policy),
        Check(SPEC, 225, c.v2_worker_restart_policy),
        Check(SPEC, 234, c.autoscaler_idle_timeout_not_negative),
        Check(SPEC, 240, c.token_needs_ray_version),
        Check(SPEC, 245, c.token_ray_version_format),
        Check(SPEC, 251, c.token_min_ray_version),
        Check(SPEC, 257, c.k8s_token_min_ray_version),
        Check(SPEC, 260, c.k8s_token_and_secret),
        Check(SPEC, 265, c.k8s_token_needs_token_mode),
        Check("ValidateRayClusterUpgradeOptions", 52, c.upgrade_strategy_on_owned_cluster),
    ),
)
