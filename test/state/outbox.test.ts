/**
 * The mail outbox: the contract (test/contracts/outbox.contract.ts) on memory, on the file a
 * gateway alone keeps (read back as a restart reads it) and on Redis (two connections: two
 * instances), and what only the file promises: its mode, and a refusal to start on a file that
 * is not an outbox.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openFileOutbox } from '../../src/state/outbox/file.js';
import { MemoryOutbox } from '../../src/state/outbox/memory.js';
import { RedisOutbox } from '../../src/state/outbox/redis.js';
import { newMail, runOutboxContract } from '../contracts/outbox.contract.js';
import { connectedRedis, redisSettings, redisSuite, startRedis, type TestRedis } from '../helpers/redis.js';

const dir = mkdtempSync(join(tmpdir(), 'gw-outbox-'));
after(() => rmSync(dir, { recursive: true, force: true }));

runOutboxContract('memory', async () => {
  const outbox = new MemoryOutbox();
  return { outbox, second: outbox, close: async () => {} };
});

runOutboxContract('file', async () => {
  const file = join(dir, 'contract', 'outbox.json');
  const outbox = openFileOutbox(file);
  return { outbox, second: outbox, reopen: async () => openFileOutbox(file), close: async () => {} };
});

const suite = redisSuite();
let server: Promise<TestRedis> | undefined;
after(async () => (await server?.catch(() => undefined))?.stop());
runOutboxContract('redis', async () => {
  server ??= startRedis();
  const settings = redisSettings((await server).url, { keyPrefix: 'outbox' });
  const [a, b, c] = [await connectedRedis(settings), await connectedRedis(settings), await connectedRedis(settings)];
  return {
    outbox: new RedisOutbox(a),
    second: new RedisOutbox(b),
    reopen: async () => new RedisOutbox(c),
    close: async () => {
      for (const r of [a, b, c]) await r.close();
    },
  };
}, suite);

test('the file outbox is mode 0600 (queued mails hold one-time links)', async () => {
  const file = join(dir, 'mode', 'outbox.json');
  await openFileOutbox(file).enqueue([newMail()], 10);
  assert.equal(statSync(file).mode & 0o777, 0o600);
});

test('a file that is not an outbox stops the start, naming it', () => {
  const file = join(dir, 'bad.json');
  writeFileSync(file, '{"accountKey": "not mine"}');
  assert.throws(() => openFileOutbox(file), /mail\.outboxFile .*bad\.json is not an outbox/);
});
