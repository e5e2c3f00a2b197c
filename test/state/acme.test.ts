/**
 * ACME's state: the contract (test/contracts/acme.contract.ts) against the file (with this
 * process's answers) and a real redis-server, then what each promises besides: the file's mode
 * and its lock lapsing on the clock; Redis's TTLs, its lock across instances (a lapsed holder
 * never releases the next one's), one account key for two instances, and the announcement of a
 * saved certificate to the other instances.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createFileAcmeStore, createMemoryChallengeStore } from '../../src/state/acme/file.js';
import { RedisAcmeStore, RedisChallengeStore } from '../../src/state/acme/redis.js';
import { runAcmeStoreContract } from '../contracts/acme.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/process.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, serverWithConnection } from '../helpers/redis.js';

runAcmeStoreContract('file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-acme-state-'));
  const file = join(dir, 'acme.json');
  const clock = new ManualClock(Date.now());
  return {
    store: createFileAcmeStore(file, clock),
    challenges: createMemoryChallengeStore(clock),
    peer: async () => createFileAcmeStore(file, clock),
    close: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

runAcmeStoreContract('redis', async () => {
  const { redis, server, close } = await serverWithConnection();
  const peers: { close(): Promise<void> }[] = [];
  return {
    store: new RedisAcmeStore(redis),
    challenges: new RedisChallengeStore(redis),
    peer: async () => {
      const other = await connectedRedis(redisSettings(server.url));
      peers.push(other);
      return new RedisAcmeStore(other);
    },
    close: async () => {
      for (const other of peers) await other.close();
      await close();
    },
  };
}, redisSuite());

test('file: written with mode 0600 (it holds private keys); the lock lapses after its TTL on the clock, and the lapsed holder cannot release the next', async (t) => {
  const file = join(tempDir(t), 'nested', 'acme.json');
  const clock = new ManualClock(Date.now());
  const store = createFileAcmeStore(file, clock);
  await store.accountKey(async () => 'account-key');
  assert.equal(statSync(file).mode & 0o777, 0o600);

  const lapsed = await store.lockOrder(1000);
  clock.advance(999);
  assert.equal(await store.lockOrder(1000), undefined);
  clock.advance(1);
  const next = await store.lockOrder(1000);
  assert.equal(typeof next, 'string');
  await store.unlockOrder(lapsed!);
  assert.equal(await store.lockOrder(1000), undefined, 'the lapsed holder released nothing');
});

test('file: a state file that is not JSON is left alone, and every look says which file', async (t) => {
  const file = join(tempDir(t), 'acme.json');
  writeFileSync(file, '{"accountKey": "-----BEGIN');
  const store = createFileAcmeStore(file, new ManualClock(Date.now()));
  await assert.rejects(store.certificate(), (err: Error) => err.message.includes(file) && !err.message.includes('BEGIN'));
  await assert.rejects(store.saveCertificate({ serverNames: ['a.gateway.test'], certPem: 'c', keyPem: 'k' }, Date.now()));
  assert.equal(readFileSync(file, 'utf8'), '{"accountKey": "-----BEGIN');
});

test('memory answers lapse after their TTL on the clock', async () => {
  const clock = new ManualClock(Date.now());
  const challenges = createMemoryChallengeStore(clock);
  await challenges.set('tok_a', 'a', 1000);
  clock.advance(999);
  assert.equal(await challenges.get('tok_a'), 'a');
  clock.advance(1);
  assert.equal(await challenges.get('tok_a'), undefined);
});

test('Redis: TTLs on the lock, the answers and the certificate (its expiry); the lock across instances; one account key; saves announced to the others', redisSuite(), async (t) => {
  const { redis, server, close } = await serverWithConnection();
  t.after(close);
  const other = await connectedRedis(redisSettings(server.url));
  t.after(() => other.close());
  const raw = await rawRedisClient(t, server);
  const [a, b] = [new RedisAcmeStore(redis), new RedisAcmeStore(other)];

  const [keyA, keyB] = await Promise.all([a.accountKey(async () => 'key-of-a'), b.accountKey(async () => 'key-of-b')]);
  assert.equal(keyA, keyB, 'two instances making a key at once end up with one');
  assert.equal(await raw.pttl(redis.keys.acmeAccountKey), -1, 'the account key has no TTL');

  const token = await a.lockOrder(600_000);
  assert.equal(await b.lockOrder(600_000), undefined, 'another instance holds the lock');
  const lockTtl = await raw.pttl(redis.keys.acmeLock);
  assert.ok(lockTtl > 0 && lockTtl <= 600_000, `lock PTTL ${lockTtl}`);
  // The lock lapses (as its TTL would end it) and b takes it: a's late release leaves b's.
  await raw.del(redis.keys.acmeLock);
  const taken = await b.lockOrder(600_000);
  assert.equal(typeof taken, 'string');
  await a.unlockOrder(token!);
  assert.equal(await raw.get(redis.keys.acmeLock), taken);
  await b.unlockOrder(taken!);
  assert.equal(await raw.exists(redis.keys.acmeLock), 0);

  await new RedisChallengeStore(redis).set('tok_ttl_0123456789abcdefgh', 'answer', 600_000);
  const answerTtl = await raw.pttl(redis.keys.acmeChallenge('tok_ttl_0123456789abcdefgh'));
  assert.ok(answerTtl > 0 && answerTtl <= 600_000, `answer PTTL ${answerTtl}`);
  assert.equal(await new RedisChallengeStore(other).get('tok_ttl_0123456789abcdefgh'), 'answer', 'another instance reads it');

  // b hears of a's save (its first call: the subscription confirmed, a look in case one was missed).
  let heard = 0;
  let wake: (() => void) | undefined;
  b.onCertificateSaved(() => { heard++; wake?.(); });
  const heardAtLeast = (n: number) => new Promise<void>((resolve) => { wake = () => { if (heard >= n) resolve(); }; wake(); });
  await heardAtLeast(1);
  const expiresAt = Date.now() + 3_600_000;
  await a.saveCertificate({ serverNames: ['a.gateway.test'], certPem: 'cert', keyPem: 'key' }, expiresAt);
  await heardAtLeast(2);
  const certTtl = await raw.pttl(redis.keys.acmeCertificate);
  assert.ok(Math.abs(Date.now() + certTtl - expiresAt) < 5000, `certificate PTTL ${certTtl} ends at its expiry`);

  // Something that is not a certificate (written by hand) reads as none: the next check orders.
  await raw.set(redis.keys.acmeCertificate, '{"certPem": 1}');
  assert.equal(await a.certificate(), undefined);
});
