/**
 * The Docker image, reproduced on a machine without a container engine: the Dockerfile is read
 * (test/helpers/dockerfile.ts) and each stage replayed in a directory of its own standing for
 * /app. COPY takes the files git tracks (what a clean clone's build context holds) or the build
 * stage's output; RUN steps are replayed only from a known list (a new kind fails here until it
 * is taught), with npm reading this machine's cache first; ENV, USER, CMD and HEALTHCHECK are
 * honoured. The runtime stage then runs as `nobody` (standing for the image's `node` user) with
 * the image's and compose.yaml's environment and config/compose.json, whose container addresses
 * are swapped for a real redis-server (started with compose's Redis arguments), the example
 * backend of examples/backend and a key made by the compose key script.
 *
 * One install serves every subtest; npm is the slow part (about a minute on a loaded machine).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, posix, relative } from 'node:path';
import { test, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { parse } from 'yaml';

import { readDockerfile, type Stage } from '../helpers/dockerfile.js';
import { exitWithin, LISTENING, logLines, ROOT, tempDir, startChild, waitForLog, type Child } from '../helpers/process.js';
import { freePort, redisSuite, startRedis } from '../helpers/redis.js';

const run = promisify(execFile);

/** `nobody`: stands for the image's `node` user (an unprivileged uid owning nothing but data/). */
const NOBODY = 65534;
/** The whole test, npm included, on a shared and loaded machine. */
const LIMIT_MS = 240_000;
/** One npm step. */
const NPM_LIMIT_MS = 150_000;
/** The image's working directory, which each stage's directory stands for. */
const APP = '/app';

interface Built {
  dir: string;
  env: Record<string, string>;
  user: string | undefined;
  command: string[] | undefined;
  healthcheck: string[] | undefined;
}

/**
 * How this machine reaches the registry (its CA bundle, a proxy), for a package missing from
 * npm's cache: a container build has its own network, the steps here have only this one.
 */
function networkEnv(): Record<string, string> {
  const names = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];
  return Object.fromEntries(names.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]])));
}

/** This machine's Node 24 first (npm scripts and the gateway need it), then the system's tools. */
const PATH = `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

/** The files git tracks under `path`, relative to the repository. */
async function tracked(path: string): Promise<string[]> {
  const { stdout } = await run('git', ['ls-files', '-z', '--', path], { cwd: ROOT, maxBuffer: 64 << 20 });
  return stdout.split('\0').filter((file) => file !== '');
}

/** The container path `path` (absolute, or relative to WORKDIR) as a path in the stage's directory. */
function onMachine(dir: string, path: string): string {
  const absolute = posix.resolve(APP, path);
  assert.ok(absolute === APP || absolute.startsWith(`${APP}/`), `${path} is under ${APP}, the only directory this test stands in for`);
  return join(dir, posix.relative(APP, absolute));
}

/**
 * A RUN step as it runs here: only steps of the kinds the Dockerfile has are known. `npm cache
 * clean --force` is left out (here it would empty this machine's shared cache; in the image it
 * only makes the layer smaller), and `chown node:node` gives the directory to nobody instead.
 */
function translateRun(command: string, dir: string): string {
  const kept: string[] = [];
  for (const part of command.split('&&').map((p) => p.trim())) {
    if (part === 'npm cache clean --force') continue;
    if (/^npm ci( |$)/.test(part) || part === 'npm run build') kept.push(part);
    else if (/^mkdir -p \/app\/\S+$/.test(part)) kept.push(`mkdir -p ${onMachine(dir, part.slice('mkdir -p '.length))}`);
    else if (/^chown node:node \/app\/\S+$/.test(part)) kept.push(`chown ${NOBODY}:${NOBODY} ${onMachine(dir, part.slice('chown node:node '.length))}`);
    else assert.fail(`the Dockerfile's RUN step "${part}" is not reproduced by test/ops/image.test.ts: teach it there`);
  }
  return kept.join(' && ');
}

