/**
 * auth/denied-tokens.ts: an instance's copy of the revoked access tokens. A read of the list that
 * fails (at start-up the subscription may be confirmed before the command connection is) is
 * tried again by itself, not only when another revocation is heard: a CI run saw a start-up read
 * fail, and without a later notice the tokens revoked before would have been accepted for good.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDeniedTokens } from '../../src/auth/denied-tokens.js';
import { MemoryTokenDenylist } from '../../src/state/denylist/memory.js';
import type { DeniedToken } from '../../src/state/denylist/store.js';
import { createLogger } from '../../src/telemetry/log.js';

test('a failed read of the revoked access tokens is tried again by itself, and warned of only when it fails again', { timeout: 10_000 }, async () => {
  const now = Date.now();
  const store = new MemoryTokenDenylist({ maxEntries: 100 });
  await store.deny({ jti: 'revoked-before', expiresAt: now + 60_000 }, now);
  // The store's first read fails, as a command sent before the connection is ready does.
  const reads: Array<() => void> = [];
  let calls = 0;
  const realList = store.list.bind(store);
  store.list = async (at: number): Promise<DeniedToken[]> => {
    calls += 1;
    for (const resolve of reads.splice(0)) resolve();
    if (calls === 1) throw new Error('Stream isn\'t writeable and enableOfflineQueue options is false');
    return realList(at);
  };
  const lines: Array<{ level: number; msg: string }> = [];
  const log = createLogger('debug', { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const denied = createDeniedTokens({ store, clock: { now: () => now }, log });

  await denied.load();
  assert.equal(denied.isDenied('revoked-before', undefined), false, 'the first read failed');
  await new Promise<void>((resolve) => reads.push(resolve));
  // The retry's read has been made; its answer lands in the same turn of promises.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(denied.isDenied('revoked-before', undefined), true, 'read again with no notice heard');
  assert.deepEqual(lines.filter((l) => l.msg.includes('revoked access tokens')).map((l) => l.level), [20], 'the first failure is a debug line, no warning');
});
