/**
 * GatewayClient's typed methods against a real gateway: the answers' exact shapes, allRoles
 * page after page, and the options the constructor and reset() refuse.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigurationError, GatewayClient, NotFoundError } from '../../packages/client/src/index.js';
import { OwnerClient } from '../../packages/client/src/owner/index.js';
import { DEMO, startGateway } from '../helpers/gateway.js';
import { ALICE_RECORD, accessLines, settle } from './helpers.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

test('sign, roles and allRoles answer in the interface\'s shapes', async (t) => {
  const gw = await startGateway(t);
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice });
  const record = await client.sign(ALICE_RECORD);
  assert.deepEqual(Object.keys(record).sort(), ['did', 'signedAt', 'signedExpiredAt', 'signedNonce']);
  assert.equal(record.did, ALICE_RECORD);
  assert.match(record.signedAt, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  const missing = await client.sign(`0x${'0'.repeat(40)}`).catch((e: unknown) => e);
  assert.ok(missing instanceof NotFoundError);
  assert.equal(missing.code, 'sign_record_not_found');

  const all = await client.roles({ limit: 100 });
  assert.equal(typeof all.pages, 'string');
  assert.ok(all.items.length >= 3, 'enough roles to page through');
  for (const role of all.items) {
    assert.equal(typeof role.id, 'number');
    assert.ok(role.public === 0 || role.public === 1);
  }
  const iterated = [];
  for await (const role of client.allRoles({ limit: 2 })) iterated.push(role);
  assert.deepEqual(iterated, all.items);
  await settle();
  assert.equal(accessLines(gw, '/api/roles').length, 1 + Math.ceil(all.items.length / 2), 'one request per page, no empty page after the last');
});

test('refused options: a base URL that is not one, reset() without the key, a secret in a browser unless allowed', async () => {
  // ConfigurationError, as OwnerClient's: not the TypeError of new URL().
  assert.throws(() => new GatewayClient({ baseUrl: 'gateway.example.com', credentials: alice }), ConfigurationError);
  const session = new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: { refreshToken: 'r' } });
  assert.ok(await session.reset().catch((e: unknown) => e) instanceof ConfigurationError);
  const settings = new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: { settingsToken: 'gwst_x' } });
  assert.ok(await settings.reset().catch((e: unknown) => e) instanceof ConfigurationError);

  const g = globalThis as { window?: unknown; document?: unknown };
  g.window = g;
  g.document = {};
  try {
    assert.throws(() => new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: alice }), ConfigurationError);
    assert.throws(() => new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: { settingsToken: 'gwst_x' } }), ConfigurationError);
    assert.ok(new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: alice, dangerouslyAllowBrowser: true }));
    assert.ok(new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: { refreshToken: 'r' } }));
  } finally {
    delete g.window;
    delete g.document;
  }
  // A web worker is a browser too: what it holds was shipped to the visitor's machine.
  const w = globalThis as { WorkerGlobalScope?: unknown };
  w.WorkerGlobalScope = class {};
  try {
    assert.throws(() => new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: alice }), ConfigurationError);
    assert.throws(() => new OwnerClient({ baseUrl: 'http://127.0.0.1:9', adminToken: 'gwadm_x' }), ConfigurationError);
    assert.ok(new GatewayClient({ baseUrl: 'http://127.0.0.1:9', credentials: { refreshToken: 'r' } }));
  } finally {
    delete w.WorkerGlobalScope;
  }
});
