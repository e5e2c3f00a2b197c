/**
 * The owner store and the session store on Redis, against real servers: both contracts on one
 * redis-server and on a Cluster of three masters (a script or transaction whose keys span two
 * slots fails there with CROSSSLOT). Each contract store gets a key prefix of its own, so the
 * subtests share a server without seeing each other.
 */
import { after } from 'node:test';
import type { Config } from '../../src/config/schema.js';
import { createRecordReader } from '../../src/stores/directory-records.js';
import { RedisOwnerStore } from '../../src/stores/owner-store.redis.js';
import { RedisSessionStore } from '../../src/stores/session-store.redis.js';
import { systemClock } from '../../src/util/clock.js';
import { runOwnerStoreContract, type MakeOwnerStore } from '../contracts/owner-store.contract.js';
import { runSessionStoreContract } from '../contracts/session-store.contract.js';
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
