/**
 * packages/client/examples/owner.ts is compiled by `npm run typecheck` for its type assertions;
 * here it runs against a real gateway, so the example is known to work as written: it calls
 * every operation of OwnerClient, and every answer matches the OpenAPI document.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownerExample } from '../../packages/client/examples/owner.js';
import { OPERATIONS } from '../../packages/client/src/owner/client.js';
import { NotFoundError } from '../../packages/client/src/owner/index.js';
import { checkedClients } from '../helpers/owner-client.js';
import { ADMIN_TOKEN, startOwnerGateway } from '../helpers/owner.js';

test('the owner example runs on a real gateway and calls every operation of the client', async (t) => {
  // The example's webhook points at a closed port of 127.0.0.1 (allowed here): its test event fails at once.
  const gw = await startOwnerGateway(t, { overrides: { webhooks: { allowPrivateNetworks: true, allowHttp: true } } });
  const clients = await checkedClients(gw);
  const { accountId, auditActions } = await ownerExample({ baseUrl: gw.url, adminToken: ADMIN_TOKEN, fetch: clients.fetch, webhookUrl: 'http://127.0.0.1:9/gateway' });

  const reached = new Set(clients.exchanges.map((e) => e.key));
  const operations = new Set(Object.values(OPERATIONS).map((op) => `${op.method} ${op.path}`));
  assert.deepEqual([...operations].filter((op) => !reached.has(op)), [], 'every operation was called');
  for (const action of ['account.update', 'invite.create', 'invite.accept', 'key.create', 'key.roll', 'role.create', 'sign_record.create']) {
    assert.ok(auditActions.includes(action), `the audit log holds ${action}`);
  }
  await assert.rejects(clients.operator().accounts.get(accountId), NotFoundError, 'the example deleted its account');
  // The refusals the example provokes on purpose, and nothing else (a used mail link's twice, a removed passkey's once).
  assert.deepEqual(clients.exchanges.filter((e) => e.status >= 400).map((e) => `${e.status} ${e.code}`), ['404 not_found', '403 forbidden', '404 not_found', '404 not_found', '404 not_found', '404 not_found']);
  clients.assertConforming();
});
