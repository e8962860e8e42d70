-- Argo CD health check of a tensorcast.io ModelArtifact (resource.customizations.health).
-- Healthy: Ready=True for the current generation. Degraded: phase Failed (or a Stalled=True
-- condition: a failure that needs a spec or source change), or Degraded=True (a copy that was
-- Ready was lost and is being reloaded). Progressing: anything else, with the Ready condition's
-- reason and message (resolving, scheduling, loading, retrying an unavailable source).
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
local degraded = condition(conditions, "Degraded")

if obj.status.phase == "Failed" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  hs.message = describe(stalled ~= nil and stalled.status == "True" and stalled or ready, "Failed")
  return hs
end

if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded, "A replica was lost")
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  if obj.status.ready ~= nil then
    hs.message = hs.message .. " (" .. obj.status.ready .. " ready)"
  end
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Phase " .. tostring(obj.status.phase or "unknown"))
return hs
