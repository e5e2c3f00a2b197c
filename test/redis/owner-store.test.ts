/**
 * The owner store and the session store on Redis, against real servers: both contracts on one
 * redis-server and on a Cluster of three masters (a script or transaction whose keys span two
 * slots fails there with CROSSSLOT). Each contract store gets a key prefix of its own, so the
 * subtests share a server without seeing each other.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { Config } from '../../src/config/schema.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import { RedisSessionStore } from '../../src/state/sessions/redis.js';
import { systemClock } from '../../src/util/clock.js';
import { auditEvent, runOwnerStoreContract, type MakeOwnerStore } from '../contracts/owners.contract.js';
import { runSessionStoreContract } from '../contracts/sessions.contract.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis, type TestRedis } from '../helpers/redis.js';
import { startRedisCluster, type TestRedisCluster } from '../helpers/redis-topologies.js';

const suite = redisSuite();

let server: Promise<TestRedis> | undefined;
let cluster: Promise<TestRedisCluster> | undefined;
after(async () => {
  await (await server?.catch(() => undefined))?.stop();
  await (await cluster?.catch(() => undefined))?.stop();
});

let stores = 0;
async function standalone(): Promise<Config['redis']> {
  server ??= startRedis();
  return redisSettings((await server).url, { keyPrefix: `t${++stores}` });
}
async function clustered(): Promise<Config['redis']> {
  cluster ??= startRedisCluster();
  return redisSettings('redis://unused', { url: undefined, clusterNodes: (await cluster).nodes, keyPrefix: `t${++stores}` });
}

function ownerStores(settings: () => Promise<Config['redis']>): MakeOwnerStore {
  return async (data, { maxAuditEvents }) => {
    const redis = await connectedRedis(await settings());
    const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents });
    await store.importData(data);
    return { store, close: () => redis.close() };
  };
}

function sessionStores(settings: () => Promise<Config['redis']>) {
  return async () => {
    const redis = await connectedRedis(await settings());
    return {
      sessions: new RedisSessionStore(redis, { clock: systemClock }),
      now: () => Date.now(),
      elapse: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
      close: () => redis.close(),
    };
  };
}

if (suite.skip === false) {
  runOwnerStoreContract('redis', ownerStores(standalone));
  runOwnerStoreContract('redis cluster', ownerStores(clustered));
}
runSessionStoreContract('redis', sessionStores(standalone), suite);
runSessionStoreContract('redis cluster', sessionStores(clustered), suite);

// The contract's events have ids in time order; owner/audit.ts gives events of one millisecond
// random suffixes, so their ids do not follow the order they were recorded in.
test('the audit cursor is found by position: events of one millisecond are paged each once, in the order recorded', suite, async (t) => {
  const redis = await connectedRedis(await standalone());
  t.after(() => redis.close());
  const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 });
  await store.createAccount({ id: 'acct_ms', enabled: true, apiKeys: [], members: [], invites: [], settingsTokens: [], webhooks: [] }, []);
  const at = Date.UTC(2026, 10, 23, 12);
  const recorded = ['ffff', '0000', '8888', '1111'].map((suffix, i) => auditEvent(at, `same.${i}`, 'x', suffix.repeat(3)));
  await store.appendAudit('acct_ms', recorded);
  const seen: string[] = [];
  let before: string | undefined;
  for (let page = 0; page < 6; page++) {
    const events = await store.listAudit('acct_ms', { limit: 1, ...(before === undefined ? {} : { before }) });
    if (events.length === 0) break;
    seen.push(events[0]!.action);
    before = events[0]!.id;
  }
  assert.deepEqual(seen, ['same.3', 'same.2', 'same.1', 'same.0']);
  // A cursor no longer stored (trimmed away) still pages by id: older events only.
  const older = await store.listAudit('acct_ms', { before: auditEvent(at, 'gone', 'x', '9'.repeat(12)).id, limit: 10 });
  assert.deepEqual(older.map((e) => e.action), ['same.3', 'same.2', 'same.1']);
});

// Each sign-in adds its digest to the owner's set, whose TTL each sign-in extends: an owner who
// signs in more often than sessionMaxSeconds kept it for ever, growing by one ended digest each time.
test('an owner\'s session set does not keep the digests of ended sessions without end', suite, async (t) => {
  const settings = await standalone();
  const redis = await connectedRedis(settings);
  t.after(() => redis.close());
  const sessions = new RedisSessionStore(redis, { clock: systemClock });
  const session = () => ({ ownerId: 'own_often', csrfToken: 'c', createdAt: Date.now(), idleExpiresAt: Date.now() + 60_000, expiresAt: Date.now() + 600_000 });
  for (let i = 0; i < 40; i++) {
    await sessions.create(`sha256:ended${i}`, session());
    await sessions.delete(`sha256:ended${i}`);
  }
  await sessions.create('sha256:live', session());
  const held = await redis.run((c) => c.smembers(redis.keys.ownerSessions('own_often')));
  assert.ok(held.includes('sha256:live'));
  assert.ok(held.length <= 17, `${held.length} digests held for 1 live session`);
});
