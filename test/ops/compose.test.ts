/**
 * compose.yaml and the Dockerfile name only things that exist: no container engine runs here
 * (test/ops/image.test.ts reproduces the image's steps instead), so these checks are what stands
 * between a renamed file and a `docker compose up` that fails on a newcomer's machine. The
 * gateway's config file is loaded as the gateway loads it, with the compose environment, and what
 * it points at (backends, Redis, the signing key's directory) must be a service or a mount.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, resolve } from 'node:path';
import { test } from 'node:test';
import { parseDocument } from 'yaml';

import { loadConfig } from '../../src/config/load.js';
import { certificateProblems } from '../../src/tls/certificates.js';
import { readDockerfile, stepsOf } from '../helpers/dockerfile.js';
import { ROOT } from '../helpers/process.js';

interface Service {
  build?: string | { context?: string; dockerfile?: string };
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: Array<string | { type?: string; source?: string; target: string }>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  ports?: string[];
}

interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

interface Mount {
  /** Host path (absolute) for a bind mount, or the named volume's name. */
  source: string;
  bind: boolean;
  target: string;
  readOnly: boolean;
}

/**
 * `value` as compose interpolates it: `${NAME}` and `${NAME:-default}` from `vars` (compose's
 * .env and shell), `$$` a dollar sign. Anything else spelt with a dollar fails the test.
 */
function interpolate(value: string, vars: Record<string, string> = {}): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$/g, (match, name: string | undefined, fallback: string | undefined) => {
    if (match === '$$') return '$';
    assert.ok(name !== undefined, `"${value}": a $ compose would not read as an interpolation`);
    const given = vars[name];
    return given !== undefined && given !== '' ? given : fallback ?? '';
  });
}

/** A service's environment as compose hands it to the container, with `vars` as compose's .env. */
function environmentOf(service: Service, vars: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), vars)]));
}

function readCompose(file = 'compose.yaml'): Compose {
  const doc = parseDocument(readFileSync(join(ROOT, file), 'utf8'), { prettyErrors: true, strict: true, uniqueKeys: true });
  assert.deepEqual(doc.errors.map(String), [], `${file} parses`);
  assert.deepEqual(doc.warnings.map(String), [], `${file} parses without warnings`);
  const compose = doc.toJS() as Compose;
  assert.ok(compose.services !== null && typeof compose.services === 'object', `${file} has services`);
  return compose;
}

function mountsOf(service: Service): Mount[] {
  return (service.volumes ?? []).map((volume) => {
    if (typeof volume === 'string') {
      const [source, target, mode] = volume.split(':');
      assert.ok(source !== undefined && target !== undefined, `volume "${volume}" is source:target[:mode]`);
      const bind = source.startsWith('.') || source.startsWith('/');
      return { source: bind ? resolve(ROOT, source) : source, bind, target, readOnly: mode === 'ro' };
    }
    assert.ok(volume.source !== undefined, `volume ${JSON.stringify(volume)} names its source`);
    const bind = volume.type === 'bind';
    return { source: bind ? resolve(ROOT, volume.source) : volume.source, bind, target: volume.target, readOnly: false };
  });
}

/** The host path a container path reaches through a bind mount, or undefined when none covers it. */
function hostPath(mounts: Mount[], containerPath: string): string | undefined {
  const mount = mounts.filter((m) => m.bind && (containerPath === m.target || containerPath.startsWith(`${m.target}/`)))
    .sort((a, b) => b.target.length - a.target.length)[0];
  return mount === undefined ? undefined : join(mount.source, posix.relative(mount.target, containerPath));
}

