-- wrk script for a plain GET of the URL's path, counting answers other than 2xx ("bad"); used
-- by bench/tls.ts, over http:// and https:// alike. Prints one line "BENCHJSON {...}" at the end.

package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  ok, bad = 0, 0
end

function response(status)
  if status >= 200 and status <= 299 then ok = ok + 1 else bad = bad + 1 end
end

function done(summary, latency, requests)
  report(summary, latency, threads, {"ok", "bad"})
end
