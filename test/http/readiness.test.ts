/**
 * /readyz's "directory" and "signingKeys" checks, without Redis: the directory is ready while
 * its store (here an HTTP upstream, a real node:http server) answers, or while a copy the cache
 * holds may still be served (ttl + maxStale after the read that made it, on the gateway's
 * manual clock); once neither holds it is down, and /readyz itself asks the upstream again (an
 * unready instance gets no traffic that would find the store back), so it turns ready again by
 * itself.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import { ALICE_ROLES, rolesCall } from '../helpers/directory.js';
import { call, show, signIn, startGateway, type TestGateway } from '../helpers/gateway.js';

const TTL_MS = 10_000;
const MAX_STALE_MS = 60_000;

interface Upstream {
  rolesUrl: string;
  signUrl: string;
  down: boolean;
  requests: number;
}

/** Answers acct_alice's roles, or 503 to everything while `down`. */
async function startUpstream(t: TestContext): Promise<Upstream> {
  const server = createServer((_req, res) => {
    up.requests++;
    res.setHeader('content-type', 'application/json');
    if (up.down) {
      res.statusCode = 503;
      res.end(JSON.stringify({ success: false, message: { code: 'unavailable', description: 'down for the test' } }));
      return;
    }
    res.end(JSON.stringify({ items: ALICE_ROLES, total: ALICE_ROLES.length }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const up: Upstream = { rolesUrl: `${base}/accounts/{accountId}/roles`, signUrl: `${base}/accounts/{accountId}/sign/{address}`, down: false, requests: 0 };
  return up;
}

function startGatewayOn(t: TestContext, up: Upstream): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      directory: {
        store: 'http',
        // A breaker that never opens here: it has tests of its own, and its cooldown is real time.
        http: { signUrl: up.signUrl, rolesUrl: up.rolesUrl, token: 'svc_readiness_token', breakerFailures: 1000 },
        cache: { ttlMs: TTL_MS, staleWhileRevalidateMs: 0, maxStaleMs: MAX_STALE_MS },
      },
    },
  });
}

async function assertChecks(gw: TestGateway, status: 200 | 503, directory: 'up' | 'down', what: string): Promise<void> {
  const res = await call(`${gw.url}/readyz`);
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  assert.deepEqual(res.body.message, { status: status === 200 ? 'ready' : 'unavailable', checks: { directory, signingKeys: 'up' } }, what);
}

test('directory upstream failing with nothing cached: not ready; /readyz finds it back by itself', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up);
  const { accessToken } = await signIn(gw);

  await t.test('ready before any read (directory and signing keys listed, no redis)', () => assertChecks(gw, 200, 'up', 'at start'));

  await t.test('a read fails and no copy exists: directory down', async () => {
    up.down = true;
    assert.equal((await rolesCall(gw, accessToken)).status, 503);
    await assertChecks(gw, 503, 'down', 'the upstream failing');
  });

  await t.test('the upstream back, no request in between: the next /readyz asks it and is ready', async () => {
    up.down = false;
    const before = up.requests;
    await assertChecks(gw, 200, 'up', 'the upstream back');
    assert.equal(up.requests, before + 1, '/readyz repeated the failed read once');
    assert.equal((await rolesCall(gw, accessToken)).status, 200);
  });
});

test('directory upstream failing while a copy may be served: ready until ttl + maxStale, then not', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up);
  const { accessToken } = await signIn(gw);
  assert.equal((await rolesCall(gw, accessToken)).status, 200, 'read and cached');

  up.down = true;
  gw.clock.advance(TTL_MS + 1000);
  const stale = await rolesCall(gw, accessToken);
  assert.equal(stale.status, 200, `the stale copy is served: ${show(stale)}`);

  await t.test('the store failing, the copy servable: ready, and the upstream is not asked by /readyz', async () => {
    const before = up.requests;
    await assertChecks(gw, 200, 'up', 'a copy servable');
    assert.equal(up.requests, before, 'no probe while a copy may be served');
  });

  await t.test('past ttl + maxStale: down', async () => {
    gw.clock.advance(MAX_STALE_MS);
    await assertChecks(gw, 503, 'down', 'no copy servable any more');
    assert.equal((await rolesCall(gw, accessToken)).status, 503, 'and the gateway indeed cannot answer');
  });
});
