import { MemoryTokenDenylist } from '../../src/state/denylist/memory.js';
import { RedisTokenDenylist } from '../../src/state/denylist/redis.js';
import type { RedisConnection } from '../../src/state/redis/client.js';
import { runDenylistContract } from '../contracts/denylist.contract.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

const MAX = 20;

runDenylistContract('memory', async () => {
  const store = new MemoryTokenDenylist({ maxEntries: MAX });
  return { a: store, b: store, maxEntries: MAX, close: async () => {} };
});

// Two connections: two instances on one Redis.
runDenylistContract('redis', async () => {
  const server = await startRedis();
  const connections: RedisConnection[] = [];
  for (let i = 0; i < 2; i++) connections.push(await connectedRedis(redisSettings(server.url)));
  const [a, b] = connections.map((redis) => new RedisTokenDenylist(redis, { maxEntries: MAX, log: silentLog }));
  // The notices flow once b's subscription is confirmed (its first gap).
  const subscribed = new Promise<void>((resolve) => b!.watch({ onDenied() {}, onGap: resolve }));
  await subscribed;
  return {
    a: a!, b: b!, maxEntries: MAX,
    close: async () => {
      for (const redis of connections) await redis.close();
      await server.stop();
    },
  };
}, redisSuite());
