/**
 * deploy/kubernetes/ names only things that exist: no cluster runs here, so, as compose.yaml in
 * compose.test.ts, the manifests are parsed and held against the gateway itself: the env names
 * against describeSettings(), the probes against the management port the config gives, the
 * drain budget against DRAIN_DELAY_MS and SHUTDOWN_TIMEOUT_MS, and the ConfigMap's config file
 * loaded with loadConfig and the Deployment's environment, as the gateway would load it.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';

import { loadConfig } from '../../src/config/load.js';
import { describeSettings } from '../../src/config/schema.js';
import { readDockerfile, stepsOf } from '../helpers/dockerfile.js';
import { ROOT } from '../helpers/process.js';

const DIR = join(ROOT, 'deploy', 'kubernetes');
const FORWARD_AUTH = join(DIR, 'forward-auth');
/** The Secret's shape, apart from the base so that no apply of the base overwrites the real key. */
const SECRETS = join(DIR, 'secrets');

/** Env names the container gets that are not settings, each read by the gateway or Node (docs/configuration.md). */
const NON_SETTINGS = new Set(['GATEWAY_CONFIG', 'NODE_ENV']);

/** The stable (or, for CRDs, current) apiVersion of every kind the manifests may hold. */
const API_VERSIONS: Record<string, string> = {
  Namespace: 'v1',
  ConfigMap: 'v1',
  Secret: 'v1',
  Service: 'v1',
  Deployment: 'apps/v1',
  PodDisruptionBudget: 'policy/v1',
  HorizontalPodAutoscaler: 'autoscaling/v2',
  NetworkPolicy: 'networking.k8s.io/v1',
  Ingress: 'networking.k8s.io/v1',
  Kustomization: 'kustomize.config.k8s.io/v1beta1',
  HTTPRoute: 'gateway.networking.k8s.io/v1',
  ReferenceGrant: 'gateway.networking.k8s.io/v1beta1',
  Middleware: 'traefik.io/v1alpha1',
  IngressRoute: 'traefik.io/v1alpha1',
  SecurityPolicy: 'gateway.envoyproxy.io/v1alpha1',
};

/** What the gateway's forward-auth 200 carries for the proxy to copy onto the request. */
const IDENTITY_HEADERS = ['X-Account-Id', 'X-Key-Id', 'X-Token-Id', 'X-Scopes'];
const FORWARD_AUTH_PATH = '/api/forward-auth';

/* eslint-disable @typescript-eslint/no-explicit-any -- manifests are untyped YAML, checked field by field */
type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; [k: string]: any };

interface Parsed { file: string; manifest: Manifest }

function parseFile(file: string): Manifest[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'), { prettyErrors: true, strict: true, uniqueKeys: true });
  assert.ok(Array.isArray(docs), `${file} parses`);
  return docs.map((doc, i) => {
    assert.deepEqual(doc.errors.map(String), [], `${file} document ${i} parses`);
    assert.deepEqual(doc.warnings.map(String), [], `${file} document ${i} parses without warnings`);
    const manifest = doc.toJS() as Manifest;
    assert.ok(manifest !== null && typeof manifest === 'object', `${file} document ${i} is a mapping`);
    return manifest;
  });
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort().map((f) => join(dir, f));
}

function all(): Parsed[] {
  return [...yamlFiles(DIR), ...yamlFiles(SECRETS), ...yamlFiles(FORWARD_AUTH)].flatMap((file) => parseFile(file).map((manifest) => ({ file, manifest })));
}

function one(kind: string, dir = DIR): Manifest {
  const found = yamlFiles(dir).flatMap(parseFile).filter((m) => m.kind === kind);
  assert.equal(found.length, 1, `one ${kind} in ${dir}`);
  return found[0]!;
}

function gatewayContainer(deployment: Manifest): any {
  const containers = deployment.spec.template.spec.containers as any[];
  assert.equal(containers.length, 1, 'one container');
  return containers[0];
}

