-- wrk script for GET <path> with a bearer token (used by bench/proxy.ts).
-- Each request carries the next token of the file, in turn, so that a verifier cannot answer
-- from a cache of recent tokens: a token comes back only after all the others have been sent.
-- Answers other than 2xx are counted here ("bad"): wrk's own count sees only 4xx and 5xx.
-- args: <file with one access token per line> <path>
-- Prints one line "BENCHJSON {...}" at the end for the orchestrator.

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
  turn = 0
  ok, bad = 0, 0
end

function request()
  turn = turn % #tokens + 1
  headers["Authorization"] = tokens[turn]
  return wrk.format("GET", path, headers)
end

function response(status)
  if status >= 200 and status <= 299 then ok = ok + 1 else bad = bad + 1 end
end

function done(summary, latency, requests)
  local ok_total, bad_total = 0, 0
  for _, t in ipairs(threads) do
    ok_total = ok_total + (t:get("ok") or 0)
    bad_total = bad_total + (t:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%.0f,"duration_us":%.0f,"status_errors":%.0f,"connect_errors":%.0f,' ..
    '"read_errors":%.0f,"write_errors":%.0f,"timeouts":%.0f,"p50_us":%.0f,"p90_us":%.0f,' ..
    '"p99_us":%.0f,"max_us":%.0f,"mean_us":%.1f,"ok":%.0f,"bad":%.0f,"starved":-1}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    ok_total, bad_total))
end