/** The files git tracks under `path` (what a fresh clone, and so a build context, holds). */
function tracked(path: string): string[] {
  return execFileSync('git', ['ls-files', '-z', '--', path], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter((f) => f !== '');
}

test('compose.yaml parses and names only files, services and volumes that exist', () => {
  const compose = readCompose();
  const declaredVolumes = new Set(Object.keys(compose.volumes ?? {}));
  const usedVolumes = new Set<string>();

  for (const [name, service] of Object.entries(compose.services)) {
    assert.ok(service.build !== undefined || service.image !== undefined, `${name}: build or image`);
    if (service.build !== undefined) {
      const build = typeof service.build === 'string' ? { context: service.build } : service.build;
      const context = resolve(ROOT, build.context ?? '.');
      assert.ok(statSync(context).isDirectory(), `${name}: build context ${context} is a directory`);
      const dockerfile = join(context, build.dockerfile ?? 'Dockerfile');
      assert.ok(statSync(dockerfile).isFile(), `${name}: ${dockerfile} exists`);
      assert.equal(tracked(dockerfile).length, 1, `${name}: ${dockerfile} is tracked`);
    }

    const mounts = mountsOf(service);
    for (const mount of mounts) {
      if (mount.bind) {
        assert.ok(existsSync(mount.source), `${name}: bind mount source ${mount.source} exists`);
        assert.ok(tracked(mount.source).length > 0, `${name}: bind mount source ${mount.source} is in the repository`);
        assert.ok(mount.readOnly, `${name}: the repository's ${mount.source} is mounted read-only`);
      } else {
        assert.ok(declaredVolumes.has(mount.source), `${name}: named volume ${mount.source} is declared under volumes:`);
        usedVolumes.add(mount.source);
      }
    }

    // A script or file the command runs from a mount must be there.
    for (const arg of service.command ?? []) {
      if (!arg.startsWith('/')) continue;
      const host = hostPath(mounts, arg);
      if (host !== undefined) assert.ok(statSync(host).isFile(), `${name}: command file ${arg} is ${host}, which exists`);
    }

    for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
      const other = compose.services[dependency];
      assert.ok(other !== undefined, `${name}: depends on ${dependency}, a service`);
      if (condition === 'service_healthy') assert.ok(other.healthcheck !== undefined, `${name}: waits for ${dependency} to be healthy, which has a healthcheck`);
    }
  }
  assert.deepEqual([...declaredVolumes].sort(), [...usedVolumes].sort(), 'every declared volume is used');
});

test('the gateway service: its config file loads with the compose environment, and names services and mounts', () => {
  const compose = readCompose();
  const gateway = compose.services.gateway;
  assert.ok(gateway !== undefined, 'a gateway service');
  const mounts = mountsOf(gateway);
  const env = environmentOf(gateway);

  const configPath = env.GATEWAY_CONFIG;
  assert.ok(configPath !== undefined, 'GATEWAY_CONFIG is set');
  const configFile = hostPath(mounts, configPath);
  assert.ok(configFile !== undefined && statSync(configFile).isFile(), `GATEWAY_CONFIG ${configPath} is a mounted file (${configFile})`);
  // Loaded as the gateway would: the image's ENV, then compose's environment, the file on the host.
  const [, runtime] = readDockerfile(ROOT);
  const imageEnv = Object.assign({}, ...stepsOf(runtime!, 'ENV').map((step) => step.values)) as Record<string, string>;
  const config = loadConfig({ env: { ...imageEnv, ...env, GATEWAY_CONFIG: configFile }, cwd: ROOT });

  const services = new Set(Object.keys(compose.services));
  assert.ok(config.routes.length > 0, 'at least one route');
  for (const route of config.routes) {
    assert.equal(route.auth, 'required', `route ${route.prefix} is a protected one`);
    for (const target of route.targets) assert.ok(services.has(new URL(target).hostname), `route ${route.prefix}: target ${target} is a compose service`);
  }
  assert.ok(config.redis.url !== undefined && services.has(new URL(config.redis.url).hostname), `redis.url ${config.redis.url} is a compose service`);

  // The signing keys are read from a mounted volume that the signing-key service writes.
  assert.ok(config.signing.keys.length > 0 && config.signing.activeKid !== undefined, 'configured signing keys');
  const keyMaker = compose.services['signing-key'];
  assert.ok(keyMaker !== undefined, 'a signing-key service');
  assert.equal(gateway.depends_on?.['signing-key']?.condition, 'service_completed_successfully', 'the gateway starts once the key is made');
  for (const key of config.signing.keys) {
    assert.ok(key.pemFile !== undefined, `key ${key.kid}: a pemFile, never a PEM in the config`);
    const gatewayMount: Mount | undefined = mounts.find((m) => !m.bind && key.pemFile!.startsWith(`${m.target}/`));
    assert.ok(gatewayMount !== undefined, `key ${key.kid}: ${key.pemFile} is on a named volume of the gateway`);
    const makerMount: Mount | undefined = mountsOf(keyMaker).find((m) => m.source === gatewayMount.source);
    assert.ok(makerMount !== undefined, `the signing-key service mounts ${gatewayMount.source} too`);
    assert.equal(posix.join(makerMount.target, posix.relative(gatewayMount.target, key.pemFile!)), keyMaker.environment?.KEY_FILE, `the signing-key service writes ${key.pemFile}`);
  }

  // Demo data stays on the host's loopback: published ports are bound to 127.0.0.1.
  assert.equal(compose.services.seed?.environment?.ALLOW_DEMO_DATA, 'true', 'compose seeds the demo data (the route works out of the box)');
  assert.equal(gateway.environment?.ALLOW_DEMO_DATA, 'true', 'and the gateway serves it (NODE_ENV=production refuses demo secrets at sign-in otherwise)');
  for (const service of Object.values(compose.services)) {
    for (const port of service.ports ?? []) assert.match(port, /^127\.0\.0\.1:/, `port ${port} is published on the loopback only`);
  }
  assert.match(gateway.healthcheck?.test.join(' ') ?? '', /\/readyz/, 'the gateway is healthy when ready');
});