async function buildStage(stage: Stage, root: string, built: Map<string, Built>): Promise<Built> {
  const dir = join(root, stage.name);
  mkdirSync(dir, { mode: 0o755 });
  const result: Built = { dir, env: {}, user: undefined, command: undefined, healthcheck: undefined };
  for (const step of stage.steps) {
    switch (step.kind) {
      case 'WORKDIR':
        assert.equal(step.path, APP, `WORKDIR is ${APP}`);
        break;
      case 'ENV':
        Object.assign(result.env, step.values);
        break;
      case 'USER':
        result.user = step.user;
        break;
      case 'CMD':
        result.command = step.command;
        break;
      case 'HEALTHCHECK':
        result.healthcheck = step.command;
        break;
      case 'VOLUME':
      case 'EXPOSE':
      case 'STOPSIGNAL':
        break;
      case 'COPY': {
        const { from, sources, dest } = step.copy;
        const target = onMachine(dir, dest);
        if (from !== undefined) {
          const source = built.get(from);
          assert.ok(source !== undefined, `COPY --from=${from}: that stage was built`);
          for (const path of sources) cpSync(onMachine(source.dir, path), join(target, dest.endsWith('/') ? basename(path) : ''), { recursive: true });
          break;
        }
        for (const source of sources) {
          const files = await tracked(source);
          assert.ok(files.length > 0, `COPY ${source}: tracked files exist there`);
          const isFile = files.length === 1 && files[0] === source;
          for (const file of files) {
            const to = isFile ? (dest.endsWith('/') || sources.length > 1 ? join(target, basename(file)) : target) : join(target, relative(source, file));
            mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
            copyFileSync(join(ROOT, file), to);
          }
        }
        break;
      }
      case 'RUN': {
        const command = translateRun(step.command, dir);
        if (command === '') break;
        await run('sh', ['-c', command], {
          cwd: dir,
          timeout: NPM_LIMIT_MS,
          killSignal: 'SIGKILL',
          maxBuffer: 64 << 20,
          env: { PATH, HOME: process.env.HOME ?? '/root', ...networkEnv(), ...result.env, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false', npm_config_loglevel: 'error' },
        }).catch((err: Error & { stdout?: string; stderr?: string }) => assert.fail(`RUN ${command} failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`));
        break;
      }
    }
  }
  built.set(stage.name, result);
  return result;
}

/** A process run as nobody (setpriv), its output kept; SIGKILLed when the test ends or the limit passes. */
function startAsNobody(t: TestContext, args: string[], { cwd, env, limitMs = LIMIT_MS }: { cwd: string; env: Record<string, string>; limitMs?: number }): Child {
  return startChild(t, 'setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...args], { cwd, env, limitMs });
}

/** `node …` of an image command, with `node` (this machine's Node 24, where nobody can run it). */
function nodeCommand(command: string[], node: string): string[] {
  assert.equal(command[0], 'node', `${JSON.stringify(command)} runs node`);
  return [node, ...command.slice(1)];
}

/**
 * This machine's Node and the example files, where nobody can reach them: a checkout in a
 * private directory (CI clones into one, and provisions Node 24 inside it) is closed to
 * nobody, as it would be outside an image that has its own Node.
 */
function reachableByNobody(root: string): { node: string; examples: string } {
  const node = join(root, 'node');
  try {
    linkSync(process.execPath, node);
  } catch {
    copyFileSync(process.execPath, node);
  }
  chmodSync(node, 0o755);
  const examples = join(root, 'examples');
  cpSync(join(ROOT, 'examples'), examples, { recursive: true });
  return { node, examples };
}

function uidOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
}

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
}

