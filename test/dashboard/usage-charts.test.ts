/**
 * The usage charts of the Activity page against a real gateway: calls proxied to a backend that
 * answers the status it is asked for, made in different hours and days (the gateway's manual
 * clock moved, no sleep), flushed, then drawn per hour and per UTC day. Each chart's bars (the
 * parts' <title>s and heights), the table behind it and the owner API's series hold the same
 * figures; one key chosen shows its calls only; axe passes with the table open; a phone shows it
 * without sideways scrolling.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO, show, signIn } from '../helpers/gateway.js';
import { operator, type Client } from '../helpers/owner.js';
import { assertNoSidewaysScroll, browserSuite, checkAccessibility, OWNERS, PHONE, screenshot, startDashboard } from '../helpers/dashboard.js';

const ACCOUNT = OWNERS.alice.accountId;
const HOUR = 3_600_000;
const CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;

interface Step { start: string; statuses: Record<string, number> }

/** The owner API's series for the page's window (and key). */
async function series(client: Client, query: string): Promise<Step[]> {
  const res = await client.get(`/accounts/${ACCOUNT}/usage?${query}`);
  assert.equal(res.status, 200, show(res));
  return res.body.message.series;
}

/** The chart's table, opened: one row per step, [step, 2xx, 3xx, 4xx, 5xx, total] as numbers after the first. */
async function tableOf(chart: Locator): Promise<[string, ...number[]][]> {
  await chart.getByText('Figures as a table').click();
  const rows = await chart.getByRole('table').locator('tbody tr').all();
  return Promise.all(rows.map(async (row) => {
    const [step, ...counts] = await row.locator('td').allTextContents();
    return [step!, ...counts.map((c) => Number(c.replace(/[^0-9]/g, '')))] as [string, ...number[]];
  }));
}

/** What the bars draw: each part's "<step>, <class> …: <n>" title, and each bar's height per call. */
async function barsOf(chart: Locator): Promise<{ parts: Map<string, number>; heightPerCall: number[] }> {
  const drawn = await chart.locator('svg[role="img"] rect.chart-part').evaluateAll((rects) => rects.map((r) => ({
    title: r.querySelector('title')?.textContent ?? '',
    height: Number(r.getAttribute('height')),
  })));
  const parts = new Map<string, number>();
  const heightPerCall: number[] = [];
  for (const { title, height } of drawn) {
    const [, step, part, n] = /^(.*), ([1-5]xx) [^:]*: ([0-9,]+)$/.exec(title) ?? [];
    assert.ok(step !== undefined, `a part's title says its step, class and count: ${title}`);
    parts.set(`${step} ${part}`, Number(n!.replace(/,/g, '')));
    heightPerCall.push(height / Number(n!.replace(/,/g, '')));
  }
  return { parts, heightPerCall };
}

/** The chart and its table show the same figures, and those are the owner API's. */
async function assertSameFigures(chart: Locator, expected: Step[]): Promise<void> {
  const rows = await tableOf(chart);
  assert.equal(rows.length, expected.length, 'one row per step');
  rows.forEach(([, ...counts], i) => {
    const want = CLASSES.map((c) => expected[i]!.statuses[c]!);
    assert.deepEqual(counts, [...want, want.reduce((a, b) => a + b, 0)], `row ${i}: the API's figures`);
  });
  const { parts, heightPerCall } = await barsOf(chart);
  const fromTable = new Map<string, number>();
  for (const [step, ...counts] of rows) CLASSES.forEach((c, j) => counts[j]! > 0 && fromTable.set(`${step} ${c}`, counts[j]!));
  assert.deepEqual(parts, fromTable, 'a bar part for each figure of the table above 0, with its figure');
  assert.ok(heightPerCall.every((h) => Math.abs(h - heightPerCall[0]!) < 0.01), 'heights proportional to the figures: one scale');
}

async function usageChart(page: Page, name: string): Promise<Locator> {
  const chart = page.locator('figure.usage-chart').filter({ has: page.getByRole('img', { name }) });
  await chart.waitFor();
  return chart;
}

