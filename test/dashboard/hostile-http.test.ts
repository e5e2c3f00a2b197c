/**
 * The dashboard's tree and its two owner API operations as an attacker meets them over plain
 * HTTP (issue 16, the hostile pass): every answer under the tree carries the security headers,
 * errors included; the usage and served operations refuse junk with a 4xx naming the field and
 * show nothing of another account. The browser-side attacks are in hostile.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CONTENT_SECURITY_POLICY, loadPublic } from '../../src/dashboard/serve.js';
import { decodeJwt } from 'jose';
import { mintSettingsToken } from '../../src/domain/settings-token.js';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, parseRawResponse, rawRequest, show, signIn, startGateway } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner.js';

async function raw(url: string, path: string, method = 'GET', extra = ''): Promise<{ status: number; headers: string }> {
  const { host } = new URL(url);
  return parseRawResponse(await rawRequest(url, `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`));
}

function header(headers: string, name: string): string | undefined {
  return headers.split('\r\n').find((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))?.slice(name.length + 1).trim();
}

test('every answer under the tree, errors and 304s included, carries the security headers', async (t) => {
  const gw = await startGateway(t);
  const asset = await fetch(`${gw.url}/dashboard/assets/js/main.js`);
  const etag = asset.headers.get('etag')!;
  const answers: [string, string, string, number][] = [
    ['GET', '/dashboard/sign-in', '', 200],
    ['HEAD', '/dashboard/sign-in', '', 200],
    ['GET', '/dashboard/assets/js/main.js', `If-None-Match: ${etag}\r\n`, 304],
    ['GET', '/dashboard/no-such-page', '', 404],
    ['HEAD', '/dashboard/no-such-page', '', 404],
    ['GET', '/dashboard/accounts/%3Cimg%20src%3Dx%3E', '', 404],
    ['GET', '/dashboard/assets/no-such.js', '', 404],
    ['GET', '/dashboard/assets/index.html', '', 404],
    ['GET', '/DASHBOARD/No-Such-Page', '', 404],
    ['POST', '/dashboard/sign-in', '', 405],
    ['DELETE', '/dashboard/assets/js/main.js', '', 405],
    ['GET', '/dashboard/assets/..%2f..%2fserve.ts', '', 400],
    ['GET', '/dashboard/assets/js/main.js%00', '', 400],
    ['GET', '/dashboard/assets/%252e%252e/serve.ts', '', 404],
    ['GET', '/dashboard/assets/%c0%ae%c0%ae/serve.ts', '', 404],
    ['GET', '/dashboard/assets/js/main.js/', '', 404],
    ['GET', '/dashboard/assets/JS/MAIN.JS', '', 404],
  ];
  for (const [method, path, extra, status] of answers) {
    const res = await raw(gw.url, path, method, extra);
    const what = `${method} ${path}: ${res.status}\n${res.headers}`;
    assert.equal(res.status, status, what);
    assert.equal(header(res.headers, 'content-security-policy'), CONTENT_SECURITY_POLICY, what);
    assert.equal(header(res.headers, 'x-frame-options'), 'DENY', what);
    assert.equal(header(res.headers, 'x-content-type-options'), 'nosniff', what);
    assert.equal(header(res.headers, 'referrer-policy'), 'no-referrer', what);
    if (status >= 400) assert.match(header(res.headers, 'content-type') ?? '', /^application\/json/, what);
  }
  // The invite link's redirect goes to the invite page whatever follows it, or is no redirect at all.
  for (const path of ['/owner/invite?next=//evil.example', '/owner/invite?to=https://evil.example', '/owner/invite/', '/OWNER/INVITE', '/owner/invite//evil.example', '/owner/invite/..%2f..%2fevil']) {
    const res = await raw(gw.url, path);
    const location = header(res.headers, 'location');
    assert.ok(location === undefined || location === '/dashboard/invite', `${path}: ${res.status} to ${location}`);
  }
  // Outside the tree nothing changes: the owner API's answers are not the dashboard's.
  const outside = await raw(gw.url, '/dashboardx/sign-in');
  assert.equal(header(outside.headers, 'content-security-policy'), undefined, outside.headers);
});

test('only regular files of the known types under public/ are assets: no symlink out of it, no page, no source map', (t) => {
  const outside = mkdtempSync(join(tmpdir(), 'dashboard-outside-'));
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-public-'));
  t.after(() => {
    rmSync(outside, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });
  writeFileSync(join(outside, 'secret.js'), 'the gateway\'s secrets');
  mkdirSync(join(outside, 'more'));
  writeFileSync(join(outside, 'more', 'also.css'), 'more secrets');
  writeFileSync(join(dir, 'index.html'), '<html data-base="{{BASE}}"></html>');
  mkdirSync(join(dir, 'js'));
  writeFileSync(join(dir, 'js', 'main.js'), 'export {};');
  writeFileSync(join(dir, 'js', 'main.js.map'), '{}');
  writeFileSync(join(dir, 'notes.txt'), 'notes');
  symlinkSync(join(outside, 'secret.js'), join(dir, 'js', 'linked.js'));
  symlinkSync(join(outside, 'more'), join(dir, 'linked-dir'), 'dir');
  const { shell, assets } = loadPublic('/dashboard', dir, join(dir, 'js'));
  assert.deepEqual([...assets.keys()], ['js/main.js']);
  assert.match(shell.toString(), /data-base="\/dashboard"/);
});

test('an outsider cannot grow the usage recorder: unknown settings tokens, forged and expired bearers count nothing', async (t) => {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { routes: [{ name: 'things', prefix: '/things', targets: [backend.url] }] } });
  const recorder = gw.services.usage!;
  const { accessToken } = await signIn(gw, DEMO.alice);
  const [head, payload] = accessToken.split('.');
  const bearers = [
    // Well formed (shape and checksum), made by the same code as real ones, but never stored.
    ...Array.from({ length: 100 }, () => mintSettingsToken()),
    // A real token's header and payload with a made-up signature; a payload naming another key.
    `${head}.${payload}.${'A'.repeat(86)}`,
    `${head}.${Buffer.from(JSON.stringify({ ...decodeJwt(accessToken), client_id: 'key_made_up' })).toString('base64url')}.${accessToken.split('.')[2]}`,
  ];
  for (const bearer of bearers) {
    for (const path of ['/things/x', '/api/roles']) {
      const res = await call(`${gw.url}${path}`, { token: bearer });
      assert.equal(res.status, 401, `${path}: ${show(res)}`);
    }
  }
  assert.equal(recorder.size, 0, 'nothing held for refused bearers');
  // An expired access token of a real key counts nothing either.
  gw.clock.advance(2 * 24 * 3_600_000);
  assert.equal((await call(`${gw.url}/things/x`, { token: accessToken })).status, 401);
  assert.equal(recorder.size, 0);
  await recorder.flush();
  const report = await operator(gw).get(`/owner/v1/accounts/${DEMO.alice.accountId}/usage`.replace('/owner/v1', ''));
  assert.equal(report.status, 200, show(report));
  assert.deepEqual(report.body.message.items, [], 'no usage row for anything that was refused');
});
