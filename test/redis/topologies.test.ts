/**
 * The gateway on Redis Cluster and on Redis Sentinel, against real servers.
 *
 * Cluster (3 masters, no replicas, one Cluster for the whole file): the token-store contract,
 * which runs every Lua script (a script whose keys span two slots fails with CROSSSLOT), the
 * revocation contract (notices between two connections), the hash tags checked on the servers
 * themselves, and two gateways end to end, one of them reading API keys from the Cluster:
 * sign-in, refresh, bearer calls, /readyz, and a reset on one gateway refused on both, the
 * other hearing of it over pub/sub.
 *
 * Sentinel (one master, one sentinel): a gateway given only the sentinels and a master name
 * finds the master, signs in and refreshes, /readyz 200; an unknown name leaves redis down.
 *
 * And redis.tls on both topologies, against a bare TCP server that records what it is sent.
 */
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { decodeJwt } from 'jose';
import type { Config } from '../../src/config/schema.js';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import { RedisKeyDirectory } from '../../src/state/keys/redis.js';
import { connectRedis } from '../../src/state/redis/client.js';
import { RedisRevocationStore } from '../../src/state/revocation/redis.js';
import { RedisRefreshTokenStore } from '../../src/state/tokens/redis.js';
import { ManualClock } from '../helpers/clock.js';
import { call, DEMO, postJson, sha256Hex, signIn, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, twoRevocationStores } from '../helpers/redis.js';
import { redisCli, startRedisCluster, startRedisSentinel, type TestRedisCluster } from '../helpers/redis-topologies.js';
import { runRevocationContract } from '../contracts/revocation.contract.js';
import { runTokenStoreContract } from '../contracts/tokens.contract.js';
import { runDenylistContract } from '../contracts/denylist.contract.js';
import { RedisTokenDenylist } from '../../src/state/denylist/redis.js';

const RETAIN_MS = 30 * 86_400_000;

// One Cluster for the file (creating one takes about two seconds), started by the first test
// that needs it and killed once every test has run.
let cluster: Promise<TestRedisCluster> | undefined;
function sharedCluster(): Promise<TestRedisCluster> {
  cluster ??= startRedisCluster();
  return cluster;
}
after(async () => {
  await (await cluster?.catch(() => undefined))?.stop();
});

function clusterSettings(nodes: string[], extra: Partial<Config['redis']> = {}): Config['redis'] {
  return redisSettings('redis://unused', { url: undefined, clusterNodes: nodes, ...extra });
}


/** Keys matching `pattern` on each node, by port (a Cluster node answers KEYS for its own slots only). */
async function keysByNode(c: TestRedisCluster, pattern: string): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  for (const port of c.ports) out.set(port, (await redisCli(port, ['--no-raw', 'keys', pattern])).match(/"[^"]*"/g)?.map((k) => JSON.parse(k) as string) ?? []);
  return out;
}