test('usage charts: calls per hour and per day by class of status, the same figures in bars, table and API; one key; axe; a phone', browserSuite(), async (t) => {
  const backend = await startBackend(t, (req, res) => {
    res.writeHead(Number(/\/status\/([1-5][0-9][0-9])$/.exec(req.url ?? '')?.[1] ?? 200)).end();
  });
  const dash = await startDashboard(t, { overrides: { routes: [{ name: 'things', prefix: '/things', targets: [backend.url] }] } });
  const { gw } = dash;
  const made = await operator(gw).send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'batch jobs' });
  assert.equal(made.status, 201, show(made));
  const second = { apiKey: made.body.message.key.apiKey as string, secret: made.body.message.apiSecret as string };
  const calls = async (key: { apiKey: string; secret: string }, paths: string[]) => {
    const { accessToken } = await signIn(gw, key);
    return Promise.all(paths.map(async (path) => (await call(`${gw.url}/things${path}`, { token: accessToken })).status));
  };
  // Three days ago; 26 hours ago; now. The 24 hours hold the last two, the 30 days all three.
  assert.deepEqual(await calls(DEMO.alice, ['/a', '/b', '/status/204', '/status/304']), [200, 200, 204, 304]);
  gw.clock.advance(46 * HOUR);
  assert.deepEqual(await calls(DEMO.alice, ['/c', '/status/404']), [200, 404]);
  assert.deepEqual(await calls(second, ['/status/503', '/status/201']), [503, 201]);
  gw.clock.advance(26 * HOUR);
  assert.deepEqual(await calls(DEMO.alice, ['/d', '/status/500', '/status/403']), [200, 500, 403]);
  await gw.services.usage!.flush();

  const page = await dash.newPage();
  await dash.signInAsOwner(page, 'alice');
  await page.goto(`${dash.url}/accounts/${ACCOUNT}/activity`);
  const hourly = await usageChart(page, 'Calls per hour in the last 24 hours, every key');
  const img = hourly.getByRole('img');
  assert.match(await img.evaluate((svg) => svg.querySelector('desc')!.textContent!), /^Stacked bar chart, one bar per hour .+ 3 calls in all \(2xx success: 1; 4xx client error: 1; 5xx server error: 1\)\. Most in the hour of .+: 3\. The same figures are in the table below the chart\.$/);
  assert.deepEqual(await hourly.getByRole('list').getByRole('listitem').allTextContents(), ['2xx success', '3xx redirect', '4xx client error', '5xx server error'], 'the legend names every part');
  const alice = operator(gw);
  const day = await series(alice, 'hours=24');
  assert.equal(day.length, 25);
  assert.deepEqual(day.at(-1)!.statuses, { '1xx': 0, '2xx': 1, '3xx': 0, '4xx': 1, '5xx': 1 });
  await assertSameFigures(hourly, day);
  await checkAccessibility(page, 'usage chart per hour, its table open');
  await screenshot(page, 'usage-hourly');

  // The last 30 days, then one key: the URL keeps both.
  const usage = page.getByRole('region', { name: 'Usage' });
  await usage.getByLabel('Window', { exact: true }).selectOption({ label: 'Last 30 days' });
  await usage.getByRole('button', { name: 'Show' }).click();
  await page.waitForURL((url) => url.searchParams.get('days') === '30');
  const daily = await usageChart(page, 'Calls per day in the last 30 days, every key');
  const month = await series(alice, 'days=30');
  assert.equal(month.length, 31);
  assert.deepEqual(month.filter((s) => Object.values(s.statuses).some((n) => n > 0)).map((s) => s.statuses), [
    { '1xx': 0, '2xx': 3, '3xx': 1, '4xx': 0, '5xx': 0 },
    { '1xx': 0, '2xx': 2, '3xx': 0, '4xx': 1, '5xx': 1 },
    { '1xx': 0, '2xx': 1, '3xx': 0, '4xx': 1, '5xx': 1 },
  ], 'three days with calls');
  await assertSameFigures(daily, month);

  await usage.getByLabel('Key', { exact: true }).selectOption({ label: `batch jobs (${made.body.message.key.id})` });
  await usage.getByRole('button', { name: 'Show' }).click();
  await page.waitForURL((url) => url.searchParams.get('key') === made.body.message.key.id && url.searchParams.get('days') === '30');
  const one = await usageChart(page, 'Calls per day in the last 30 days, batch jobs');
  await assertSameFigures(one, await series(alice, `days=30&keyId=${made.body.message.key.id}`));
  assert.deepEqual([...(await barsOf(one)).parts.values()], [1, 1], 'its 201 and its 503');

  // A phone: the chart scales to the column, the table scrolls in its own box.
  const phone = await dash.newPage({ viewport: PHONE });
  await dash.signInAsOwner(phone, 'alice');
  await phone.goto(`${dash.url}/accounts/${ACCOUNT}/activity?days=30`);
  const small = await usageChart(phone, 'Calls per day in the last 30 days, every key');
  await small.getByText('Figures as a table').click();
  await small.getByRole('table').waitFor();
  const box = await small.getByRole('img').boundingBox();
  assert.ok(box !== null && box.width <= PHONE.width && box.width > PHONE.width / 2, `the chart fits the phone: ${JSON.stringify(box)}`);
  await assertNoSidewaysScroll(phone, 'usage charts on a phone');
  await screenshot(phone, 'phone-usage');
});