test('the image, reproduced: build stage, production-only runtime stage, run as nobody with the compose configuration', { ...redisSuite(), timeout: LIMIT_MS }, async (t) => {
  const root = tempDir(t, 'gateway-image-');
  // mkdtemp makes it 0700: nobody must be able to reach the runtime directory through it.
  chmodSync(root, 0o755);
  const { node, examples } = reachableByNobody(root);
  const stages = readDockerfile(ROOT);
  const built = new Map<string, Built>();

  const [buildStep, runtimeStep] = stages;
  assert.ok(buildStep !== undefined && runtimeStep !== undefined && stages.length === 2, 'the Dockerfile has a build stage and a runtime stage');

  await t.test(`stage ${buildStep.name}: npm ci with dev dependencies, npm run build`, async () => {
    const { dir } = await buildStage(buildStep, root, built);
    assert.ok(existsSync(join(dir, 'node_modules', 'typescript')), 'the build stage has the dev dependencies');
    assert.ok(statSync(join(dir, 'dist', 'main.js')).isFile(), 'dist/main.js was built');
    assert.ok(existsSync(join(dir, 'dist', 'dashboard', 'public')), 'the dashboard pages were copied into dist');
  });

  await t.test('runtime stage: production dependencies only, dist and config, data/ for nobody', async () => {
    const { dir, user, command } = await buildStage(runtimeStep, root, built);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    for (const name of Object.keys(pkg.dependencies)) assert.ok(existsSync(join(dir, 'node_modules', name, 'package.json')), `production dependency ${name} is installed`);
    for (const name of ['typescript', 'tsx', 'yaml', 'playwright-core']) assert.ok(!existsSync(join(dir, 'node_modules', name)), `dev dependency ${name} is not in the runtime stage`);
    assert.ok(!existsSync(join(dir, 'src')), 'no TypeScript sources in the runtime stage');
    assert.ok(statSync(join(dir, 'dist', 'main.js')).isFile() && statSync(join(dir, 'config', 'demo-data.json')).isFile(), 'dist and config are there');
    assert.equal(statSync(join(dir, 'data')).uid, NOBODY, 'data/ belongs to the unprivileged user');
    assert.equal(user, 'node', 'the image runs as the unprivileged node user');
    assert.deepEqual(command, ['node', 'dist/main.js']);
  });

  await t.test('the runtime stage as nobody: healthchecks, a sign-in and a round trip through the compose route', async (t) => {
    const runtime = built.get(runtimeStep.name);
    assert.ok(runtime?.command !== undefined && runtime.healthcheck !== undefined, 'the runtime stage was built, with a CMD and a HEALTHCHECK');
    const compose = parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8')) as { services: Record<string, ComposeService> };
    const gatewayService = compose.services.gateway!;

    // Redis as compose starts it (AOF on, in a directory of the test's).
    const redisDir = join(root, 'redis');
    mkdirSync(redisDir);
    const redisCommand = compose.services.redis?.command ?? [];
    assert.equal(redisCommand[0], 'redis-server');
    const redis = await startRedis(t, [...redisCommand.slice(1), '--dir', redisDir]);

    // The example backend, as nobody too (compose runs it as `node`).
    const backend = startAsNobody(t, [node, join(examples, 'backend', 'server.mjs')], { cwd: root, env: { PATH, PORT: '0', HOST: '127.0.0.1' } });
    const backendUp = await waitForLog(backend, (line) => line.msg === 'example backend listening');
    const backendUrl = `http://127.0.0.1:${backendUp.port as number}`;

    // The signing key, made by compose's own script, readable by nobody alone.
    const keys = join(root, 'keys');
    mkdirSync(keys, { mode: 0o755 });
    const keyFile = join(keys, 'signing.pem');
    const keyEnv = { PATH, KEY_FILE: keyFile, KEY_OWNER: `${NOBODY}:${NOBODY}` };
    await run(process.execPath, [join(ROOT, 'examples', 'compose', 'signing-key.mjs')], { env: keyEnv });
    assert.equal(statSync(keyFile).mode & 0o777, 0o600, 'the key file is 0600');
    assert.equal(statSync(keyFile).uid, NOBODY, 'the key file belongs to the gateway user');
    const before = readFileSync(keyFile, 'utf8');
    await run(process.execPath, [join(ROOT, 'examples', 'compose', 'signing-key.mjs')], { env: keyEnv });
    assert.equal(readFileSync(keyFile, 'utf8'), before, 'run again, the script keeps the key');

    // config/compose.json with the container addresses swapped for this machine's.
    const config = JSON.parse(readFileSync(join(ROOT, 'config', 'compose.json'), 'utf8')) as {
      signing: { keys: Array<{ pemFile: string }> };
      redis: { url: string };
      routes: Array<{ prefix: string; targets: string[] }>;
    };
    assert.equal(config.signing.keys.length, 1, 'one signing key in config/compose.json');
    config.signing.keys[0]!.pemFile = keyFile;
    config.redis.url = redis.url;
    for (const route of config.routes) route.targets = route.targets.map(() => backendUrl);
    const configDir = join(root, 'etc-gateway');
    mkdirSync(configDir, { mode: 0o755 });
    const configFile = join(configDir, basename(gatewayService.environment?.GATEWAY_CONFIG ?? 'compose.json'));
    writeFileSync(configFile, JSON.stringify(config), { mode: 0o644 });

    // The image's environment, then compose's, then what this machine needs instead: a free
    // port on the loopback (never the image's 0.0.0.0 here: the demo data is served).
    const port = await freePort();
    const ports: Record<string, string> = { PORT: String(port) };
    if (gatewayService.environment?.MANAGEMENT_PORT !== undefined) ports.MANAGEMENT_PORT = String(await freePort());
    // The admin token compose reads from .env (OWNER_ADMIN_TOKEN_DIGESTS), here one of the test's.
    const adminToken = `gwadm_${'c'.repeat(43)}`;
    const dotEnv = { OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([`sha256:${createHash('sha256').update(adminToken).digest('hex')}`]) };
    const composeEnv = (service: ComposeService) => Object.fromEntries(Object.entries(service.environment ?? {})
      .map(([k, v]) => [k, String(v).replace(/\$\{([A-Za-z_]\w*)(?::-([^}]*))?\}/g, (_m, name: string, fallback?: string) => dotEnv[name as keyof typeof dotEnv] ?? fallback ?? '')]));
    const baseEnv: Record<string, string> = { PATH, ...runtime.env, ...composeEnv(gatewayService), GATEWAY_CONFIG: configFile, HOST: '127.0.0.1', ...ports };
    assert.equal(baseEnv.NODE_ENV, 'production', 'the image runs with NODE_ENV=production');

    // The seed service, as compose runs it before the gateway: the image's demo data into Redis.
    const seedService = compose.services.seed;
    assert.ok(seedService?.command !== undefined, 'a seed service with a command');
    const seedEnv: Record<string, string> = { PATH, ...runtime.env, ...composeEnv(seedService), GATEWAY_CONFIG: configFile };
    const seed = async (env: Record<string, string>) => {
      const child = startAsNobody(t, nodeCommand(seedService.command!, node), { cwd: runtime.dir, env, limitMs: 60_000 });
      return { ...(await exitWithin(child, 60_000)), stdout: child.stdout(), stderr: child.stderr() };
    };
    // Production refuses the demo data unless told: compose's ALLOW_DEMO_DATA is what lets the seed copy it.
    const { ALLOW_DEMO_DATA: _allowed, ...withoutAllow } = seedEnv;
    const refusal = await seed(withoutAllow);
    assert.equal(refusal.code, 1, `without ALLOW_DEMO_DATA the production seed refuses the demo data\n${refusal.stdout}\n${refusal.stderr}`);
    assert.match(refusal.stdout + refusal.stderr, /ALLOW_DEMO_DATA/, 'and says how to allow it');
    const seeded = await seed(seedEnv);
    assert.equal(seeded.code, 0, `the seed runs in the image as nobody:\n${seeded.stdout}\n${seeded.stderr}`);
    assert.match(seeded.stdout, /^Copied 2 owners and 2 accounts from the data file .*demo-data\.json to Redis/m);
    assert.match(seeded.stderr, /ALLOW_DEMO_DATA=true/, 'the demo data is copied with a warning');
    const reseeded = await seed(seedEnv);
    assert.equal(reseeded.code, 0, reseeded.stderr);
    assert.match(reseeded.stdout, /already holds accounts: nothing copied/, 'a second up leaves Redis as the owners left it');

    const env = baseEnv;
    const gateway = startAsNobody(t, nodeCommand(runtime.command, node), { cwd: runtime.dir, env });
    const listening = await waitForLog(gateway, LISTENING, 60_000);
    assert.equal(uidOf(gateway.process.pid!), NOBODY, 'the gateway runs as nobody');
    const base = `http://127.0.0.1:${port}`;
    assert.ok(String(listening.url).startsWith(base), `listening on ${base}: ${String(listening.url)}`);

    // With a management port (compose sets one) health is served there only: the main port answers 404.
    const management = ports.MANAGEMENT_PORT !== undefined ? `http://127.0.0.1:${ports.MANAGEMENT_PORT}` : base;
    const health = await fetch(`${management}/healthz`);
    assert.equal(health.status, 200, 'GET /healthz');
    if (management !== base) assert.equal((await fetch(`${base}/healthz`)).status, 404, 'the main port does not serve /healthz');
    const ready = await fetch(`${management}/readyz`);
    assert.equal(ready.status, 200, `GET /readyz: ${await ready.text()}`);
    // Both healthchecks as Docker would run them, in the gateway's environment.
    for (const [name, check] of [['Dockerfile HEALTHCHECK', runtime.healthcheck], ['compose healthcheck', gatewayService.healthcheck?.test.slice(1)]] as const) {
      assert.ok(check !== undefined, `${name} is there`);
      const result = await run(nodeCommand(check, node)[0]!, nodeCommand(check, node).slice(1), { env, timeout: 30_000 }).then(() => 0, (err: { code?: number }) => err.code ?? -1);
      assert.equal(result, 0, `${name} passes against the running gateway`);
    }

    // A demo client signs in and calls the protected route.
    const apiSecret = createHash('sha256').update('sk_demo_alice_secret').digest('hex');
    const signIn = await fetch(`${base}/api/signin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey: 'ak_demo_alice', apiSecret }) });
    const pair = await signIn.json() as { success: boolean; message: { accessToken: string } };
    assert.equal(signIn.status, 200, `sign-in: ${JSON.stringify(pair)}`);
    const route = config.routes[0]!.prefix;
    const refusedCall = await fetch(`${base}${route}/orders/42`);
    assert.equal(refusedCall.status, 401, 'the route needs a token');
    const call = await fetch(`${base}${route}/orders/42?page=2`, { headers: { authorization: `Bearer ${pair.message.accessToken}` } });
    const echoed = await call.json() as { backend: string; path: string; identity: Record<string, string | null>; authorizationReceived: boolean };
    assert.equal(call.status, 200, `the round trip: ${JSON.stringify(echoed)}`);
    assert.equal(echoed.backend, 'example');
    assert.equal(echoed.path, `${route}/orders/42?page=2`);
    assert.equal(echoed.identity.account, 'acct_alice');
    assert.equal(echoed.identity.key, 'key_alice_1');
    assert.match(echoed.identity.token ?? '', /\S/, 'the token id reached the backend');
    assert.equal(echoed.identity.request, call.headers.get('x-request-id'), 'the request id reached the backend');
    assert.equal(echoed.authorizationReceived, false, 'the bearer token stays at the gateway');

    // nobody may write data/ (where owner changes to a data file go) and nothing else of the image.
    const probe = (path: string) => run('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', node, '-e', `require('node:fs').writeFileSync(${JSON.stringify(path)}, 'x')`], { env: { PATH } }).then(() => 'written', () => 'refused');
    assert.equal(await probe(join(runtime.dir, 'data', 'probe')), 'written', 'nobody writes in data/');
    assert.equal(await probe(join(runtime.dir, 'dist', 'probe')), 'refused', 'nobody cannot write in dist/');
    assert.equal(await probe(join(runtime.dir, 'probe')), 'refused', 'nobody cannot write in the app directory');

    // Redis persisted (AOF), and the gateway found nothing to warn about in its durability.
    assert.ok(readdirSync(redisDir).some((name) => name.startsWith('appendonly')), `redis writes an AOF: ${readdirSync(redisDir).join(', ')}`);
    const lines = logLines(gateway);
    assert.deepEqual(lines.filter((line) => line.level === 40 && /^redis .*(persist|evict|AOF|appendonly)/i.test(String(line.msg))).map((line) => line.msg), [], 'no Redis durability warning');

    // Owners work: the demo owner signs in and changes the account (written to Redis), and the
    // operator's gatewayctl in the image reaches it with the admin token from .env.
    const session = await fetch(`${base}/owner/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'alice@demo.example', password: 'alice demo passphrase' }) });
    const signedIn = await session.json() as { message: { csrfToken: string } };
    assert.equal(session.status, 200, `the demo owner signs in: ${JSON.stringify(signedIn)}`);
    const cookie = session.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const role = await fetch(`${base}/owner/v1/accounts/acct_alice/roles`, {
      method: 'POST', headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': signedIn.message.csrfToken, origin: base },
      body: JSON.stringify({ id: 900, slug: 'compose-owner', name: 'Made by an owner', public: false }),
    });
    assert.equal(role.status, 201, `the owner's change is written: ${await role.text()}`);
    const ctl = startAsNobody(t, [node, 'dist/cli/gatewayctl.js', '--url', base, '--json', 'roles', 'list', 'acct_alice'], { cwd: runtime.dir, env: { ...env, GATEWAY_ADMIN_TOKEN: adminToken }, limitMs: 60_000 });
    const ctlExit = await exitWithin(ctl, 60_000);
    assert.equal(ctlExit.code, 0, `gatewayctl in the image: ${ctl.stderr()}`);
    assert.ok((JSON.parse(ctl.stdout()) as Array<{ slug: string }>).some((r) => r.slug === 'compose-owner'), 'the operator sees the owner\'s role');

    gateway.process.kill('SIGTERM');
    const exit = await exitWithin(gateway, 60_000);
    assert.equal(exit.code, 0, `SIGTERM: exit 0\n${gateway.stderr()}`);
    backend.process.kill('SIGTERM');
    assert.equal((await exitWithin(backend, 30_000)).code, 0, 'the example backend stops on SIGTERM');
  });
});
