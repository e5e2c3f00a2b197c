-- The one line every wrk script here prints at the end, "BENCHJSON {...}", read by
-- bench/lib/wrk.ts. `counters` names the per-thread counters the script keeps ("ok", "bad",
-- "starved", "sent"), summed over `threads`; a counter the script does not keep is written as -1.
return function(summary, latency, threads, counters)
  local totals = { ok = -1, bad = -1, starved = -1, sent = -1 }
  for _, name in ipairs(counters) do
    local sum = 0
    for _, t in ipairs(threads) do sum = sum + (t:get(name) or 0) end
    totals[name] = sum
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%.0f,"duration_us":%.0f,"status_errors":%.0f,"connect_errors":%.0f,' ..
    '"read_errors":%.0f,"write_errors":%.0f,"timeouts":%.0f,"p50_us":%.0f,"p90_us":%.0f,' ..
    '"p99_us":%.0f,"max_us":%.0f,"mean_us":%.1f,"ok":%.0f,"bad":%.0f,"starved":%.0f,"sent":%.0f}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    totals.ok, totals.bad, totals.starved, totals.sent))
end
