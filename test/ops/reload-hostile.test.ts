/**
 * Reload (SIGHUP) against a real gateway process whose config file an operator, a script or a
 * broken deploy has swapped for something else: garbage, binary, a huge file, a symlink to a
 * device that never ends (/dev/zero) or a FIFO no one writes, the file removed, a pemFile
 * swapped the same way; and a storm of 100 SIGHUPs. The gateway keeps serving on its running
 * configuration, says why in an error line, and writes no secret of the file in its log.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, signIn } from '../helpers/gateway.js';
import { startGatewayProcess, tempDir, type GatewayProcess, type LogLine } from '../helpers/process.js';

const RELOADED = 'configuration reloaded';
const FAILED = 'configuration reload failed: the running configuration stays in force';
const SECRET = 'LEAKsecret0123';

function linesOf(gw: GatewayProcess, msg: string): LogLine[] {
  return gw.logs().filter((line) => line.msg === msg);
}

async function sighup(gw: GatewayProcess, outcome: string, limitMs = 20_000): Promise<LogLine> {
  const before = linesOf(gw, outcome).length;
  assert.ok(gw.child.process.kill('SIGHUP'));
  for (let waited = 0; waited < limitMs; waited += 20) {
    const line = linesOf(gw, outcome)[before];
    if (line !== undefined) return line;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`no "${outcome}" line after SIGHUP\nstdout tail:\n${gw.child.stdout().slice(-2000)}\nstderr:\n${gw.child.stderr().slice(-2000)}`);
}

/** The gateway still serves its running configuration: the proxied route answers, a sign-in works. */
async function stillServing(gw: GatewayProcess, what: string): Promise<void> {
  const res = await fetch(`${gw.url}/things/x`, { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => assert.fail(`${what}: ${err.message}`));
  assert.equal(res.status, 200, `${what}: the route of the running configuration`);
  await res.arrayBuffer();
  assert.equal((await call(`${gw.url}/healthz`)).status, 200, what);
}

async function setUp(t: TestContext) {
  const dir = tempDir(t, 'gw-reload-hostile-');
  const backend = await startBackend(t);
  const file = join(dir, 'gateway.json');
  const pemFile = join(dir, 'key.pem');
  writeFileSync(pemFile, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), { mode: 0o600 });
  const good = {
    routes: [{ name: 'things', prefix: '/things', targets: [backend.url], auth: 'public' }],
    signing: { keys: [{ kid: 'k1', alg: 'EdDSA', pemFile }], activeKid: 'k1' },
  };
  writeFileSync(file, JSON.stringify(good));
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: file, LOG_LEVEL: 'info' }, { limitMs: 120_000 });
  await stillServing(gw, 'at start');
  return { dir, file, pemFile, gw, good };
}

test('a config file swapped for garbage, binary, a huge file, a device or a FIFO, or removed: the running configuration stays', async (t) => {
  const { dir, file, gw } = await setUp(t);
  const swaps: [string, () => void][] = [
    ['garbage with a secret', () => writeFileSync(file, `{"redis": {"url": "redis://:${SECRET}@x"}, "signing": {"keys": [{"pem": "-----BEGIN PRIVATE KEY-----\\n${SECRET}`)],
    ['binary', () => writeFileSync(file, Buffer.from([0, 0xff, 0xfe, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0]))],
    ['an empty file', () => writeFileSync(file, '')],
    ['a JSON array', () => writeFileSync(file, '[1,2,3]')],
    ['a valid file with a bad value holding a secret', () => writeFileSync(file, JSON.stringify({ redis: { url: `http://:${SECRET}@x` }, directory: { http: { token: 5 } } }))],
    ['64 MiB of spaces', () => writeFileSync(file, Buffer.alloc(64 * 1024 * 1024, 0x20))],
    ['removed', () => rmSync(file)],
    ['a symlink to a directory', () => { rmSync(file, { force: true }); symlinkSync(dir, file); }],
    ['a symlink to nowhere', () => { rmSync(file, { force: true }); symlinkSync(join(dir, 'nowhere.json'), file); }],
    ['a symlink to /dev/zero', () => { rmSync(file, { force: true }); symlinkSync('/dev/zero', file); }],
    ['a FIFO no one writes', () => { rmSync(file, { force: true }); execFileSync('mkfifo', [file]); }],
  ];
  for (const [what, swap] of swaps) {
    swap();
    const line = await sighup(gw, FAILED);
    assert.ok(Array.isArray(line.problems) && (line.problems as unknown[]).length > 0, `${what}: the problems are named`);
    await stillServing(gw, `after ${what}`);
  }
  const leaked = gw.child.stdout().split('\n').concat(gw.child.stderr().split('\n')).filter((l) => l.includes(SECRET));
  assert.deepEqual(leaked, [], 'no secret of the file in the log');
  assert.equal(gw.child.process.exitCode, null, 'still running');
});

test('a pemFile swapped for /dev/zero or a FIFO: the running keys stay', async (t) => {
  const { pemFile, gw } = await setUp(t);
  const before = await signIn(gw);
  for (const [what, swap] of [
    ['a symlink to /dev/zero', () => { rmSync(pemFile); symlinkSync('/dev/zero', pemFile); }],
    ['a FIFO', () => { rmSync(pemFile); execFileSync('mkfifo', [pemFile]); }],
  ] as [string, () => void][]) {
    swap();
    await sighup(gw, FAILED);
    await stillServing(gw, `after ${what}`);
    assert.ok((await signIn(gw)).accessToken.length > 0 && before.accessToken.length > 0, what);
  }
});

test('100 SIGHUPs at once: the gateway keeps serving, and a last reload still works', async (t) => {
  const { file, gw, good } = await setUp(t);
  for (let i = 0; i < 100; i++) gw.child.process.kill('SIGHUP');
  await stillServing(gw, 'during the storm');
  writeFileSync(file, JSON.stringify({ ...good, routes: [...good.routes, { name: 'more', prefix: '/more', targets: good.routes[0]!.targets, auth: 'public' }] }));
  await sighup(gw, RELOADED);
  assert.equal((await fetch(`${gw.url}/more/x`)).status, 200, 'the last reload is in force');
  await stillServing(gw, 'after the storm');
  assert.equal(gw.child.process.exitCode, null, 'still running');
});
