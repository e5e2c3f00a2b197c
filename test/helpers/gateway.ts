/**
 * Starts a real gateway on 127.0.0.1 with an ephemeral port, in this process, with a manual
 * clock and a log captured in memory (so tests can prove what is and is not written there).
 * The clock's timers (an open WebSocket's idle, expiry and close wait) fire only when the test
 * advances it. Closed in t.after.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { createServices, type Services } from '../../src/services.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from './clock.js';
import { demoSaveFile, webhookQueueFile } from './process.js';

export const DEMO = {
  alice: { apiKey: 'ak_demo_alice', secret: 'sk_demo_alice_secret', accountId: 'acct_alice', keyId: 'key_alice_1' },
  aliceDisabled: { apiKey: 'ak_demo_alice_disabled', secret: 'sk_demo_alice_disabled_secret', accountId: 'acct_alice', keyId: 'key_alice_off' },
  bob: { apiKey: 'ak_demo_bob', secret: 'sk_demo_bob_secret', accountId: 'acct_bob', keyId: 'key_bob_1' },
} as const;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** sha256:<hex SHA-256 of the 32-byte SHA-256 of the secret>, as src/state/data-file/data-file.ts stores it. */
export function storedDigest(secret: string): string {
  const clientHash = createHash('sha256').update(secret, 'utf8').digest();
  return `sha256:${createHash('sha256').update(clientHash).digest('hex')}`;
}

export interface TestGateway {
  url: string;
  /** The management listener's URL, when management.port is set. */
  managementUrl?: string;
  /** What startServer returned (the redirect listener, ACME challenges, certificates). */
  running?: RunningServer;
  clock: ManualClock;
  services: Services;
  /** Every log line written so far, raw JSON text. */
  logs: string[];
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Config settings over the defaults (deep-merged; arrays replace). */
  overrides?: Record<string, unknown>;
  clock?: ManualClock;
}

export async function startGateway(t: TestContext | undefined, { overrides = {}, clock = new ManualClock(Date.now()) }: GatewayOptions = {}): Promise<TestGateway> {
  const config = loadConfig({
    env: {},
    // Limits are off unless a test sets them: most suites sign in and call far faster than
    // the default quotas allow, and test something else (test/*/rate-limits* test the limits).
    // Changes made on the shipped demo data are saved to a file of this gateway's own, so no
    // test's changes reach another's (or the checkout's data/).
    // Redis commands get 5 s, not 500 ms (test/helpers/redis.ts, redisSettings, says why); tests
    // of a stalled Redis set their own.
    // The pool-thread nice value is left alone in process: this is the test runner's own pool,
    // whose file and DNS work must not yield to every other test on a busy machine (gateway
    // processes of their own keep the default; test/unit/owner-hash-nice.test.ts tests it).
    overrides: mergeDeep({ server: { host: '127.0.0.1', port: 0 }, log: { level: 'info' }, limits: { mode: 'off' }, owner: { passwordHashNice: 0 }, data: { demoSaveFile: demoSaveFile() }, webhooks: { queueFile: webhookQueueFile() }, redis: { commandTimeoutMs: 5000 } }, overrides),
  });
  const logs: string[] = [];
  const log = createLogger(config.log.level, { write: (line: string) => void logs.push(line) });
  const services = createServices(config, { log, clock });
  const running = await startServer(services);
  const gateway = { url: running.url, managementUrl: running.managementUrl, running, clock, services, logs, close: () => running.close() };
  t?.after(() => gateway.close());
  return gateway;
}

function mergeDeep(base: Record<string, unknown>, extra: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(extra)) {
    const b = out[k];
    out[k] = v !== null && typeof v === 'object' && !Array.isArray(v) && b !== null && typeof b === 'object' && !Array.isArray(b)
      ? mergeDeep(b as Record<string, unknown>, v as Record<string, unknown>)
      : v;
  }
  return out;
}

export interface JsonResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON body; undefined when there is none. */
  body: any;
}

/** fetch + JSON parse; the raw text is kept when it is not JSON so assertions can show it. */
export async function call(url: string, init: RequestInit & { token?: string } = {}): Promise<JsonResponse> {
  const headers = new Headers(init.headers);
  if (init.token !== undefined) headers.set('authorization', `Bearer ${init.token}`);
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = { unparsed: text };
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * /readyz, asked until it answers 200 or `limitMs` passes; its last answer either way. For tests
 * whose subject comes after "ready": on a loaded machine a store's first connection (TLS, a
 * short connect timeout, a Cluster's slots) may need a retry before the first write goes through.
 */
export async function untilReady(gw: { url: string }, limitMs = 15_000): Promise<JsonResponse> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const res = await call(`${gw.url}/readyz`);
    // 200 `degraded` (Redis down, readiness.requireRedis off) is not yet what a test waits for.
    if (res.body?.message?.status === 'ready' || Date.now() > deadline) return res;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function postJson(url: string, value: unknown, init: RequestInit = {}): Promise<JsonResponse> {
  return call(url, { ...init, method: 'POST', headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string>) }, body: JSON.stringify(value) });
}

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
}

/** Status and body of an answer, for assertion messages. */
export function show(res: JsonResponse): string {
  return `${res.status} ${JSON.stringify(res.body)}`;
}

/** Runs `fn` and says how long it took, in ms. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ res: T; ms: number }> {
  const started = performance.now();
  const res = await fn();
  return { res, ms: performance.now() - started };
}

/** Every line the in-process gateway has logged, parsed. */
export function logLines(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** What each running instance logs when it notices that Redis lost its data (a new epoch). */
export const DATA_LOST = 'redis lost the gateway\'s data (its epoch record was gone or replaced): access tokens issued before the new epoch are refused';

/**
 * Waits (bounded) until `gw` has noticed that Redis came back empty. Tokens it issues before
 * then may still carry the old epoch, and are refused once it notices (docs/redis.md): a test
 * that restarts Redis empty and signs in again waits for this first.
 */
export async function untilDataLossNoticed(gw: TestGateway, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (logged(gw, DATA_LOST).length === 0) {
    if (Date.now() > deadline) throw new Error(`the gateway did not notice Redis's data loss within ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The lines logged with this `msg`. */
export function logged(gw: TestGateway, msg: string): Record<string, unknown>[] {
  return logLines(gw).filter((line) => line.msg === msg);
}

/** The Prometheus text of GET /metrics; fails the test on anything but 200. */
export async function metricsText(gw: { url: string }): Promise<string> {
  const res = await fetch(`${gw.url}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

/** Signs in with a demo account and returns the pair; fails the test on anything else. */
export async function signIn(gateway: { url: string }, who: { apiKey: string; secret: string } = DEMO.alice): Promise<TokenPair> {
  const res = await postJson(`${gateway.url}/api/signin`, { apiKey: who.apiKey, apiSecret: sha256Hex(who.secret) });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message as TokenPair;
}

/**
 * Sends bytes as they are over a fresh TCP connection and returns what came back before the
 * server closed it (or `waitMs` passed): for requests fetch refuses to send.
 */
export function rawRequest(url: string, payload: string, waitMs = 2000): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.write(payload);
  });
}

/** Status line and JSON body of the first response in a raw HTTP/1.1 answer. */
export function parseRawResponse(raw: string): { status: number; headers: string; body: any } {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, end);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
  const text = raw.slice(end + 4, end + 4 + length);
  let body: unknown;
  try { body = JSON.parse(text); } catch { body = { unparsed: text }; }
  return { status, headers: head, body };
}
