/**
 * The client as a product: the tarball `npm pack` makes holds the built ESM and its
 * declarations and nothing of the sources, and once installed into a fresh project (offline:
 * the package has no dependency) both entry points import on Node 24 and on Node 20, the
 * oldest Node the package supports. On Node 20 the installed package also signs in, reads a
 * sign record and a page of roles from a real gateway, since Node 20 lacks platform pieces
 * (AbortSignal.any, Promise.withResolvers) that Node 24 code could lean on without noticing.
 *
 * Node 20: CLIENT_NODE20 names its binary (.ci/run provisions it into .ci/.node20). In CI its
 * absence fails; elsewhere the test looks in .ci/.node20 and at /usr/bin/node, and skips with
 * a visible message when no Node 20 is found.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { DEMO, call, logLines, signIn, startGateway } from '../helpers/gateway.js';
import { ROOT, tempDir } from '../helpers/process.js';

const run = promisify(execFile);
const PACKAGE_DIR = join(ROOT, 'packages/client');
const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';
const NPM_FLAGS = ['--offline', '--no-audit', '--no-fund', '--loglevel=error'];

async function nodeMajor(bin: string): Promise<number> {
  const { stdout } = await run(bin, ['-p', 'process.versions.node']);
  return Number(stdout.trim().split('.')[0]);
}

/** The Node 20 binary, or undefined when there is none (outside CI only). */
async function findNode20(): Promise<string | undefined> {
  const named = process.env.CLIENT_NODE20;
  if (named) {
    assert.equal(await nodeMajor(named), 20, `CLIENT_NODE20=${named} is not Node 20`);
    return named;
  }
  assert.ok(!process.env.CI, 'CI is set but CLIENT_NODE20 is not: .ci/run provisions Node 20 and exports it');
  for (const bin of [join(ROOT, '.ci/.node20/node_modules/node/bin/node'), '/usr/bin/node']) {
    if (existsSync(bin) && (await nodeMajor(bin)) === 20) return bin;
  }
  return undefined;
}

function skipLoudly(t: TestContext, why: string): void {
  process.stderr.write(`\n*** SKIPPED: ${t.name}: ${why} ***\n\n`);
  t.skip(why);
}

const PACK_DIR = mkdtempSync(join(tmpdir(), 'client-pack-'));
after(() => rmSync(PACK_DIR, { recursive: true, force: true }));
let packing: Promise<string> | undefined;

/**
 * What `npm pack --json` printed, packed once for the file into PACK_DIR: each pack runs the
 * package's build (tsc, seconds of CPU), and the tests only read the tarball.
 */
function pack(): Promise<string> {
  packing ??= run('npm', ['pack', '--json', '--loglevel=error', '--pack-destination', PACK_DIR], { cwd: PACKAGE_DIR }).then(({ stdout }) => stdout);
  return packing;
}

/** A fresh project (ESM) with `spec` installed, offline. */
async function freshProject(t: TestContext, spec: string): Promise<string> {
  const dir = tempDir(t, 'client-install-');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run('npm', ['install', ...NPM_FLAGS, '--cache', join(dir, '.npm-cache'), spec], { cwd: dir });
  return dir;
}

/** Imports both entry points; prints what they export. */
const IMPORT_SCRIPT = `
const main = await import('@auth-gateway/client');
const owner = await import('@auth-gateway/client/owner');
console.log(JSON.stringify({ node: process.versions.node, main: Object.keys(main).sort(), owner: Object.keys(owner).sort() }));
`;

/** Real work through the installed package against the gateway named in GATEWAY_URL. */
const WORK_SCRIPT = `
import { GatewayClient, NotFoundError } from '@auth-gateway/client';
const gateway = new GatewayClient({
  baseUrl: process.env.GATEWAY_URL,
  credentials: { apiKey: process.env.API_KEY, apiSecret: process.env.API_SECRET },
});
await gateway.signIn();
const record = await gateway.sign(process.env.ADDRESS);
const page = await gateway.roles({ page: 1, limit: 2 });
let missing;
try { await gateway.sign('0x' + '0'.repeat(40)); } catch (err) { missing = err instanceof NotFoundError ? err.code : String(err); }
console.log(JSON.stringify({ node: process.versions.node, record, page, missing }));
`;

