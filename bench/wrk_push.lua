-- bench/wrk_push.lua: wrk posts the files named after "--" in turn, one
-- per request, to the URL's path (bench/serve.sh: pprof files to
-- /api/v1/import). Each thread reads them all once at start.
local bodies = {}
local i = 0

function init(args)
  for _, path in ipairs(args) do
    local f = assert(io.open(path, "rb"))
    bodies[#bodies + 1] = f:read("*a")
    f:close()
  end
end

function request()
  i = i % #bodies + 1
  return wrk.format("POST", nil,
                    { ["Content-Type"] = "application/octet-stream" },
                    bodies[i])
end
