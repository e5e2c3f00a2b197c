/**
 * Summaries of a V8 .cpuprofile (as written by `node --cpu-prof`): where the samples of a time
 * window went, by function (self time), by area (a package, a Node subsystem, a gateway source
 * file) and, for the gateway's own functions, inclusive time. Used by the benchmarks' --profile;
 * also runnable on its own:
 *
 *   node --import tsx bench/cpuprofile.ts <file.cpuprofile> [top]
 */
import { readFileSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  /** µs, on the monotonic clock (process.hrtime in any process of the machine). */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Share {
  name: string;
  ms: number;
  /** Of the samples in the window, idle excluded. */
  percent: number;
}

export interface ProfileSummary {
  /** Busy time sampled in the window (idle excluded), ms. */
  busyMs: number;
  idleMs: number;
  selfByFunction: Share[];
  selfByArea: Share[];
  /** Inclusive time of the gateway's own functions (its src/ or built dist/ files). */
  inclusiveGateway: Share[];
}

/** `window`: [from, to] in µs on the profile's clock; samples outside it are ignored. */
export function summarizeProfile(profile: CpuProfile, window?: [number, number], top = 15): ProfileSummary {
  const { byId, parent } = indexNodes(profile);
  const self = new Map<string, number>();
  const area = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  forEachSample(profile, byId, window, (node, weight) => {
    const frame = node.callFrame;
    if (frame.functionName === '(idle)') {
      idle += weight;
      return;
    }
    busy += weight;
    add(self, functionLabel(frame), weight);
    add(area, areaOf(frame), weight);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (!isGatewayFile(f.url)) continue;
      const label = functionLabel(f);
      if (seen.has(label)) continue;
      seen.add(label);
      add(inclusive, label, weight);
    }
  });
  const shares = (m: Map<string, number>): Share[] => [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, us]) => ({ name, ms: us / 1000, percent: busy === 0 ? 0 : (100 * us) / busy }));
  return { busyMs: busy / 1000, idleMs: idle / 1000, selfByFunction: shares(self), selfByArea: shares(area), inclusiveGateway: shares(inclusive) };
}

/**
 * The share (%) of the window's busy samples with a frame that `match` picks anywhere on the
 * stack: what a part of the code costs with everything it calls, its callbacks included when
 * they run under its own frames.
 */
export function stackShare(profile: CpuProfile, window: [number, number] | undefined, match: (frame: CallFrame) => boolean): number {
  const { byId, parent } = indexNodes(profile);
  const hit = new Map<number, boolean>();
  const hits = (id: number): boolean => {
    let known = hit.get(id);
    if (known === undefined) {
      const up = parent.get(id);
      known = match(byId.get(id)!.callFrame) || (up !== undefined && hits(up));
      hit.set(id, known);
    }
    return known;
  };
  let busy = 0;
  let matched = 0;
  forEachSample(profile, byId, window, (node, weight) => {
    if (node.callFrame.functionName === '(idle)') return;
    busy += weight;
    if (hits(node.id)) matched += weight;
  });
  return busy === 0 ? 0 : (100 * matched) / busy;
}

/**
 * Issue 32's target 2, "access log, request metrics and the exchange": the gateway's exchange,
 * access-log and telemetry files, and the packages that make and write the line and the metric
 * (pino and its writer, prom-client), wherever on the stack.
 */
export function isRecordKeeping(frame: CallFrame): boolean {
  const { url } = frame;
  if (url.includes('/node_modules/')) return /\/node_modules\/(pino|pino-std-serializers|sonic-boom|thread-stream|quick-format-unescaped|fast-redact|on-exit-leak-free|prom-client|tdigest|bintrees)\//.test(url);
  return isGatewayFile(url) && /\/(http\/exchange|http\/middleware\/access-log|telemetry\/[^/]+)\.(ts|js)$/.test(url);
}

/** The profile's nodes by id, and each node's parent. */
function indexNodes(profile: CpuProfile): { byId: Map<number, ProfileNode>; parent: Map<number, number> } {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  return { byId, parent };
}

/** Each sample within `window` (all without one): its node, and its weight in µs. */
function forEachSample(profile: CpuProfile, byId: Map<number, ProfileNode>, window: [number, number] | undefined, visit: (node: ProfileNode, weight: number) => void): void {
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (window !== undefined && (t < window[0] || t > window[1])) continue;
    // A sample stands for the time until the next one.
    const weight = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    const node = byId.get(profile.samples[i]!);
    if (node !== undefined) visit(node, weight);
  }
}

function add(m: Map<string, number>, key: string, value: number): void {
  m.set(key, (m.get(key) ?? 0) + value);
}

function isGatewayFile(url: string): boolean {
  return /\/(src|dist)\/.*\.(ts|js)$/.test(url) && !url.includes('/node_modules/');
}

function shortUrl(url: string): string {
  if (url === '') return '';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) return url.slice(nm + '/node_modules/'.length);
  const src = url.search(/\/(src|dist)\//);
  if (src >= 0) return url.slice(src + 1).replace(/^bench\/results\//, '');
  return url.replace(/^file:\/\//, '');
}

function functionLabel(frame: CallFrame): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  if (frame.url === '') return name.startsWith('(') ? name : `${name} [native/builtin]`;
  return `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

/** A package, a Node subsystem, a gateway file, or V8's own buckets. */
function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') return functionName.startsWith('(') ? functionName : 'V8 builtins / native';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + '/node_modules/'.length).split('/');
    return `pkg ${parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  if (url.startsWith('node:')) {
    const path = url.slice('node:'.length).replace(/^internal\//, '');
    const first = path.split('/')[0]!.replace(/^_+/, '').split('_')[0]!;
    return `node ${first}`;
  }
  if (isGatewayFile(url)) return `gateway ${shortUrl(url).replace(/:\d+$/, '')}`;
  return shortUrl(url);
}

export function formatProfileSummary(title: string, s: ProfileSummary): string {
  const rows = (list: Share[]) => list.map((r) => `| ${r.percent.toFixed(1)} % | ${r.name.replaceAll('|', '\\|')} |`).join('\n');
  return [
    `**${title}**: ${s.busyMs.toFixed(0)} ms of samples on the CPU (${s.idleMs.toFixed(0)} ms idle).`,
    '',
    '| self | area |',
    '|---:|---|',
    rows(s.selfByArea),
    '',
    '| self | function |',
    '|---:|---|',
    rows(s.selfByFunction),
    '',
    '| inclusive | gateway function |',
    '|---:|---|',
    rows(s.inclusiveGateway),
  ].join('\n');
}

async function main(): Promise<void> {
  const [file, top] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write('usage: node --import tsx bench/cpuprofile.ts <file.cpuprofile> [top]\n');
    process.exitCode = 2;
    return;
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  process.stdout.write(`${formatProfileSummary(file, summarizeProfile(profile, undefined, Number(top ?? 15)))}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) await main();