test('npm pack: the tarball holds dist (ESM and declarations of both entry points), README.md and package.json, nothing else', async (t) => {
  const out = PACK_DIR;
  const stdout = await pack();
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(info && existsSync(join(out, info.filename)));
  const files = info.files.map((f) => f.path).sort();
  const stray = files.filter((p) => !p.startsWith('dist/') && p !== 'README.md' && p !== 'package.json' && p !== 'LICENSE');
  assert.deepEqual(stray, [], 'only dist, README.md, LICENSE and package.json are published');
  for (const needed of ['dist/index.js', 'dist/index.d.ts', 'dist/owner/index.js', 'dist/owner/index.d.ts', 'README.md', 'package.json', 'LICENSE']) {
    assert.ok(files.includes(needed), `${needed} is in the tarball`);
  }
  assert.ok(!files.some((p) => p.endsWith('.ts') && !p.endsWith('.d.ts')), 'no TypeScript source');
  assert.ok(!files.some((p) => p.endsWith('.d.ts.map')), 'no declaration map pointing at sources that are not shipped');
});

test('the README\'s quick start is examples/quick-start.ts, which the type check compiles', () => {
  const example = readFileSync(join(PACKAGE_DIR, 'examples/quick-start.ts'), 'utf8').trim();
  assert.equal(example.split('\n').length, 3);
  assert.ok(readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8').includes('```ts\n' + example + '\n```'));
});

test('the packed tarball installs offline into a fresh project, and both entry points import on Node 24 and Node 20', async (t) => {
  const out = PACK_DIR;
  const stdout = await pack();
  const tarball = join(out, (JSON.parse(stdout) as { filename: string }[])[0]!.filename);
  const project = await freshProject(t, tarball);
  writeFileSync(join(project, 'imports.mjs'), IMPORT_SCRIPT);
  const node20 = await findNode20();
  const binaries = [process.execPath, ...(node20 ? [node20] : [])];
  for (const bin of binaries) {
    const result = JSON.parse((await run(bin, ['imports.mjs'], { cwd: project })).stdout) as { node: string; main: string[]; owner: string[] };
    for (const name of ['GatewayClient', 'GatewayError', 'ApiError', 'AuthenticationError', 'RateLimitError', 'NetworkError', 'TimeoutError', 'AbortError', 'ConfigurationError']) {
      assert.ok(result.main.includes(name), `Node ${result.node}: @auth-gateway/client exports ${name}`);
    }
    assert.ok(result.owner.includes('OwnerClient'), `Node ${result.node}: @auth-gateway/client/owner exports OwnerClient`);
  }
  if (!node20) skipLoudly(t, 'no Node 20 found (set CLIENT_NODE20, or run .ci/run): only Node 24 was tried');
});

test('installed from the repository path, the package builds itself with the repository\'s TypeScript and imports', async (t) => {
  const project = await freshProject(t, PACKAGE_DIR);
  assert.ok(existsSync(join(PACKAGE_DIR, 'dist/index.d.ts')) && existsSync(join(PACKAGE_DIR, 'dist/owner/index.d.ts')));
  writeFileSync(join(project, 'imports.mjs'), IMPORT_SCRIPT);
  const result = JSON.parse((await run(process.execPath, ['imports.mjs'], { cwd: project })).stdout) as { main: string[]; owner: string[] };
  assert.ok(result.main.includes('GatewayClient') && result.owner.includes('OwnerClient'));
});

test('on Node 20 the installed package signs in, reads a sign record and a page of roles from a real gateway', async (t) => {
  const node20 = await findNode20();
  if (!node20) return skipLoudly(t, 'no Node 20 found (set CLIENT_NODE20, or run .ci/run)');
  const gw = await startGateway(t);
  // What the gateway answers by hand, to compare with what the client returns.
  const pair = await signIn(gw);
  const expectedRecord = await call(`${gw.url}/api/sign?address=${ADDRESS}`, { token: pair.accessToken });
  const expectedPage = await call(`${gw.url}/api/roles?page=1&limit=2`, { token: pair.accessToken });
  assert.equal(expectedRecord.status, 200);
  assert.equal(expectedPage.status, 200);

  const out = PACK_DIR;
  const stdout = await pack();
  const project = await freshProject(t, join(out, (JSON.parse(stdout) as { filename: string }[])[0]!.filename));
  writeFileSync(join(project, 'work.mjs'), WORK_SCRIPT);
  const env = { PATH: process.env.PATH, GATEWAY_URL: gw.url, API_KEY: DEMO.alice.apiKey, API_SECRET: DEMO.alice.secret, ADDRESS };
  const result = JSON.parse((await run(node20, ['work.mjs'], { cwd: project, env })).stdout) as Record<string, unknown>;
  assert.match(String(result.node), /^20\./);
  assert.deepEqual(result.record, expectedRecord.body.message);
  assert.deepEqual(result.page, expectedPage.body.message);
  assert.equal(result.missing, 'sign_record_not_found');
  // The client signed in with the hash, never the plain secret (the gateway refuses the plain one).
  const signins = logLines(gw).filter((l) => l.msg === 'request' && l.path === '/api/signin' && l.status === 200);
  assert.equal(signins.length, 2, 'one sign-in by hand, one by the client');
});
