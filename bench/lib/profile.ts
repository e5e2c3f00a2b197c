/**
 * CPU profiles of a gateway run under `node --cpu-prof`: the profile is written when the
 * process exits, so a benchmark notes the time windows of its runs on the monotonic clock
 * (which the profile's timestamps share) and summarizes each window afterwards.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { summarizeProfile, type CpuProfile, type ProfileSummary } from '../cpuprofile.js';
import { log } from './report.js';

/** Now on the clock of .cpuprofile timestamps, µs. */
export function profileClockUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** The one profile in `dir` (after its process exited), also kept as `keepAs`. */
export function readProfile(dir: string, keepAs: string): CpuProfile {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`no .cpuprofile written in ${dir}`);
  const raw = readFileSync(join(dir, file), 'utf8');
  mkdirSync(join(keepAs, '..'), { recursive: true });
  writeFileSync(keepAs, raw);
  return JSON.parse(raw) as CpuProfile;
}

/** The samples within `window`, or the whole profile if none fall in it (noted on stderr). */
export function summarizeWindow(profile: CpuProfile, window: [number, number], label: string, top = 10): ProfileSummary {
  const summary = summarizeProfile(profile, window, top);
  if (summary.busyMs > 0) return summary;
  log(`  note: no samples of ${label} in its time window; summarizing the whole profile`);
  return summarizeProfile(profile, undefined, top);
}
