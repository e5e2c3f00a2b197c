-- wrk script for GET <path> with a bearer token (used by bench/proxy.ts and bench/limits.ts).
-- Each request carries the next token of the file, in turn: a token comes back only after all
-- the others have been sent, so with more tokens than a cache of verified tokens holds, an LRU
-- cache never has the next one. The run starts after the token at <start> (0: the first) and
-- counts the tokens it sent ("sent"), so that the next run can go on where this one stopped.
-- Answers other than 2xx are counted here ("bad"): wrk's own count sees only 4xx and 5xx.
-- args: <file with one access token per line> <path> [<start>]
-- Prints one line "BENCHJSON {...}" at the end for the orchestrator.

-- report.lua sits beside this script.
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  tokens = {}
  for line in io.lines(args[1]) do
    if line ~= "" then tokens[#tokens + 1] = "Bearer " .. line end
  end
  if #tokens == 0 then error("no tokens in " .. args[1]) end
  path = args[2]
  headers = {}
  turn = (tonumber(args[3]) or 0) % #tokens
  ok, bad, sent = 0, 0, 0
end

function request()
  turn = turn % #tokens + 1
  sent = sent + 1
  headers["Authorization"] = tokens[turn]
  return wrk.format("GET", path, headers)
end

function response(status)
  if status >= 200 and status <= 299 then ok = ok + 1 else bad = bad + 1 end
end

function done(summary, latency, requests)
  report(summary, latency, threads, {"ok", "bad", "sent"})
end
