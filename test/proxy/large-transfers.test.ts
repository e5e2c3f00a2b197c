/**
 * A gigabyte up and a quarter gigabyte down through a real gateway process, with its memory
 * watched: bodies stream with backpressure, so the gateway's resident set grows by far less
 * than what passes through it. RSS is read from /proc/<pid>/status every 100 ms (Linux only).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, signIn } from '../helpers/gateway.js';
import { startGatewayProcess } from '../helpers/process.js';
import { within } from '../helpers/proxy.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const UPLOAD = GiB;
const DOWNLOAD = 256 * MiB;
const PIECE = Buffer.alloc(64 * 1024);
/** How much more memory than before the transfer the gateway may hold at its peak. */
const GROWTH_LIMIT = 200 * MiB;
const TRANSFER_GUARD_MS = 60_000;

/** `total` zero bytes in 64 KiB pieces, produced only as fast as they are read. */
function zeros(total: number): Readable {
  let left = total;
  return new Readable({
    read() {
      if (left === 0) return void this.push(null);
      const piece = left >= PIECE.length ? PIECE : PIECE.subarray(0, left);
      left -= piece.length;
      this.push(piece);
    },
  });
}

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(match, 'VmRSS in /proc/<pid>/status');
  return Number(match[1]) * 1024;
}

/** Samples the RSS of `pid` every 100 ms until stopped; the peak seen. */
function watchRss(pid: number): { stop(): number } {
  let peak = rssBytes(pid);
  const timer = setInterval(() => { peak = Math.max(peak, rssBytes(pid)); }, 100);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssBytes(pid));
    },
  };
}

async function setUp(t: TestContext) {
  const uploaded = { bytes: 0 };
  const backend = await startBackend(t, (req, res) => {
    if (req.url === '/big/upload') {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => { bytes += chunk.length; });
      req.on('end', () => {
        uploaded.bytes = bytes;
        res.end(JSON.stringify({ bytes }));
      });
    } else if (req.url === '/big/download') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(DOWNLOAD) });
      zeros(DOWNLOAD).pipe(res);
    } else {
      req.resume();
      req.on('end', () => res.end('warm'));
    }
  }, { readBody: false });
  const gw = await startGatewayProcess(t, {
    ROUTES: JSON.stringify([{ prefix: '/big', targets: [backend.url] }]),
  }, { limitMs: 120_000 });
  const pid = gw.child.process.pid!;
  const { accessToken } = await signIn(gw);
  // Warm up: the first proxied requests load and compile what the transfer needs.
  for (let i = 0; i < 5; i++) assert.equal((await call(`${gw.url}/big/warm`, { token: accessToken, method: 'POST', body: 'x'.repeat(100_000) })).status, 200);
  return { gw, pid, accessToken, uploaded };
}

test('1 GiB upload and 256 MiB download stream through a gateway process in bounded memory', async (t) => {
  const { gw, pid, accessToken, uploaded } = await setUp(t);

  await t.test('a 1 GiB upload reaches the backend whole', async () => {
    const before = rssBytes(pid);
    const watch = watchRss(pid);
    const answer = await within(new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/big/upload`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/octet-stream', 'content-length': String(UPLOAD) },
      }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      zeros(UPLOAD).pipe(req);
    }), TRANSFER_GUARD_MS, 'the upload');
    const peak = watch.stop();
    assert.equal(answer.status, 200, answer.body);
    assert.deepEqual(JSON.parse(answer.body), { bytes: UPLOAD });
    assert.equal(uploaded.bytes, UPLOAD);
    assert.ok(peak - before < GROWTH_LIMIT, `the gateway's RSS grew by ${((peak - before) / MiB).toFixed(1)} MiB (from ${(before / MiB).toFixed(1)} MiB) for a 1 GiB upload`);
  });

  await t.test('a 256 MiB download reaches the client whole', async () => {
    const before = rssBytes(pid);
    const watch = watchRss(pid);
    const received = await within(new Promise<{ status: number; bytes: number; length: string | undefined }>((resolve, reject) => {
      httpRequest(`${gw.url}/big/download`, { headers: { authorization: `Bearer ${accessToken}` } }, (res) => {
        let bytes = 0;
        res.on('data', (chunk: Buffer) => { bytes += chunk.length; });
        res.on('end', () => resolve({ status: res.statusCode!, bytes, length: res.headers['content-length'] }));
        res.on('error', reject);
      }).on('error', reject).end();
    }), TRANSFER_GUARD_MS, 'the download');
    const peak = watch.stop();
    assert.equal(received.status, 200);
    assert.equal(received.length, String(DOWNLOAD));
    assert.equal(received.bytes, DOWNLOAD);
    assert.ok(peak - before < GROWTH_LIMIT, `the gateway's RSS grew by ${((peak - before) / MiB).toFixed(1)} MiB (from ${(before / MiB).toFixed(1)} MiB) for a 256 MiB download`);
  });
});
