-- wrk script for POST /api/signin (used by bench/auth.ts).
-- Every request is the same sign-in; args: <JSON body>.
-- Prints one line "BENCHJSON {...}" at the end for the orchestrator.

-- report.lua sits beside this script.
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")

function init(args)
  wrk.method = "POST"
  wrk.body = args[1]
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  report(summary, latency, {}, {})
end
