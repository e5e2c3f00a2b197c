/**
 * The webhooks page in Chromium against a real gateway (which lets endpoints reach 127.0.0.1, as
 * an operator's `webhooks.allowPrivateNetworks` would): an endpoint added in the page (its
 * secret shown once), a test event sent from the page reaching a receiver and verified with that
 * secret, the delivery log, a key made in the page's account delivered too, a refusal said in
 * the page, and the endpoint deleted after a confirmation. Every state passes the axe check.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { browserSuite, checkAccessibility, OWNERS, screenshot, startDashboard } from '../helpers/dashboard.js';
import { operator } from '../helpers/owner.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';

const ACCOUNT = OWNERS.alice.accountId;

test('webhooks: add an endpoint in the page, send a test, read the delivery log, delete it', browserSuite(), async (t) => {
  const receiver = await startWebhookReceiver(t);
  const { received, arrived } = receiver;
  const hookUrl = `${receiver.origin}/in`;

  const dash = await startDashboard(t, { overrides: { webhooks: { allowPrivateNetworks: true, allowHttp: true } } });
  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/webhooks`);
  await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
  await page.getByText('This account sends no webhooks yet.').waitFor();
  await checkAccessibility(page, 'webhooks (empty)');

  // The gateway's refusal of an unknown event type shows at the field.
  await page.getByLabel('URL').fill(hookUrl);
  await page.getByLabel('Events', { exact: true }).fill('key.created, nope');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.locator('[aria-invalid="true"]').waitFor();
  assert.equal(await page.getByLabel('Events', { exact: true }).getAttribute('aria-invalid'), 'true');

  await page.getByLabel('Events', { exact: true }).fill('key.created');
  await page.getByLabel('Description').fill('audit sink');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = await page.getByLabel('Webhook signing secret', { exact: true }).inputValue();
  assert.match(secret, /^whsec_/);
  const row = page.getByRole('region', { name: 'Webhook endpoints' }).getByRole('row').filter({ hasText: hookUrl });
  assert.match(await row.innerText(), /audit sink[\s\S]*key\.created[\s\S]*On/);
  await checkAccessibility(page, 'webhooks (shown-once secret)');

  await row.getByRole('button', { name: `Send test ${hookUrl}` }).click();
  await page.getByText(`Test event delivered to ${hookUrl} (200).`).waitFor();
  await arrived(1);
  assert.equal((new Webhook(secret).verify(received[0]!.body, received[0]!.headers as Record<string, string>) as { type: string }).type, 'webhook.test');
  assert.equal(await page.evaluate(`document.documentElement.outerHTML.includes(${JSON.stringify(secret)})`), false, 'after the reload the secret is nowhere in the page');

  // A second test within 5 s is refused, and the page says so.
  await row.getByRole('button', { name: `Send test ${hookUrl}` }).click();
  await page.getByRole('alert').filter({ hasText: /Too many attempts\. Try again in [1-5] seconds/ }).waitFor();

  // A new secret with an overlap of an hour: both sign the next delivery.
  await row.getByRole('button', { name: `New secret ${hookUrl}` }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('The current secret goes on signing for').selectOption({ label: '1 hour' });
  await checkAccessibility(page, 'webhooks (roll dialog)');
  await dialog.getByRole('button', { name: 'Make a new secret' }).click();
  const rolled = await page.getByLabel('Webhook signing secret', { exact: true }).inputValue();
  assert.notEqual(rolled, secret);
  assert.match(await page.getByRole('region', { name: `New signing secret of ${hookUrl}` }).innerText(), /the replaced secret signs each delivery too/);
  dash.gw.clock.advance(5_000);
  await row.getByRole('button', { name: `Send test ${hookUrl}` }).click();
  await arrived(2);
  const both = received[1]!;
  for (const key of [rolled, secret]) assert.equal((new Webhook(key).verify(both.body, both.headers as Record<string, string>) as { type: string }).type, 'webhook.test');

  // A key made by the operator raises key.created, delivered and logged.
  assert.equal((await operator(dash.gw).send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'from the api' })).status, 201);
  await arrived(3);
  await row.getByRole('link', { name: `Deliveries ${hookUrl}` }).click();
  const log = page.getByRole('region', { name: 'Delivery attempts, newest first' });
  // The log is written once the receiver's answer is read, which may come after the page asked.
  for (let i = 0; i < 20; i++) {
    await log.waitFor();
    if (await log.getByRole('row').count() >= 3) break;
    await page.reload();
  }
  assert.match(await log.innerText(), /key\.created[\s\S]*Delivered[\s\S]*webhook\.test[\s\S]*Delivered/);
  await checkAccessibility(page, 'webhooks (delivery log)');
  await screenshot(page, 'webhooks');

  await row.getByRole('button', { name: `Delete ${hookUrl}` }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete webhook' }).click();
  await page.getByText(`Webhook to ${hookUrl} deleted.`).waitFor();
  assert.deepEqual((await operator(dash.gw).get(`/accounts/${ACCOUNT}/webhooks`)).body.message.items, []);
});
