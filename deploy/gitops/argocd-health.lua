-- Argo CD health check for KubeFed's federated objects (types.kubefed.io/*),
-- as kubefedctl and KubeFed v0.10 write their status (docs/ci.md,
-- docs/reconcile.md). Lua 5.1 as Argo CD's gopher-lua runs it, with its
-- default libraries only (no `string`): base and `table`.
--
--   being deleted                          Progressing
--   no Propagation condition yet           Progressing
--   status.observedGeneration < generation Progressing (a newer spec, not propagated yet)
--   Propagation False, only copies going   Progressing (WaitingForRemoval, or not checked yet)
--   Propagation False otherwise            Degraded    (the reason and the failing members)
--   Ready False, MembersFailed             Degraded    (a copy will not become ready)
--   Ready False or Unknown                 Progressing (copies not ready yet, or not checked)
--   Propagation True (and Ready True)      Healthy
hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

-- "m1: CreationFailed, m2: ClusterNotReady", and whether any is more than
-- a copy still going (WaitingForRemoval).
local function failing(status)
  local text = ""
  local worse = false
  if status.clusters == nil then
    return text, worse
  end
  for _, c in ipairs(status.clusters) do
    if c.status ~= nil and c.status ~= "" then
      if text ~= "" then
        text = text .. ", "
      end
      text = text .. c.name .. ": " .. c.status
      if c.status ~= "WaitingForRemoval" then
        worse = true
      end
    end
  end
  return text, worse
end

local function placed(status)
  local n = 0
  if status.clusters ~= nil then
    for _ in ipairs(status.clusters) do
      n = n + 1
    end
  end
  return n
end

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Being deleted: waiting for its member copies to go"
  return hs
end

local status = obj.status
local propagation = condition(status, "Propagation")
if propagation == nil then
  hs.status = "Progressing"
  hs.message = "Not propagated yet"
  return hs
end

local generation = obj.metadata.generation
local observed = status.observedGeneration
if observed == nil then
  observed = 0
end
if generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Generation " .. generation .. " not propagated yet (propagated: " .. observed .. ")"
  return hs
end

if propagation.status ~= "True" then
  local reason = propagation.reason
  if reason == nil or reason == "" then
    reason = "Unknown"
  end
  local clusters, worse = failing(status)
  if reason == "CheckClusters" and not worse then
    hs.status = "Progressing"
    if clusters == "" then
      hs.message = "Waiting for the member clusters to be checked"
    else
      hs.message = "Waiting for member copies to go: " .. clusters
    end
    return hs
  end
  hs.status = "Degraded"
  hs.message = "Propagation failed (" .. reason .. ")"
  if clusters ~= "" then
    hs.message = hs.message .. ": " .. clusters
  end
  return hs
end

local ready = condition(status, "Ready")
if ready ~= nil and ready.status ~= "True" then
  local reason = ready.reason
  if reason == nil or reason == "" then
    reason = "Unknown"
  end
  if ready.status == "False" and reason == "MembersFailed" then
    hs.status = "Degraded"
    hs.message = "A member copy will not become ready (" .. reason .. "); kubefedctl reconcile --wait-ready names it"
  else
    hs.status = "Progressing"
    hs.message = "Member copies not ready yet (" .. reason .. ")"
  end
  return hs
end

hs.status = "Healthy"
if ready ~= nil then
  hs.message = "Propagated to and ready in " .. placed(status) .. " member cluster(s)"
else
  hs.message = "Propagated to " .. placed(status) .. " member cluster(s)"
end
return hs
