-- Argo CD health check of a tensorcast.io TensorShardSet (resource.customizations.health).
-- Healthy: Ready=True for the current generation (every rank file complete on its node).
-- Degraded: phase Failed (an invalid spec or rules that do not fit the tensors, a ModelArtifact
-- that failed, not enough memory) or a Stalled=True condition. Progressing: anything else, with the
-- Ready condition's reason and message (waiting for the ModelArtifact, resolving, loading ranks).
local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    if text ~= "" then
      text = text .. ": "
    end
    text = text .. c.message
  end
  if text == "" then
    return fallback
  end
  return text
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local conditions = obj.status.conditions
local ready = condition(conditions, "Ready")
local stalled = condition(conditions, "Stalled")

if obj.status.phase == "Failed" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  hs.message = describe(stalled ~= nil and stalled.status == "True" and stalled or ready, "Failed")
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Phase " .. tostring(obj.status.phase or "unknown"))
return hs
