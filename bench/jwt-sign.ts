/**
 * What one access token costs to sign, on one core: the gateway's signer (jose SignJWT, which
 * signs through WebCrypto: each signature is a job on libuv's thread pool and a promise) next
 * to node:crypto's synchronous sign() of the same header and claims. Explains the largest item
 * of the sign-in and refresh profiles (bench/README.md).
 *
 *   node --import tsx bench/jwt-sign.ts [seconds per run, default 1.5]
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { createSigner } from '../src/auth/signer.js';
import { loadConfig } from '../src/config/load.js';
import { systemClock } from '../src/util/clock.js';

const seconds = Number(process.argv[2] ?? 1.5);
if (!(seconds > 0 && seconds <= 10)) throw new Error('seconds per run: more than 0, at most 10');
// One core for every thread of this process (the thread pool is started later and inherits it).
const pinned = cpus().length >= 2 && spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' }).status === 0;

const { privateKey } = generateKeyPairSync('ed25519');
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const config = loadConfig({ env: { SIGNING_KEYS: JSON.stringify([{ kid: 'bench-1', alg: 'EdDSA', pem }]) } });
const signer = createSigner(config, systemClock);
const key = createPrivateKey(pem);
const subject = { accountId: 'acct_alice', keyId: 'key_alice_1' };
const { issuer, audience, accessTokenTtlSeconds } = config.tokens;

/** The same token as the signer's, signed synchronously. */
function signSync(): string {
  const now = Date.now();
  const iat = Math.floor(now / 1000);
  const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', kid: 'bench-1', typ: 'at+jwt' })).toString('base64url');
  const payload = Buffer.from(JSON.stringify({
    client_id: subject.keyId, iat_ms: now, iss: issuer, aud: audience, sub: subject.accountId,
    jti: randomBytes(16).toString('base64url'), iat, exp: iat + accessTokenTtlSeconds,
  })).toString('base64url');
  const input = `${header}.${payload}`;
  return `${input}.${sign(null, Buffer.from(input), key).toString('base64url')}`;
}

interface Result { opsPerSec: number; cpuUsPerOp: number }

async function run(kind: 'jose' | 'jose×32' | 'sync'): Promise<Result> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + seconds * 1000;
  let n = 0;
  while (performance.now() < end) {
    if (kind === 'sync') {
      for (let i = 0; i < 32; i++) signSync();
      n += 32;
      await Promise.resolve();
    } else if (kind === 'jose') {
      await signer.issueAccessToken(subject);
      n++;
    } else {
      await Promise.all(Array.from({ length: 32 }, () => signer.issueAccessToken(subject)));
      n += 32;
    }
  }
  const elapsed = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  return { opsPerSec: n / elapsed, cpuUsPerOp: (used.user + used.system) / n };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Both kinds of token verify with the gateway's own verifier.
await signer.verifyAccessToken(await signer.issueAccessToken(subject));
await signer.verifyAccessToken(signSync());

const kinds = ['jose', 'jose×32', 'sync'] as const;
const results = new Map<string, Result[]>(kinds.map((k) => [k, []]));
for (let i = 0; i < 4; i++) for (const k of kinds) {
  const r = await run(k);
  if (i > 0) results.get(k)!.push(r); // the first pass warms up
}
process.stdout.write(`Ed25519 access tokens, Node ${process.version}, ${pinned ? 'pinned to core 1' : 'not pinned'}, medians of 3 runs of ${seconds} s\n\n`);
process.stdout.write('| how | tokens/s | CPU µs/token (all threads) |\n|---|---:|---:|\n');
const labels = { jose: 'signer.issueAccessToken (jose → WebCrypto), one at a time', 'jose×32': 'signer.issueAccessToken, 32 at a time', sync: 'node:crypto sign(), synchronous, same header and claims' };
for (const k of kinds) {
  const rs = results.get(k)!;
  process.stdout.write(`| ${labels[k]} | ${median(rs.map((r) => r.opsPerSec)).toFixed(0)} | ${median(rs.map((r) => r.cpuUsPerOp)).toFixed(1)} |\n`);
}