/** The container's port of that name (or number). */
function containerPort(container: any, port: string | number): number {
  if (typeof port === 'number') return port;
  const found = (container.ports as any[]).find((p) => p.name === port);
  assert.ok(found !== undefined, `the container has a port named ${port}`);
  return found.containerPort as number;
}

function imageEnv(): Record<string, string> {
  const [, runtime] = readDockerfile(ROOT);
  return Object.assign({}, ...stepsOf(runtime!, 'ENV').map((step) => step.values)) as Record<string, string>;
}

/**
 * The Deployment's environment as the kubelet gives it: values as written; a secretKeyRef from a
 * Secret among the manifests with its value, else (optional: true) left out, as when that Secret
 * does not exist. A required reference to a Secret not shipped fails.
 */
function deploymentEnv(container: any, secrets: Manifest[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of container.env as any[]) {
    if (typeof entry.value === 'string') { env[entry.name] = entry.value; continue; }
    const ref = entry.valueFrom?.secretKeyRef;
    assert.ok(ref !== undefined, `env ${entry.name}: a value or a secretKeyRef`);
    const secret = secrets.find((s) => s.metadata.name === ref.name);
    const value = secret?.stringData?.[ref.key] as string | undefined;
    if (value === undefined || value === '') {
      assert.equal(ref.optional, true, `env ${entry.name}: Secret ${ref.name} is not shipped, so the reference is optional`);
      continue;
    }
    env[entry.name] = value;
  }
  return env;
}

/** The file a container path names, read from the ConfigMap mounted over it, written under `dir`. */
function configFileOnHost(deployment: Manifest, container: any, containerPath: string, dir: string): string {
  const mount = (container.volumeMounts as any[]).find((m) => containerPath.startsWith(`${m.mountPath}/`));
  assert.ok(mount !== undefined, `${containerPath} is on a mounted volume`);
  assert.equal(mount.subPath, undefined, `${mount.mountPath}: the whole volume, not a subPath (edits reach the pod)`);
  const volume = (deployment.spec.template.spec.volumes as any[]).find((v) => v.name === mount.name);
  assert.ok(volume?.configMap !== undefined, `${containerPath} is on a ConfigMap volume`);
  const configMap = one('ConfigMap');
  assert.equal(volume.configMap.name, configMap.metadata.name, 'the volume is the shipped ConfigMap');
  const key = posix.relative(mount.mountPath, containerPath);
  const text = configMap.data?.[key] as string | undefined;
  assert.ok(text !== undefined, `the ConfigMap holds ${key}`);
  const file = join(dir, key);
  writeFileSync(file, text);
  return file;
}

