/**
 * The wide tables at a laptop's width (1280 px), with the data a real account has: keys with
 * names, scopes, a rolled secret and a last use; an audit log of changes with long values. Every
 * column is visible without scrolling the table sideways (each header inside its table's visible
 * box), and each date in a table stays on one line. Checked on the elements' boxes in Chromium.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { DEMO, show, signIn } from '../helpers/gateway.js';
import { signIn as ownerSignIn } from '../helpers/owner.js';
import { browserSuite, DESKTOP, OWNERS, startDashboard } from '../helpers/dashboard.js';

const ACCOUNT = OWNERS.alice.accountId;

interface Box { left: number; right: number; top: number; bottom: number }

/** The table's scrolling box: what is seen of it, and how wide its content is. */
async function fitsItsBox(page: Page, name: string): Promise<void> {
  const table = page.getByRole('table', { name });
  await table.waitFor();
  const wrap = page.locator('.table-wrap').filter({ has: table });
  const { clientWidth, scrollWidth } = await wrap.evaluate((el) => ({ clientWidth: el.clientWidth, scrollWidth: el.scrollWidth }));
  const columns = await table.locator('thead th').evaluateAll((ths) => ths.map((th) => `${th.textContent}: ${Math.round(th.getBoundingClientRect().width)}`));
  assert.ok(scrollWidth <= clientWidth, `${name}: no sideways scroll in the table (${scrollWidth} > ${clientWidth}; columns ${columns.join(', ')})`);
  const seen = (await wrap.boundingBox())!;
  const visible: Box = { left: seen.x, right: seen.x + seen.width, top: seen.y, bottom: seen.y + seen.height };
  for (const header of await table.locator('thead th').all()) {
    const box = (await header.boundingBox())!;
    const text = (await header.textContent()) ?? '';
    assert.ok(box.x >= visible.left - 0.5 && box.x + box.width <= visible.right + 0.5, `${name}: the header "${text}" is inside the table's visible box`);
  }
}

/** Each <time> in the table is drawn on one line (an inline box that wraps has several rects). */
async function datesOnOneLine(table: Locator, name: string): Promise<number> {
  const lines = await table.locator('td time').evaluateAll((times) => times.map((el) => ({ text: el.textContent, rects: el.getClientRects().length })));
  assert.ok(lines.length > 0, `${name}: dates are shown`);
  for (const { text, rects } of lines) assert.equal(rects, 1, `${name}: the date "${text}" is on one line`);
  return lines.length;
}

test('at 1280 px the keys and audit tables show every column without scrolling, dates on one line', browserSuite(), async (t) => {
  const dash = await startDashboard(t);
  const { gw } = dash;
  const alice = await ownerSignIn(gw, OWNERS.alice.email, OWNERS.alice.password);
  // A key as owners make them: named, described, with scopes, its secret rolled (an overlap date).
  const made = await alice.send('POST', `/accounts/${ACCOUNT}/keys`, {
    name: 'billing service (production)', description: 'Signs in from the billing cluster; rolled every 30 days by the deploy pipeline.', scopes: ['orders:read', 'orders:write', 'invoices:read'],
  });
  assert.equal(made.status, 201, show(made));
  const key = (made.body.message as { key: { id: string } }).key;
  const rolled = await alice.send('POST', `/accounts/${ACCOUNT}/keys/${key.id}/roll`, { overlapSeconds: 86_400 });
  assert.equal(rolled.status, 200, show(rolled));
  const role = await alice.send('POST', `/accounts/${ACCOUNT}/roles`, {
    id: 77, slug: 'invoice-approver', name: 'Invoice approver', description: 'Approves invoices above the team limit; see https://wiki.example.com/finance/approvals/limits-and-escalation', public: false,
  });
  assert.equal(role.status, 201, show(role));
  await signIn(gw, DEMO.alice);

  const page = await dash.newPage({ viewport: DESKTOP });
  await dash.signInAsOwner(page, 'alice');

  await page.goto(`${dash.url}/accounts/${ACCOUNT}/keys`);
  await fitsItsBox(page, 'API keys');
  assert.ok(await datesOnOneLine(page.getByRole('table', { name: 'API keys' }), 'API keys') >= 3, 'created, last used and overlap dates');

  await page.goto(`${dash.url}/accounts/${ACCOUNT}/activity?hours=1`);
  const log = page.getByRole('table', { name: 'Audit log, newest first' });
  await fitsItsBox(page, 'Audit log, newest first');
  await datesOnOneLine(log, 'the audit log');
  // The Changes cells are inside the visible box too, not only their header.
  const visible = (await page.locator('.table-wrap').filter({ has: log }).boundingBox())!;
  for (const cell of await log.locator('tbody td:last-child').all()) {
    const box = (await cell.boundingBox())!;
    assert.ok(box.x + box.width <= visible.x + visible.width + 0.5, 'a Changes cell is inside the visible box');
  }
});
