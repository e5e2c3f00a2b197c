/**
 * `owner.passwordHashNice`: libuv's pool threads, where argon2 runs, get the nice value asked
 * for once a hash has run (the pool starts its threads at its first use). Its own file: a
 * process cannot lower its threads' nice value again, so the rest of the suite keeps its own.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { hashPassword, limitHashing } from '../../src/owner/passwords.js';

/** The nice values of this process's libuv pool threads (field 19 of each thread's stat). */
function poolNice(): number[] {
  const values: number[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    if (readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() !== 'libuv-worker') continue;
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    values.push(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
  }
  return values;
}

test('the pool threads get `passwordHashNice` once a hash has run', { skip: process.platform !== 'linux' && 'nice values of threads are read from /proc' }, async () => {
  await hashPassword('a password to start the pool with');
  const before = poolNice();
  assert.ok(before.length >= 1, 'libuv\'s pool has started');
  assert.ok(before.every((n) => n !== 7), `not 7 to begin with: ${before.join(', ')}`);
  limitHashing({ concurrency: 0, queue: 64, nice: 7 });
  await hashPassword('another password of some length');
  assert.deepEqual(poolNice(), before.map(() => 7));
});