test('every COPY source of the Dockerfile exists in the repository', () => {
  const stages = readDockerfile(ROOT);
  assert.ok(stages.length >= 2, 'a build stage and a runtime stage');
  const names = new Set(stages.map((stage) => stage.name));
  let copies = 0;
  for (const stage of stages) {
    for (const { copy } of stepsOf(stage, 'COPY')) {
      copies++;
      if (copy.from !== undefined) {
        assert.ok(names.has(copy.from), `COPY --from=${copy.from}: a stage of that name`);
        continue;
      }
      for (const source of copy.sources) assert.ok(tracked(source).length > 0, `COPY ${source}: tracked files exist there`);
    }
  }
  assert.ok(copies > 0, 'the Dockerfile copies something');
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const kept of ['node_modules', 'dist']) assert.ok(ignore.includes(kept), `.dockerignore leaves out ${kept} (the image builds its own)`);
});

test('owners can work: the owner API writes to Redis, which a one-shot seed service fills once from the image\'s data, and the admin token comes from .env', () => {
  const compose = readCompose();
  const gateway = compose.services.gateway!;
  const seed = compose.services.seed;
  assert.ok(seed !== undefined, 'a seed service');
  const [, runtime] = readDockerfile(ROOT);
  const imageEnv = Object.assign({}, ...stepsOf(runtime!, 'ENV').map((step) => step.values)) as Record<string, string>;
  const load = (service: Service, vars: Record<string, string> = {}) => {
    const env = environmentOf(service, vars);
    const configFile = hostPath(mountsOf(service), env.GATEWAY_CONFIG ?? '');
    assert.ok(configFile !== undefined, `${env.GATEWAY_CONFIG} is mounted`);
    return loadConfig({ env: { ...imageEnv, ...env, GATEWAY_CONFIG: configFile }, cwd: ROOT });
  };

  // Writable: keys and the directory both in Redis (services.ts makes the owner store read-only otherwise).
  const config = load(gateway);
  assert.equal(config.data.keySource, 'redis', 'KEY_SOURCE=redis: the owner API writes to Redis');
  assert.equal(config.directory.store, 'redis', 'DIRECTORY_STORE=redis: roles and sign records are written where they are read');

  // The seed: the gateway's own image and configuration, gatewayctl migrate into the same Redis, once.
  assert.deepEqual(seed.build, gateway.build, 'the seed is built from the gateway\'s Dockerfile');
  assert.equal(seed.image, gateway.image, 'and is the same image');
  const command = seed.command ?? [];
  assert.deepEqual(command.slice(0, 3), ['node', 'dist/cli/gatewayctl.js', 'migrate'], 'it runs gatewayctl migrate from the image');
  assert.ok(command.includes('--if-empty'), 'only into an empty Redis: owners\' changes survive the next up');
  const source = join(ROOT, 'src', posix.relative('dist', command[1]!).replace(/\.js$/, '.ts'));
  assert.equal(tracked(source).length, 1, `${command[1]} is built from ${source}, which is in the repository`);
  const seedConfig = load(seed);
  assert.equal(seedConfig.redis.url, config.redis.url, 'the seed writes to the gateway\'s Redis');
  assert.equal(seedConfig.redis.keyPrefix, config.redis.keyPrefix, 'under the gateway\'s key prefix');
  assert.ok(statSync(resolve(ROOT, seedConfig.data.file)).isFile() && tracked(seedConfig.data.file).length === 1, `its data file ${seedConfig.data.file} is in the image (config/)`);
  assert.equal(seed.depends_on?.redis?.condition, 'service_healthy', 'the seed waits for Redis');
  assert.equal(gateway.depends_on?.seed?.condition, 'service_completed_successfully', 'the gateway starts once Redis is seeded');
  assert.equal((seed as { restart?: string }).restart, 'no', 'the seed runs once per up');

  // No admin token by default; a digest in .env is the operator's.
  assert.deepEqual(config.owner.adminTokenDigests, [], 'no operator token unless .env gives one');
  const digest = `sha256:${'ab'.repeat(32)}`;
  assert.deepEqual(load(gateway, { OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([digest]) }).owner.adminTokenDigests, [digest], 'OWNER_ADMIN_TOKEN_DIGESTS from .env reaches the gateway');
});

