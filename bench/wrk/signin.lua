-- wrk script for POST /api/signin (used by bench/auth.ts).
-- Every request is the same sign-in; args: <JSON body>.
-- Prints one line "BENCHJSON {...}" at the end for the orchestrator.

function init(args)
  wrk.method = "POST"
  wrk.body = args[1]
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%.0f,"duration_us":%.0f,"status_errors":%.0f,"connect_errors":%.0f,' ..
    '"read_errors":%.0f,"write_errors":%.0f,"timeouts":%.0f,"p50_us":%.0f,"p90_us":%.0f,' ..
    '"p99_us":%.0f,"max_us":%.0f,"mean_us":%.1f,"ok":-1,"bad":-1,"starved":-1}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