test('every manifest parses, with the current stable apiVersion of its kind, and kustomization names the base ones', () => {
  const parsed = all();
  const kinds = new Set(parsed.map((p) => p.manifest.kind));
  for (const kind of ['Namespace', 'ConfigMap', 'Secret', 'Deployment', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'Ingress', 'Middleware', 'HTTPRoute']) {
    assert.ok(kinds.has(kind), `a ${kind} among the manifests`);
  }
  for (const { file, manifest } of parsed) {
    assert.equal(manifest.apiVersion, API_VERSIONS[manifest.kind], `${file}: ${manifest.kind} is ${API_VERSIONS[manifest.kind] ?? 'not a kind this test knows'}`);
    if (manifest.kind !== 'Kustomization') assert.match(manifest.metadata?.name ?? '', /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, `${file}: ${manifest.kind} has a DNS-label name`);
  }

  const namespace = one('Namespace').metadata.name;
  for (const file of [...yamlFiles(DIR), ...yamlFiles(SECRETS)]) {
    for (const m of parseFile(file)) {
      if (m.kind !== 'Namespace' && m.kind !== 'Kustomization') assert.equal(m.metadata.namespace, namespace, `${file}: ${m.kind} in ${namespace}`);
    }
  }

  // apply -k: every base manifest but the Secret's shape; the examples stay out.
  const kustomization = one('Kustomization');
  const listed = (kustomization.resources as string[]).slice().sort();
  const base = yamlFiles(DIR).map((f) => posix.basename(f)).filter((f) => f !== 'kustomization.yaml').sort();
  assert.deepEqual(listed, base, 'kustomization.yaml lists every manifest of deploy/kubernetes/ itself');
  // Neither apply -k nor apply -f of the base may overwrite the real key with the empty shape.
  assert.ok(yamlFiles(DIR).flatMap(parseFile).every((m) => m.kind !== 'Secret'), 'no Secret among the base manifests');
  const tracked = execFileSync('git', ['ls-files', '--others', '--cached', '--exclude-standard', '--', 'deploy/kubernetes'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter((f) => f !== '');
  for (const file of listed.map((f) => `deploy/kubernetes/${f}`)) assert.ok(tracked.includes(file), `${file} is in the repository`);
});

test('the Deployment: env names are settings, probes on the management port\'s /healthz and /readyz, non-root and read-only, a drain budget above the gateway\'s', (t) => {
  const deployment = one('Deployment');
  const container = gatewayContainer(deployment);
  const pod = deployment.spec.template.spec;

  // Every env name is a setting the gateway reads, or a documented non-setting.
  const settings = new Set(describeSettings().map((s) => s.env).filter((e): e is string => e !== undefined));
  assert.ok(settings.has('MANAGEMENT_PORT') && settings.has('DRAIN_DELAY_MS'), 'describeSettings() lists env names');
  const names = (container.env as any[]).map((e) => e.name as string);
  assert.equal(new Set(names).size, names.length, 'each env name once');
  for (const name of names) assert.ok(settings.has(name) || NON_SETTINGS.has(name), `env ${name} is a setting in describeSettings() or a documented non-setting`);
  const configuration = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
  for (const name of NON_SETTINGS) assert.ok(configuration.includes(`\`${name}\``) || configuration.includes(`${name}=`), `docs/configuration.md documents ${name}`);

  // The config the pod gets: the ConfigMap's file with the image's ENV and the Deployment's env.
  const dir = mkdtempSync(join(tmpdir(), 'gateway-k8s-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const env = deploymentEnv(container, all().filter((p) => p.manifest.kind === 'Secret').map((p) => p.manifest));
  const configFile = configFileOnHost(deployment, container, env.GATEWAY_CONFIG!, dir);
  const config = loadConfig({ env: { ...imageEnv(), ...env, GATEWAY_CONFIG: configFile }, cwd: ROOT });

  // Probes: /healthz (startup, liveness) and /readyz (readiness), on the management listener.
  const management = config.management.port;
  assert.ok(management !== undefined && management !== config.server.port, 'a management port of its own (the public port answers health 404)');
  assert.notEqual(config.management.host ?? config.server.host, '127.0.0.1', 'the management listener is reachable by the kubelet (not loopback)');
  assert.equal(containerPort(container, 'http'), config.server.port, 'the container port "http" is server.port');
  assert.equal(containerPort(container, 'management'), management, 'the container port "management" is management.port');
  const probes: Record<string, string> = { startupProbe: '/healthz', livenessProbe: '/healthz', readinessProbe: '/readyz' };
  for (const [probe, path] of Object.entries(probes)) {
    const get = container[probe]?.httpGet;
    assert.ok(get !== undefined, `${probe}: an httpGet`);
    assert.equal(get.path, path, `${probe} asks ${path}`);
    assert.equal(containerPort(container, get.port), management, `${probe} asks the management port`);
  }
  // Out of the Service within the drain delay: the readiness probe must see 503 before it ends.
  const readiness = container.readinessProbe;
  assert.ok(readiness.periodSeconds * readiness.failureThreshold * 1000 <= config.server.drainDelayMs, 'readiness period × threshold fits in DRAIN_DELAY_MS');

  // Drain: preStop, then SIGTERM's drain delay and shutdown, all within the grace period.
  const command = container.lifecycle?.preStop?.exec?.command as string[] | undefined;
  assert.ok(command !== undefined && command[0] === 'sleep' && command.length === 2, 'preStop sleeps');
  // exec runs the image's own `sleep`: coreutils, which a Debian-based image has (distroless would not).
  assert.match(readDockerfile(ROOT)[1]!.image, /-(bookworm|trixie|bullseye)(-slim)?$/, 'the runtime image is Debian-based, with /bin/sleep');
  const preStopMs = Number(command[1]) * 1000;
  assert.ok(Number.isFinite(preStopMs) && preStopMs > 0, 'preStop sleeps a number of seconds');
  const graceMs = pod.terminationGracePeriodSeconds * 1000;
  assert.ok(graceMs > preStopMs + config.server.drainDelayMs + config.server.shutdownTimeoutMs,
    `terminationGracePeriodSeconds (${graceMs} ms) exceeds preStop (${preStopMs}) + DRAIN_DELAY_MS (${config.server.drainDelayMs}) + SHUTDOWN_TIMEOUT_MS (${config.server.shutdownTimeoutMs})`);

  // Security: non-root as the image's user, read-only root, no escalation, no capabilities.
  const [, runtime] = readDockerfile(ROOT);
  assert.equal(stepsOf(runtime!, 'USER').at(-1)?.user, 'node', 'the image runs as node');
  assert.equal(pod.securityContext.runAsNonRoot, true, 'pod: runAsNonRoot');
  assert.equal(pod.securityContext.runAsUser, 1000, 'pod: the node user\'s uid');
  assert.equal(pod.securityContext.seccompProfile?.type, 'RuntimeDefault', 'pod: the runtime\'s seccomp profile');
  assert.equal(pod.automountServiceAccountToken, false, 'no Kubernetes API token in the pod');
  const security = container.securityContext;
  assert.equal(security.readOnlyRootFilesystem, true, 'readOnlyRootFilesystem');
  assert.equal(security.allowPrivilegeEscalation, false, 'no privilege escalation');
  assert.equal(security.runAsNonRoot, true, 'container: runAsNonRoot');
  assert.deepEqual(security.capabilities?.drop, ['ALL'], 'every capability dropped');
  assert.equal(security.capabilities?.add, undefined, 'none added');
  assert.equal(security.privileged, undefined, 'not privileged');

  // Where the gateway writes is an emptyDir: data/ (demoSaveFile and its lock, under /app) and /tmp.
  const workdir = stepsOf(runtime!, 'WORKDIR').at(-1)!.path;
  const writable = (containerPath: string) => (container.volumeMounts as any[]).some((m) => (containerPath === m.mountPath || containerPath.startsWith(`${m.mountPath}/`))
    && m.readOnly !== true && (pod.volumes as any[]).find((v) => v.name === m.name)?.emptyDir !== undefined);
  const saveFile = posix.resolve(workdir, config.data.demoSaveFile);
  assert.ok(writable(saveFile), `data.demoSaveFile ${saveFile} is on a writable emptyDir`);
  assert.ok(writable('/tmp/x'), '/tmp is a writable emptyDir');
  for (const path of stepsOf(runtime!, 'VOLUME').flatMap((s) => s.paths)) assert.ok(writable(`${path}/x`), `the image's VOLUME ${path} is a writable emptyDir`);
  for (const mount of container.volumeMounts as any[]) {
    const volume = (pod.volumes as any[]).find((v) => v.name === mount.name);
    assert.ok(volume !== undefined, `mount ${mount.mountPath}: volume ${mount.name} exists`);
    if (volume.emptyDir === undefined) assert.equal(mount.readOnly, true, `${mount.mountPath}: a ConfigMap or Secret, mounted read-only`);
  }

  // Resources: requests (the HPA's utilisation is of them), a memory limit.
  assert.ok(container.resources?.requests?.cpu !== undefined && container.resources?.requests?.memory !== undefined, 'CPU and memory requests');
  assert.ok(container.resources?.limits?.memory !== undefined, 'a memory limit');
  assert.equal(config.workers, 1, 'one process per pod: pods scale, not workers');
});

test('the signing key: a Secret volume mounted where the config\'s pemFile points, with no key in the repository; Redis by reference', (t) => {
  const deployment = one('Deployment');
  const container = gatewayContainer(deployment);
  const pod = deployment.spec.template.spec;
  const dir = mkdtempSync(join(tmpdir(), 'gateway-k8s-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const secret = one('Secret', SECRETS);
  const env = deploymentEnv(container, [secret]);
  const config = loadConfig({ env: { ...imageEnv(), ...env, GATEWAY_CONFIG: configFileOnHost(deployment, container, env.GATEWAY_CONFIG!, dir) }, cwd: ROOT });

  assert.ok(config.signing.keys.length > 0 && config.signing.activeKid !== undefined, 'configured signing keys');
  for (const key of config.signing.keys) {
    assert.ok(key.pemFile !== undefined, `key ${key.kid}: a pemFile, never a PEM in the ConfigMap`);
    const mount = (container.volumeMounts as any[]).find((m) => key.pemFile!.startsWith(`${m.mountPath}/`));
    assert.ok(mount !== undefined, `key ${key.kid}: ${key.pemFile} is on a mount`);
    assert.equal(mount.readOnly, true, 'mounted read-only');
    const volume = (pod.volumes as any[]).find((v) => v.name === mount.name);
    assert.equal(volume?.secret?.secretName, secret.metadata.name, `${key.pemFile} is on the ${secret.metadata.name} Secret`);
    const file = posix.relative(mount.mountPath, key.pemFile!);
    assert.ok(Object.hasOwn(secret.stringData ?? {}, file), `the Secret's key ${file} is the pemFile's name`);
    // Group-readable for fsGroup 1000, the node user's group; never world-readable.
    assert.equal(volume.secret.defaultMode & 0o047, 0o040, 'the key file is readable by the group (fsGroup), not by others');
    assert.equal(pod.securityContext.fsGroup, pod.securityContext.runAsGroup, 'fsGroup is the gateway\'s group');
  }
  // The shape only: a real key is made by the operator, never committed.
  for (const [name, value] of Object.entries(secret.stringData ?? {})) assert.equal(value, '', `the Secret's ${name} is empty`);
  assert.equal(secret.data, undefined, 'the Secret holds no data');
  for (const file of yamlFiles(SECRETS)) assert.doesNotMatch(readFileSync(file, 'utf8'), /BEGIN [A-Z ]*PRIVATE KEY/, `no private key in ${file}`);

  // Redis: the operator's, by reference; no Redis workload shipped; the password from a Secret.
  assert.ok(config.redis.url !== undefined, 'a Redis URL');
  const host = new URL(config.redis.url).hostname;
  assert.match(host, /\.svc\.cluster\.local$/, `redis.url names a Service (${host})`);
  assert.equal(new URL(config.redis.url).password, '', 'no password in the ConfigMap');
  assert.equal(all().some((p) => /redis/i.test(p.manifest.metadata?.name ?? '') && ['Deployment', 'StatefulSet'].includes(p.manifest.kind)), false, 'no Redis workload shipped');
  const password = (container.env as any[]).find((e) => e.name === 'REDIS_PASSWORD');
  assert.ok(password?.valueFrom?.secretKeyRef !== undefined, 'REDIS_PASSWORD comes from a Secret');
  assert.equal(config.data.keySource, 'redis', 'keys in Redis, shared by the replicas');
  assert.equal(config.directory.store, 'redis', 'the directory in Redis');
});

test('Service, PodDisruptionBudget, HorizontalPodAutoscaler and NetworkPolicy select the Deployment\'s pods and name its ports', () => {
  const deployment = one('Deployment');
  const container = gatewayContainer(deployment);
  const podLabels = deployment.spec.template.metadata.labels as Record<string, string>;
  const matches = (selector: Record<string, string>, what: string) => {
    assert.ok(Object.keys(selector).length > 0, `${what}: a non-empty selector`);
    for (const [k, v] of Object.entries(selector)) assert.equal(podLabels[k], v, `${what}: ${k}=${v} is a pod label`);
  };
  matches(deployment.spec.selector.matchLabels, 'Deployment selector');

  const service = one('Service');
  matches(service.spec.selector, 'Service');
  const portNames = new Set((container.ports as any[]).map((p) => p.name as string));
  for (const port of service.spec.ports as any[]) assert.ok(portNames.has(port.targetPort), `Service port ${port.name}: targetPort ${port.targetPort} is a container port`);
  assert.ok((service.spec.ports as any[]).some((p) => p.port === 80 && p.targetPort === 'http'), 'port 80 to the public port (what the forward-auth examples call)');

  const pdb = one('PodDisruptionBudget');
  matches(pdb.spec.selector.matchLabels, 'PodDisruptionBudget');
  const hpa = one('HorizontalPodAutoscaler');
  assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: deployment.apiVersion, kind: 'Deployment', name: deployment.metadata.name }, 'the HPA scales the Deployment');
  assert.ok(hpa.spec.minReplicas >= 2, 'at least two replicas');
  assert.equal(deployment.spec.replicas, undefined, 'the Deployment leaves the count to the HPA (apply would reset it otherwise)');
  assert.ok(pdb.spec.maxUnavailable === 1 || (pdb.spec.minAvailable !== undefined && pdb.spec.minAvailable < hpa.spec.minReplicas), 'the PDB lets a node drain proceed');
  assert.ok((hpa.spec.metrics as any[]).every((m) => m.type !== 'Resource' || container.resources.requests[m.resource.name] !== undefined), 'the HPA\'s resources are requested');

  const policy = one('NetworkPolicy');
  matches(policy.spec.podSelector.matchLabels, 'NetworkPolicy');
  const ports = (policy.spec.ingress as any[]).flatMap((rule) => rule.ports as any[]);
  for (const port of ports) assert.ok(portNames.has(port.port), `NetworkPolicy port ${port.port} is a container port`);
  assert.deepEqual([...new Set(ports.map((p) => p.port))].sort(), ['http', 'management'], 'the NetworkPolicy admits the public and the management ports');
  const managementFrom = (policy.spec.ingress as any[]).filter((rule) => (rule.ports as any[]).some((p) => p.port === 'management'));
  for (const rule of managementFrom) assert.ok((rule.from as any[]).every((f) => f.namespaceSelector !== undefined && f.podSelector === undefined), '/metrics only from a named namespace');
});

test('forward-auth examples: ingress-nginx, Traefik and the Gateway API call /api/forward-auth on the gateway Service and copy its identity headers', () => {
  const service = one('Service');
  const namespace = one('Namespace').metadata.name;
  const serviceHost = `${service.metadata.name}.${namespace}.svc.cluster.local`;
  const files = yamlFiles(FORWARD_AUTH).map((f) => posix.basename(f));
  assert.deepEqual(files, ['gateway-api.yaml', 'ingress-nginx.yaml', 'traefik.yaml'], 'one example per proxy');
  const servicePort80 = (service.spec.ports as any[]).find((p) => p.port === 80);
  assert.ok(servicePort80 !== undefined, 'the Service has port 80');

  // ingress-nginx: auth-url, the X-Forwarded-* the gateway reads, the identity headers copied.
  const nginx = parseFile(join(FORWARD_AUTH, 'ingress-nginx.yaml'));
  const ingress = nginx.find((m) => m.kind === 'Ingress')!;
  const annotations = ingress.metadata.annotations!;
  assert.equal(annotations['nginx.ingress.kubernetes.io/auth-url'], `http://${serviceHost}${FORWARD_AUTH_PATH}`, 'auth-url is the gateway Service\'s /api/forward-auth');
  assert.deepEqual(annotations['nginx.ingress.kubernetes.io/auth-response-headers']!.split(',').map((h) => h.trim()), IDENTITY_HEADERS, 'auth-response-headers copies the identity headers');
  const [cmNamespace, cmName] = annotations['nginx.ingress.kubernetes.io/auth-proxy-set-headers']!.split('/');
  const headers = nginx.find((m) => m.kind === 'ConfigMap' && m.metadata.name === cmName && m.metadata.namespace === cmNamespace);
  assert.ok(headers !== undefined, 'auth-proxy-set-headers names the ConfigMap beside it');
  assert.deepEqual(Object.keys(headers.data).sort(), ['X-Forwarded-Host', 'X-Forwarded-Method', 'X-Forwarded-Uri'], 'the request\'s method, URI and host in the names the gateway reads');
  assert.equal(ingress.metadata.namespace, cmNamespace, 'the ConfigMap is in the Ingress\'s namespace');

  // Traefik: a ForwardAuth middleware the route uses.
  const traefik = parseFile(join(FORWARD_AUTH, 'traefik.yaml'));
  const middleware = traefik.find((m) => m.kind === 'Middleware')!;
  assert.equal(middleware.spec.forwardAuth.address, `http://${serviceHost}${FORWARD_AUTH_PATH}`, 'ForwardAuth address is the gateway Service\'s /api/forward-auth');
  assert.deepEqual(middleware.spec.forwardAuth.authResponseHeaders, IDENTITY_HEADERS, 'authResponseHeaders copies the identity headers');
  assert.equal(middleware.spec.forwardAuth.trustForwardHeader, false, 'the caller\'s own X-Forwarded-* are not trusted');
  const route = traefik.find((m) => m.kind === 'IngressRoute')!;
  assert.ok((route.spec.routes as any[]).every((r) => (r.middlewares as any[]).some((mw) => mw.name === middleware.metadata.name)), 'every route uses the middleware');

  // Gateway API: an HTTPRoute, Envoy Gateway's SecurityPolicy on it, a ReferenceGrant for the Service.
  const gatewayApi = parseFile(join(FORWARD_AUTH, 'gateway-api.yaml'));
  const httpRoute = gatewayApi.find((m) => m.kind === 'HTTPRoute')!;
  const policy = gatewayApi.find((m) => m.kind === 'SecurityPolicy')!;
  assert.deepEqual(policy.spec.targetRefs, [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: httpRoute.metadata.name }], 'the SecurityPolicy is attached to the HTTPRoute');
  assert.equal(policy.metadata.namespace, httpRoute.metadata.namespace, 'in the route\'s namespace');
  const http = policy.spec.extAuth.http;
  assert.equal(http.path, FORWARD_AUTH_PATH, 'extAuth calls /api/forward-auth');
  assert.deepEqual(http.backendRefs, [{ name: service.metadata.name, namespace, port: 80 }], 'on the gateway Service');
  assert.deepEqual(http.headersToBackend, IDENTITY_HEADERS, 'headersToBackend copies the identity headers');
  const grant = gatewayApi.find((m) => m.kind === 'ReferenceGrant')!;
  assert.equal(grant.metadata.namespace, namespace, 'the ReferenceGrant is in the gateway\'s namespace');
  assert.deepEqual(grant.spec.from, [{ group: 'gateway.envoyproxy.io', kind: 'SecurityPolicy', namespace: policy.metadata.namespace }], 'it lets the SecurityPolicy\'s namespace in');
  assert.deepEqual(grant.spec.to, [{ group: '', kind: 'Service', name: service.metadata.name }], 'to the gateway Service only');

  // The NetworkPolicy lets each proxy's namespace reach the public port.
  const networkPolicy = one('NetworkPolicy');
  const admitted = new Set((networkPolicy.spec.ingress as any[]).filter((r) => (r.ports as any[]).some((p) => p.port === 'http'))
    .flatMap((r) => r.from as any[]).map((f) => f.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name']).filter(Boolean));
  for (const ns of ['ingress-nginx', 'traefik', 'envoy-gateway-system']) assert.ok(admitted.has(ns), `the NetworkPolicy admits ${ns} to the public port`);
  assert.deepEqual(httpRoute.spec.parentRefs.map((p: any) => p.namespace), ['envoy-gateway-system'], 'the HTTPRoute\'s Gateway is in envoy-gateway-system');
});