test('compose.tls.yaml turns TLS on over compose.yaml: its certificate command makes a pair the gateway takes, HTTPS published, the plain port redirecting', (t) => {
  const base = readCompose();
  const overlay = readCompose('compose.tls.yaml');
  assert.deepEqual(Object.keys(overlay.services), ['gateway'], 'the overlay changes the gateway only');
  const gateway = { ...base.services.gateway!, ...overlay.services.gateway! };
  // As compose merges an overlay: environment by name, ports and volumes appended.
  const env = { ...environmentOf(base.services.gateway!), ...environmentOf(overlay.services.gateway!) };
  const ports = [...(base.services.gateway!.ports ?? []), ...(overlay.services.gateway!.ports ?? [])];
  const mounts = [...mountsOf(base.services.gateway!), ...mountsOf(overlay.services.gateway!)];
  assert.ok(gateway.image !== undefined);

  // The try-out certificate, made by the command the file prints, as a newcomer would paste it.
  const text = readFileSync(join(ROOT, 'compose.tls.yaml'), 'utf8');
  const lines = text.split('\n');
  const start = lines.findIndex((line) => line.startsWith('#   mkdir -p certs'));
  assert.ok(start >= 0, 'compose.tls.yaml prints the command that makes a pair');
  let command = '';
  for (let i = start; ; i++) {
    const line = lines[i]!.replace(/^#\s+/, '');
    command += line.replace(/\\$/, ' ');
    if (!line.endsWith('\\')) break;
  }
  const dir = mkdtempSync(join(tmpdir(), 'gateway-compose-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('bash', ['-c', command], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  assert.equal(statSync(join(dir, 'certs', 'gateway.key')).mode & 0o777, 0o644, 'the key is readable by the image\'s user');

  // ./certs is the operator's: ignored by git, mounted read-only where TLS_*_FILE point.
  const certMount = mounts.find((m) => m.bind && m.target === posix.dirname(env.TLS_CERT_FILE!));
  assert.ok(certMount !== undefined && certMount.readOnly && certMount.source === join(ROOT, 'certs'), 'TLS_CERT_FILE is on the ./certs mount, read-only');
  assert.equal(tracked(join(ROOT, 'certs')).length, 0, 'no certificate is in the repository');
  assert.match(readFileSync(join(ROOT, '.gitignore'), 'utf8'), /^\/certs\/$/m, 'certs/ is ignored');

  // Loaded as the gateway would, with its files read from the pair just made.
  const [, runtime] = readDockerfile(ROOT);
  const imageEnv = Object.assign({}, ...stepsOf(runtime!, 'ENV').map((step) => step.values)) as Record<string, string>;
  const onHost = (file: string) => join(dir, 'certs', posix.basename(file));
  const configFile = hostPath(mounts, env.GATEWAY_CONFIG!)!;
  const config = loadConfig({ env: { ...imageEnv, ...env, GATEWAY_CONFIG: configFile, TLS_CERT_FILE: onHost(env.TLS_CERT_FILE!), TLS_KEY_FILE: onHost(env.TLS_KEY_FILE!) }, cwd: ROOT });
  assert.deepEqual(certificateProblems(config.tls), [], 'the pair checks out as at start-up');
  assert.equal(config.http2.tls, true, 'HTTP/2 by ALPN');
  assert.equal(String(config.server.port), env.TLS_PUBLIC_HTTPS_PORT, 'redirects name the published HTTPS port');
  assert.ok(ports.includes(`127.0.0.1:${config.server.port}:${config.server.port}`), 'HTTPS is published on the loopback');
  assert.ok(ports.includes(`127.0.0.1:${config.tls.redirectPort}:${config.tls.redirectPort}`), 'the plain port, now the redirect, stays published');
  assert.notEqual(config.management.port, undefined, 'health and metrics stay on the plain management port the healthcheck asks');
});
