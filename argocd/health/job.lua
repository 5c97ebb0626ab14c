-- Argo CD health check for batch/Job, shipped by raygitops (argocd-cm key
-- resource.customizations.health.batch_Job; argocd/argocd-cm-health.yaml is generated from
-- this file: python3 argocd/health/generate.py).
--
-- Argo CD's built-in Job rule (gitops-engine pkg/health/health_job.go, v3.6), unchanged for
-- every Job, plus one thing: a failed Job that carries the annotation raygitops.dev/failure
-- (written by the raygitops PreSync hook before it exits) shows that one-line reason, so the
-- sync operation says why the hook failed, not only "Job has reached the specified backoff
-- limit". Argo CD judges hook Jobs with this check too.

local FAILURE = "raygitops.dev/failure"

local status = obj.status or {}
local failed, complete, suspended = false, false, false
local message, failMessage = "", ""
for _, c in ipairs(status.conditions or {}) do
  if c.type == "Failed" then
    failed, complete = true, true
    failMessage = c.message or ""
  elseif c.type == "Complete" then
    complete = true
    message = c.message or ""
  elseif c.type == "Suspended" then
    complete = true
    message = c.message or ""
    if c.status == "True" then
      suspended = true
    end
  end
end

if not complete then
  return { status = "Progressing", message = message }
end
if failed then
  local annotations = (obj.metadata or {}).annotations or {}
  local reason = annotations[FAILURE]
  if reason ~= nil and reason ~= "" then
    if failMessage ~= "" then
      failMessage = reason .. " (" .. failMessage .. ")"
    else
      failMessage = reason
    end
  end
  return { status = "Degraded", message = failMessage }
end
if suspended then
  return { status = "Suspended", message = message }
end
return { status = "Healthy", message = message }
