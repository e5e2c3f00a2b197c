/**
 * Debian's pebble (an ACME test CA) and pebble-challtestsrv (its DNS: every name → 127.0.0.1)
 * on ephemeral ports, for the ACME tests. pebble validates HTTP-01 on `httpPort` of 127.0.0.1
 * (a gateway's redirect listener, or a responder of the test's) and TLS-ALPN-01 on `tlsPort`
 * (a gateway's main listener). Its own HTTPS certificate is
 * signed by a test CA (`caFile`: what NODE_EXTRA_CA_CERTS names); the certificates it issues
 * chain to a root made at its start (`issuingRoot`). The caller stops it (`stop`), from the
 * `after` of its suite or test: node:test's `after` called inside a `before` hook runs at once.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis.js';
import { makeTestCa } from './tls.js';

export const pebbleInstalled = spawnSync('pebble', ['-h'], { stdio: 'ignore' }).error === undefined;

/** Options for describe/test: skipped, loudly, without pebble unless CI is set (CI installs it: .ci/run). */
export function pebbleSuite(): { skip: string | false } {
  if (pebbleInstalled || process.env.CI) return { skip: false };
  const message = 'pebble is not installed (apt-get install pebble): ACME tests SKIPPED';
  console.warn(`\n*** ${message} ***\n`);
  return { skip: message };
}

export interface Pebble {
  /** https://127.0.0.1:<port>/dir */
  directoryUrl: string;
  /** The PEM file of the CA that signed pebble's own HTTPS certificate. */
  caFile: string;
  caPem: string;
  /** An agent trusting pebble's HTTPS certificate, for acme-client's axios in this process. */
  agent: Agent;
  /** The root the certificates pebble issues chain to (PEM), from its management API. */
  issuingRoot(): Promise<string>;
  stop(): void;
}

export interface PebbleOptions {
  /** The port of 127.0.0.1 pebble fetches HTTP-01 answers from. */
  httpPort: number;
  /** The port of 127.0.0.1 pebble makes its TLS-ALPN-01 handshakes with (a gateway's main listener). */
  tlsPort?: number;
  /** Accounts need external account binding with one of these key ids and HMAC keys (base64url). */
  eabKeys?: Record<string, string>;
}

/**
 * pebble and pebble-challtestsrv on free ports. Their ports are picked here and bound by them
 * later, so on a busy machine another process may take one in between: pebble then logs its
 * directory as available and exits on the failed bind, and whoever holds the port answers (or
 * hangs). So a start counts only once the directory answers as pebble's, both programs still
 * running; otherwise it is tried again on other ports.
 */
export async function startPebble(options: PebbleOptions): Promise<Pebble> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await startPebbleOnce(options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

/** GET `url` with `agent`: the status and body, or the error's message as the body (status 0). */
function fetchWith(url: string, agent: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(url, { agent, timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; }).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => resolve({ status: 0, body: err.message }));
    req.end();
  });
}

/** Resolves once pebble's directory answers as pebble's; throws if a program exited or 5 s pass. */
async function confirmListening(directoryUrl: string, agent: Agent, children: ChildProcess[]): Promise<void> {
  const giveUpAt = Date.now() + 5000;
  for (;;) {
    const exited = children.find((child) => child.exitCode !== null || child.signalCode !== null);
    if (exited !== undefined) throw new Error(`${exited.spawnfile} exited (a port taken meanwhile?)`);
    const { status, body } = await fetchWith(directoryUrl, agent);
    if (status === 200 && body.includes('"newNonce"')) return;
    if (Date.now() > giveUpAt) throw new Error(`pebble's directory did not answer at ${directoryUrl}: ${status} ${body.slice(0, 200)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startPebbleOnce({ httpPort, tlsPort, eabKeys }: PebbleOptions): Promise<Pebble> {
  const ca = makeTestCa();
  const leaf = ca.leaf('pebble', ['localhost', '127.0.0.1']);
  // A copy of its own: the test CA's directory goes when the test file ends, this when stopped.
  const dir = mkdtempSync(join(tmpdir(), 'gateway-pebble-'));
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, ca.caPem);
  const [acmePort, managementPort, dnsPort, challengeManagementPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const children: ChildProcess[] = [];
  const stop = () => {
    for (const child of children) child.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  children.push(spawn('pebble-challtestsrv', ['-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${challengeManagementPort}`, '-defaultIPv4', '127.0.0.1', '-defaultIPv6', ''], { stdio: 'ignore' }));
  const config = join(dir, 'pebble.json');
  writeFileSync(config, JSON.stringify({
    pebble: {
      listenAddress: `127.0.0.1:${acmePort}`, managementListenAddress: `127.0.0.1:${managementPort}`,
      certificate: leaf.certFile, privateKey: leaf.keyFile, httpPort, tlsPort: tlsPort ?? await freePort(), ocspResponderURL: '',
      externalAccountBindingRequired: eabKeys !== undefined, ...(eabKeys === undefined ? {} : { externalAccountMACKeys: eabKeys }),
    },
  }));
  // No sleep before validating, and no nonce refused at random: pebble's defaults test clients'
  // retries, not ours. No authorization reused (pebble's default: half of them), so that every
  // order, a renewal's too, is validated against the gateway.
  const pebble = spawn('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' } });
  children.push(pebble);
  let out = '';
  pebble.stdout!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    pebble.stdout!.on('data', (chunk: string) => {
      out += chunk;
      if (process.env.ACME_DEBUG) process.stderr.write(chunk);
      if (out.includes('ACME directory available')) resolve();
    });
    pebble.once('exit', (code) => reject(new Error(`pebble exited ${code}: ${out}`)));
  }).catch((err: unknown) => {
    stop();
    throw err;
  });
  const agent = new Agent({ ca: ca.caPem });
  try {
    await confirmListening(`https://127.0.0.1:${acmePort}/dir`, agent, children);
  } catch (err) {
    stop();
    throw err;
  }
  return {
    directoryUrl: `https://127.0.0.1:${acmePort}/dir`,
    caFile,
    caPem: ca.caPem,
    agent,
    issuingRoot: () => new Promise((resolve, reject) => {
      request(`https://127.0.0.1:${managementPort}/roots/0`, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; }).on('end', () => {
          assert.equal(res.statusCode, 200, body);
          resolve(body);
        });
      }).on('error', reject).end();
    }),
    stop,
  };
}