/** Subscribers of `channel` over the whole Cluster (PUBSUB NUMSUB counts one node's own clients). */
async function subscribersOf(c: TestRedisCluster, channel: string): Promise<number> {
  let count = 0;
  for (const port of c.ports) count += Number((await redisCli(port, ['pubsub', 'numsub', channel])).trim().split('\n')[1] ?? 0);
  return count;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

function refresh(gw: TestGateway, refreshToken: string): Promise<JsonResponse> {
  return postJson(`${gw.url}/api/refresh`, { refreshToken });
}

function roles(gw: TestGateway, accessToken: string): Promise<JsonResponse> {
  return call(`${gw.url}/api/roles`, { token: accessToken });
}

function assertStatus(res: JsonResponse, status: number, label: string): void {
  assert.equal(res.status, status, `${label}: ${res.status} ${JSON.stringify(res.body)}`);
}

async function assertReady(gw: TestGateway): Promise<void> {
  const res = await call(`${gw.url}/readyz`);
  assertStatus(res, 200, '/readyz');
  assert.deepEqual(res.body.message, { status: 'ready', checks: { redis: 'up', directory: 'up', signingKeys: 'up' } });
}

// Order: what leaves ioredis's 2 s disconnect timers behind (sockets closed under a client)
// runs early, so they run out while later tests run instead of holding the process at the end.

// ---------------------------------------------------------------- TLS (no server needed)

/**
 * The first bytes a client built from these settings sends to a TCP server of ours: a TLS
 * ClientHello starts with 0x16 (handshake record), a plain Redis command with '*'.
 */
async function firstBytesSent(mode: 'sentinels' | 'clusterNodes'): Promise<Buffer> {
  const sockets = new Set<Socket>();
  const server = createServer();
  const first = new Promise<Buffer>((resolve) => server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('data', (data) => resolve(data));
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const settings = redisSettings('redis://unused', mode === 'sentinels'
    ? { url: undefined, sentinels: [address], tls: true }
    : { url: undefined, clusterNodes: [address], tls: true });
  const redis = connectRedis(settings, silentLog);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      first,
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`nothing sent to the ${mode} address within 3 s`)), 3000); }),
    ]);
  } finally {
    clearTimeout(timer);
    await redis.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

test('redis.tls reaches the connections to Cluster nodes and to sentinels', async (t) => {
  await t.test('Cluster nodes are spoken to over TLS', async () => {
    const sent = await firstBytesSent('clusterNodes');
    assert.equal(sent[0], 0x16, `expected a TLS handshake, got ${JSON.stringify(sent.subarray(0, 24).toString('latin1'))}`);
  });

  // Found while writing these tests: the schema says "TLS to Sentinel and Cluster nodes", but
  // ioredis's enableTLSForSentinelMode covers only the master found; sentinels take sentinelTLS.
  await t.test('sentinels are spoken to over TLS', async () => {
    const sent = await firstBytesSent('sentinels');
    assert.equal(sent[0], 0x16, `expected a TLS handshake, got ${JSON.stringify(sent.subarray(0, 24).toString('latin1'))}`);
  });
});

// ---------------------------------------------------------------- Sentinel

test('Redis Sentinel: a gateway given the sentinels and the master name finds the master', redisSuite(), async (t) => {
  const sentinel = await startRedisSentinel(t, { name: 'gw-test-master' });
  const gw = await startGateway(t, { overrides: { redis: { sentinels: sentinel.sentinels, sentinelName: sentinel.name } } });

  await t.test('/readyz is 200', () => assertReady(gw));

  await t.test('signs in, refreshes, answers a bearer call, and keeps the tokens on the master', async () => {
    const first = await signIn(gw);
    const res = await refresh(gw, first.refreshToken);
    assertStatus(res, 200, 'refresh');
    const next = res.body.message;
    assertStatus(await roles(gw, next.accessToken), 200, 'roles with the refreshed access token');
    const duplicate = await refresh(gw, first.refreshToken);
    assertStatus(duplicate, 200, 'a duplicate within the grace window');
    assert.deepEqual(duplicate.body.message, next);
    // Past the grace window the spent token is a reuse: refused, and its family with it.
    gw.clock.advance(gw.services.config.tokens.refreshGraceSeconds * 1000 + 1);
    assertStatus(await refresh(gw, first.refreshToken), 401, 'the spent refresh token after the grace window');
    assertStatus(await refresh(gw, next.refreshToken), 401, 'its successor, once the family is revoked');
    const keys = await redisCli(sentinel.masterPort, ['keys', `gw:fam:{${DEMO.alice.accountId}}:*`]);
    assert.match(keys, /gw:fam:\{acct_alice\}:/);
  });

  await t.test('a master name the sentinels do not know: redis down (degraded), sign-in 503', async () => {
    const lost = await startGateway(t, {
      overrides: { redis: { sentinels: sentinel.sentinels, sentinelName: 'no-such-master', connectTimeoutMs: 200 } },
    });
    const ready = await call(`${lost.url}/readyz`);
    assertStatus(ready, 200, '/readyz');
    assert.deepEqual(ready.body.message, { status: 'degraded', checks: { redis: 'down', directory: 'up', signingKeys: 'up' }, degraded: ['redis'] });
    const res = await postJson(`${lost.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assertStatus(res, 503, 'sign-in');
    await lost.close();
  });

  // t.after hooks run in the order they were added, so the servers would go first; a Sentinel
  // client closed after its servers are gone keeps a 2 s timer (ioredis), holding the process.
  await gw.close();
});

// ---------------------------------------------------------------- Cluster

runTokenStoreContract('redis cluster (3 masters)', async () => {
  const c = await sharedCluster();
  const redis = await connectedRedis(clusterSettings(c.nodes, { keyPrefix: 'contract' }));
  return {
    store: new RedisRefreshTokenStore(redis),
    resets: new RedisRevocationStore(redis, { retainMs: RETAIN_MS, log: silentLog }),
    close: () => redis.close(),
  };
}, redisSuite());

// Two connections, each with its own store: two gateway instances. Their reset notices travel
// from the node that ran the script to whichever node each subscriber picked.
runRevocationContract('redis cluster (3 masters)', async () => {
  const c = await sharedCluster();
  return twoRevocationStores(clusterSettings(c.nodes, { keyPrefix: 'revocation' }), RETAIN_MS);
}, redisSuite());

// Revoked access tokens: one key, one slot; the notices reach a subscriber on any node.
runDenylistContract('redis cluster (3 masters)', async () => {
  const c = await sharedCluster();
  const connections = [await connectedRedis(clusterSettings(c.nodes, { keyPrefix: 'denied' })), await connectedRedis(clusterSettings(c.nodes, { keyPrefix: 'denied' }))];
  const [a, b] = connections.map((redis) => new RedisTokenDenylist(redis, { maxEntries: 20, log: silentLog }));
  await new Promise<void>((resolve) => b!.watch({ onDenied() {}, onGap: resolve }));
  return {
    a: a!, b: b!, maxEntries: 20,
    close: async () => {
      for (const redis of connections) await redis.close();
    },
  };
}, redisSuite());

test('Redis Cluster: each account\'s keys share one slot, and accounts spread over the masters', redisSuite(), async (t) => {
  const c = await sharedCluster();
  const redis = await connectedRedis(clusterSettings(c.nodes, { keyPrefix: 'slots' }));
  t.after(() => redis.close());
  const store = new RedisRefreshTokenStore(redis);
  const resets = new RedisRevocationStore(redis, { retainMs: RETAIN_MS, log: silentLog });

  const now = Date.now();
  const accounts = Array.from({ length: 24 }, (_, i) => `acct_${i}`);
  for (const accountId of accounts) {
    const familyId = `fam_${accountId}`;
    await store.createFamily({ familyId, accountId, keyId: 'key_1', familyExpiresAt: now + 3_600_000, token: { tokenId: `t1_${accountId}`, secretHash: 'aa'.repeat(32), expiresAt: now + 3_600_000 } }, now);
    const rotated = await store.rotate({
      tokenId: `t1_${accountId}`, accountId, keyId: 'key_1', familyId, secretHash: 'aa'.repeat(32), now: now + 1,
      graceMs: 1000, successor: { tokenId: `t2_${accountId}`, secretHash: 'bb'.repeat(32), expiresAt: now + 3_600_000 }, sealedPair: 'sealed',
    });
    assert.deepEqual(rotated, { outcome: 'rotated' }, accountId);
    await resets.reset({ accountId, keyId: 'key_1' }, now + 2);
    assert.equal((await resets.read(accountId)).keys.get('key_1'), now + 2, accountId);
  }

  const byNode = await keysByNode(c, 'slots:*');
  const nodeOf = new Map<string, number[]>();
  for (const [port, keys] of byNode) {
    for (const key of keys) {
      const account = /\{([^}]*)\}/.exec(key)?.[1];
      assert.ok(account !== undefined, `key without a hash tag: ${key}`);
      nodeOf.set(account, [...(nodeOf.get(account) ?? []), port]);
    }
  }
  for (const accountId of accounts) {
    // The family, both tokens and the resets hash: four keys, all on one node.
    const ports = nodeOf.get(accountId) ?? [];
    assert.equal(ports.length, 4, `${accountId}: ${JSON.stringify(ports)}`);
    assert.equal(new Set(ports).size, 1, `${accountId} is split over nodes ${JSON.stringify(ports)}`);
    const slots = await Promise.all([redisCli(c.ports[0]!, ['cluster', 'keyslot', `slots:rt:{${accountId}}:x`]), redisCli(c.ports[0]!, ['cluster', 'keyslot', `slots:reset:{${accountId}}`])]);
    assert.equal(slots[0], slots[1], accountId);
  }
  const used = [...byNode.values()].filter((keys) => keys.length > 0).length;
  assert.ok(used >= 2, `24 accounts all landed on one master: ${JSON.stringify([...byNode])}`);
});

// On a Cluster a notice can be lost when the subscriber's node connection is replaced; the
// replacement must be reported as a gap, as on a standalone Redis (ioredis's own Cluster
// subscriber replaces its connection silently, so the gateway keeps one of its own).
test('Redis Cluster: the reset subscriber reports a gap when its connection is replaced', redisSuite(), async (t) => {
  const c = await sharedCluster();
  const redis = await connectedRedis(clusterSettings(c.nodes, { keyPrefix: 'gap' }));
  t.after(() => redis.close());
  let gaps = 0;
  const heard: string[] = [];
  redis.subscribe('gap:resets', (message) => heard.push(message), () => gaps++);
  await waitFor('the subscription', async () => (await subscribersOf(c, 'gap:resets')) >= 1);
  assert.ok(gaps >= 1, 'the first connection is reported');
  const before = gaps;

  for (const port of c.ports) await redisCli(port, ['client', 'kill', 'type', 'pubsub']);
  let n = 0;
  await waitFor('the subscription to come back', async () => {
    await redisCli(c.ports[0]!, ['publish', 'gap:resets', `probe-${++n}`]);
    await new Promise((r) => setTimeout(r, 20));
    return heard.length > 0;
  });
  assert.ok(gaps > before, `the subscriber connection was replaced (it hears again: ${JSON.stringify(heard)}) but no gap was reported`);
});

test('Redis Cluster: two gateways sign in, refresh, call, and both honour a reset made on one', redisSuite(), async (t) => {
  const c = await sharedCluster();
  const redis = { clusterNodes: c.nodes, keyPrefix: 'e2e' };
  // One clock for both: tokens issued by either are compared with resets made by the other,
  // and the reset caches never go stale by themselves (only a notice can update them).
  const clock = new ManualClock(Date.now());
  const a = await startGateway(t, { clock, overrides: { redis } });
  // B reads its API keys from the Cluster (two hashes per key, in two slots).
  const b = await startGateway(t, { clock, overrides: { redis, data: { keySource: 'redis' } } });
  assert.equal(a.services.state, 'redis');

  await t.test('/readyz is 200 on both', async () => {
    await assertReady(a);
    await assertReady(b);
  });

  await t.test('API keys written to the Cluster sign in on the gateway that reads them there', async () => {
    const unknown = await postJson(`${b.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assertStatus(unknown, 401, 'sign-in before the keys are imported');
    const imported = await (b.services.keys as RedisKeyDirectory).importKeys(readDataFile(b.services.config.data.file));
    assert.ok(imported >= 3, `imported ${imported}`);
    const found = await b.services.keys.findByKeyId(DEMO.bob.keyId);
    assert.equal(found?.accountId, DEMO.bob.accountId);
  });

  // Both gateways listen for reset notices before any token is checked, so that nothing but
  // a notice can tell B of the reset below.
  await waitFor('both gateways subscribed to e2e:resets', async () => (await subscribersOf(c, 'e2e:resets')) >= 2);

  const first = await signIn(a);
  const onB = await signIn(b);
  const bobOnB = await signIn(b, DEMO.bob);
  let current = first;

  await t.test('sign-in, refresh and bearer calls work through the Cluster', async () => {
    assertStatus(await roles(a, first.accessToken), 200, 'roles with the first access token');
    const res = await refresh(a, first.refreshToken);
    assertStatus(res, 200, 'refresh');
    current = res.body.message;
    assert.notEqual(current.refreshToken, first.refreshToken);
    assert.equal(decodeJwt(current.accessToken).sub, DEMO.alice.accountId);
    assertStatus(await roles(a, current.accessToken), 200, 'roles with the refreshed access token');
    // Within the grace window a duplicate gets the same pair back (sealed in the spent token's
    // hash by the rotate script), on A and on B alike: the state is shared.
    for (const gw of [a, b]) {
      const again = await refresh(gw, first.refreshToken);
      assertStatus(again, 200, `the spent refresh token, again, on ${gw === a ? 'A' : 'B'}`);
      assert.deepEqual(again.body.message, current);
    }
    // B caches alice's (empty) resets here, and the clock never makes that copy stale.
    assertStatus(await roles(b, onB.accessToken), 200, 'roles on B');
    assertStatus(await roles(b, bobOnB.accessToken), 200, 'bob on B');
  });

  await t.test('a reset on A is refused on A, and on B once its notice arrives', async () => {
    clock.advance(1);
    const reset = await postJson(`${a.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
    assertStatus(reset, 200, 'reset');
    assert.equal(reset.body.message.keyId, DEMO.alice.keyId);

    // The refresh script reads the reset from the same slot as the token.
    const refused = await refresh(a, current.refreshToken);
    assertStatus(refused, 401, 'refresh after the reset');
    assert.equal(refused.body.message.code, 'invalid_grant');

    await waitFor('A to refuse the access token issued before the reset', async () => (await roles(a, current.accessToken)).status === 401, 2000);
    await waitFor('B to refuse its access token (only the pub/sub notice can tell it)', async () => (await roles(b, onB.accessToken)).status === 401, 2000);
    const res = await roles(b, onB.accessToken);
    assert.equal(res.body.message.code, 'invalid_token');

    // Another account is untouched, and alice can sign in again afterwards.
    assertStatus(await roles(b, bobOnB.accessToken), 200, 'bob on B after alice\'s reset');
    clock.advance(1);
    const again = await signIn(a);
    assertStatus(await roles(a, again.accessToken), 200, 'a new sign-in after the reset');
    assertStatus(await refresh(a, again.refreshToken), 200, 'refresh after signing in again');
  });

  await t.test('the tokens live on the Cluster under the account\'s hash tag', async () => {
    const keys = [...(await keysByNode(c, 'e2e:*')).values()].flat();
    assert.ok(keys.some((k) => k.startsWith(`e2e:fam:{${DEMO.alice.accountId}}:`)), JSON.stringify(keys));
    assert.ok(keys.includes(`e2e:reset:{${DEMO.alice.accountId}}`), JSON.stringify(keys));
    assert.ok(keys.some((k) => k.startsWith(`e2e:rt:{${DEMO.bob.accountId}}:`)), JSON.stringify(keys));
  });
});
