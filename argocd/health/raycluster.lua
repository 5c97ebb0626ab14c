-- Argo CD health check for ray.io/RayCluster, shipped by raygitops.
-- argocd-cm key: resource.customizations.health.ray.io_RayCluster (argocd/argocd-cm-health.yaml
-- is generated from this file: python3 argocd/health/generate.py).
--
-- Runs in Argo CD's Lua VM (gopher-lua, Lua 5.1) with only the base, table and a safe os
-- library: no string library, so no string methods here. Inputs (KubeRay >= 1.1; conditions
-- need the RayClusterStatusConditions gate, on by default since KubeRay 1.3; older operators
-- only report status.state):
--   spec.suspend, status.state, status.reason, status.observedGeneration,
--   status.readyWorkerReplicas / desiredWorkerReplicas, conditions RayClusterProvisioned,
--   HeadPodReady, ReplicaFailure, RayClusterSuspending, RayClusterSuspended,
--   annotation raygitops.dev/recreate (the raygitops PreSync hook's recreate lock) and
--   raygitops.dev/last-recreate-outcome (Completed | Unverified | Failed).
-- Order: failure -> raygitops recreate -> failed recreate -> stale status -> suspend/resume
--   -> ready -> pending.

local RECREATE = "raygitops.dev/recreate"
local OUTCOME = "raygitops.dev/last-recreate-outcome"

local metadata = obj.metadata or {}
local annotations = metadata.annotations or {}
local spec = obj.spec or {}
local status = obj.status or {}

local function condition(kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function isTrue(c)
  return c ~= nil and c.status == "True"
end

local function nonEmpty(text)
  return text ~= nil and text ~= ""
end

-- "<reason>: <message>" of a condition, whichever parts are set.
local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  if nonEmpty(c.reason) and nonEmpty(c.message) then
    return c.reason .. ": " .. c.message
  end
  if nonEmpty(c.message) then
    return c.message
  end
  if nonEmpty(c.reason) then
    return c.reason
  end
  return fallback
end

local function workers()
  local ready = status.readyWorkerReplicas or 0
  local desired = status.desiredWorkerReplicas or 0
  return tostring(ready) .. "/" .. tostring(desired) .. " workers ready"
end

local function result(health, message)
  return { status = health, message = message }
end

local function check()
  local provisioned = condition("RayClusterProvisioned")
  local headReady = condition("HeadPodReady")
  local replicaFailure = condition("ReplicaFailure")
  local suspending = condition("RayClusterSuspending")
  local suspended = condition("RayClusterSuspended")

  -- 1. Failure states: the operator cannot make the cluster run.
  if status.state == "failed" then
    local why = "status.state is failed"
    if nonEmpty(status.reason) then
      why = why .. ": " .. status.reason
    end
    return result("Degraded", "RayCluster failed (" .. why .. ")")
  end
  if isTrue(replicaFailure) then
    return result("Degraded", "Pods cannot be created (ReplicaFailure: "
      .. describe(replicaFailure, "no reason given") .. ")")
  end

  -- 2. raygitops is recreating the pods: the suspend is its own and it resumes the cluster.
  local lock = annotations[RECREATE]
  if lock ~= nil then
    return result("Progressing", "raygitops is recreating the pods to apply a new template "
      .. "(suspend, drain, resume); " .. RECREATE .. ": " .. tostring(lock))
  end

  -- 2b. The last raygitops recreate failed (its new pods were not Ready in time) and they
  -- still are not: never Healthy, whatever a status kept from before the suspend says.
  if annotations[OUTCOME] == "Failed" then
    local ready = status.readyWorkerReplicas or 0
    local desired = status.desiredWorkerReplicas or 0
    if ready < desired or (headReady ~= nil and not isTrue(headReady)) then
      return result("Degraded", "The last raygitops recreate failed: the new pods are not ready ("
        .. workers() .. "); fix the template and sync again")
    end
  end

  -- 3. The operator has not reconciled the latest spec yet.
  if status.observedGeneration ~= nil and metadata.generation ~= nil
      and status.observedGeneration < metadata.generation then
    return result("Progressing", "Waiting for the KubeRay operator to observe generation "
      .. tostring(metadata.generation) .. " (status is from generation "
      .. tostring(status.observedGeneration) .. ")")
  end

  -- 4. Suspend and resume.
  local isSuspended = isTrue(suspended) or (suspended == nil and status.state == "suspended")
  if spec.suspend == true then
    if isSuspended and not isTrue(suspending) then
      return result("Suspended", "RayCluster is suspended (spec.suspend: true): all its pods are deleted")
    end
    return result("Progressing", "Suspending (spec.suspend: true): deleting the pods")
  end
  if isTrue(suspending) then
    return result("Progressing", "Suspending: deleting the pods before the cluster resumes")
  end
  if isSuspended then
    return result("Progressing", "Resuming: creating the pods (" .. workers() .. ")")
  end

  -- 5. Ready.
  if provisioned ~= nil then
    if isTrue(provisioned) then
      if headReady ~= nil and not isTrue(headReady) then
        return result("Degraded", "Head pod is not ready (HeadPodReady: "
          .. describe(headReady, "False") .. ")")
      end
      return result("Healthy", "RayCluster is ready: head pod ready, " .. workers())
    end
    return result("Progressing", "Pods are being created (RayClusterProvisioned: "
      .. describe(provisioned, "False") .. "; " .. workers() .. ")")
  end
  if status.state == "ready" then
    return result("Healthy", "RayCluster is ready (status.state: ready), " .. workers())
  end

  -- 6. Anything else: the operator is still working on it.
  if nonEmpty(status.state) then
    return result("Progressing", "Pods are being created (status.state: " .. status.state .. ")")
  end
  return result("Progressing", "Waiting for the KubeRay operator to report the cluster status")
end

return check()
