"""Every annotation, label and marker name raygitops reads or writes, in one place.

raygitops' own keys live under ``raygitops.dev/``; KubeRay's (``ray.io/``) are the ones its
operator puts on pods and RayClusters, which the hook reads.
"""

from __future__ import annotations

ANNOTATION_PREFIX = "raygitops.dev/"  # every key of raygitops' own (left out of the template hash)

# --- opt-in and strategy (the user writes them on a RayCluster) ------------------------------
STRATEGY_ANNOTATION = "raygitops.dev/upgrade-strategy"
MAX_UNAVAILABLE_ANNOTATION = "raygitops.dev/max-unavailable"
MAX_UNAVAILABLE_BY_GROUP_ANNOTATION = "raygitops.dev/max-unavailable-by-group"  # "gpu=1, cpu=50%"
TRACK_ANNOTATION = "raygitops.dev/hash-config"  # "false": this cluster's config is not hashed
RUNNING_JOBS_ANNOTATION = "raygitops.dev/running-jobs"  # wait | fail | proceed (model/jobs.py)
RUNNING_JOBS_WAIT_ANNOTATION = "raygitops.dev/running-jobs-wait-seconds"  # the wait's bound
PREFLIGHT_ANNOTATION = "raygitops.dev/preflight"  # "false": no preflight (model/preflight.py)
PREFLIGHT_UNKNOWN_ANNOTATION = "raygitops.dev/preflight-unknown"  # fail | proceed

# --- hashes (render stamps them on group templates and on the RayCluster) --------------------
HASH_ANNOTATION = "raygitops.dev/template-hash"
HASHES_ANNOTATION = "raygitops.dev/template-hashes"
CONFIG_HASH_ANNOTATION = "raygitops.dev/config-hash"
SECRET_HASH_ANNOTATION = "raygitops.dev/secret-hash"

# --- the hook's state on the live RayCluster (render refuses them in its input) --------------
LOCK_ANNOTATION = "raygitops.dev/recreate"
LAST_ANNOTATION = "raygitops.dev/last-recreate"
# The last recreate's outcome alone, as a plain string: Argo CD's Lua health check has no
# JSON (nor string) library to read it from LAST_ANNOTATION.
OUTCOME_ANNOTATION = "raygitops.dev/last-recreate-outcome"
# The app whose hook claimed the RayCluster (its ARGOCD_APP_NAME or --app-name): another app's
# hook that finds its own plan listing it fails closed (presync.claims).
CLAIM_ANNOTATION = "raygitops.dev/claimed-by"
HOOK_OWNED_ANNOTATIONS = (LOCK_ANNOTATION, LAST_ANNOTATION, OUTCOME_ANNOTATION, CLAIM_ANNOTATION)
# On the hook's Job when a run fails: its reason, one line (argocd/health/job.lua shows it).
FAILURE_ANNOTATION = "raygitops.dev/failure"

# --- the hook objects render appends -----------------------------------------------------------
HOOK_LABEL = ("app.kubernetes.io/managed-by", "raygitops")
APP_LABEL = "raygitops.dev/app"  # the app's key (model.hooknames.app_key) when the app is known

# --- KubeRay's --------------------------------------------------------------------------------
CLUSTER_LABEL = "ray.io/cluster"  # on every pod of a RayCluster
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"
HEAD_GROUP = "headgroup"  # the head's ray.io/group on operators without ray.io/node-type
ORIGIN_LABEL = "ray.io/originated-from-crd"  # a cluster a RayJob or RayService (or RayCronJob) made
NATIVE_HASH_ANNOTATION = "ray.io/upgrade-strategy-recreate-hash"  # KubeRay >= 1.6, on the head pod
KUBERAY_VERSION_ANNOTATION = "ray.io/kuberay-version"  # KubeRay >= 1.6, on pods
# RayCluster annotations KubeRay's pod builder reads (GCS fault tolerance, the container command)
FT_ANNOTATION = "ray.io/ft-enabled"
STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
OVERWRITE_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"

# --- files --------------------------------------------------------------------------------------
OUT_MARKER = ".raygitops-out"  # in a directory `raygitops render --output-dir` manages
