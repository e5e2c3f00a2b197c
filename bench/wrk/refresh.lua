-- wrk script for POST /api/refresh (used by bench/auth.ts).
-- Refresh tokens are single use, so each request must carry a token from an earlier answer.
-- Each wrk thread keeps a pool of live chain heads: request() takes one, response() puts the
-- successor from the answer back. Every token is presented exactly once, and a connection
-- only sends its next request after its answer arrived, so no chain ever has two requests in
-- flight. The pool starts with more tokens than connections (wrk also calls request() once
-- up front to check the script, which uses one up without sending it).
-- args: <file with one refresh token per line> <number of wrk threads>

-- report.lua sits beside this script.
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  pool = {}
  ok, bad, starved = 0, 0, 0
  local n = tonumber(args[2])
  local i = 0
  for line in io.lines(args[1]) do
    if line ~= "" then
      if i % n == id then pool[#pool + 1] = line end
      i = i + 1
    end
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local token = table.remove(pool)
  if token == nil then
    -- Only if answers failed faster than chains could continue: sent anyway, answered 401.
    starved = starved + 1
    token = "starved.starved"
  end
  return wrk.format("POST", "/api/refresh", nil, '{"refreshToken":"' .. token .. '"}')
end

function response(status, headers, body)
  if status == 200 then
    local token = string.match(body, '"refreshToken":"([^"]+)"')
    if token then
      pool[#pool + 1] = token
      ok = ok + 1
      return
    end
  end
  bad = bad + 1
end

function done(summary, latency, requests)
  report(summary, latency, threads, {"ok", "bad", "starved"})
end
