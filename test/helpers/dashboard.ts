/**
 * The dashboard end to end: a real gateway (in this process, manual clock, its own copy of the
 * demo data with the demo owners, ADMIN_TOKEN accepted, a proxied route `/things` to a real echo
 * backend) and Debian's Chromium through playwright-core, with pages that fail the test on any
 * script error or Content-Security-Policy violation. Accessibility is checked by axe-core
 * (checkAccessibility); screenshots go to DASHBOARD_SCREENSHOTS (docs/screenshots for the
 * README's: `DASHBOARD_SCREENSHOTS=docs/screenshots npm test -- test/dashboard/*.test.ts`);
 * without it none is taken, so a test run leaves the checkout as it was.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { startBackend, type Backend } from './backend.js';
import { sharedChromium } from './browser.js';
import type { TestGateway } from './gateway.js';
import { ADMIN_TOKEN, startOwnerGateway } from './owner.js';

export { browserSuite } from './browser.js';
export { ADMIN_TOKEN } from './owner.js';

/** The demo owners of config/demo-data.json (their passwords are published in the README). */
export const OWNERS = {
  alice: { email: 'alice@demo.example', password: 'alice demo passphrase', accountId: 'acct_alice' },
  bob: { email: 'bob@demo.example', password: 'bob demo passphrase', accountId: 'acct_bob' },
} as const;
export type OwnerName = keyof typeof OWNERS;

/** A phone-sized viewport (iPhone SE's CSS pixels) and an ordinary laptop's. */
export const PHONE = { width: 375, height: 667 };
export const DESKTOP = { width: 1280, height: 860 };

/** Where screenshots go; unset, none is taken (a full-page PNG costs the browser CPU, and only the docs use them). */
export const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS === undefined || process.env.DASHBOARD_SCREENSHOTS === '' ? undefined : resolve(process.env.DASHBOARD_SCREENSHOTS);

export interface Dashboard {
  gw: TestGateway;
  /** The echo backend behind the proxied route `/things` (auth required). */
  backend: Backend;
  /** The dashboard's base URL, e.g. http://127.0.0.1:41234/dashboard */
  url: string;
  /** A page in a fresh browser context (its own cookies and storage: one person). */
  newPage(options?: { viewport?: { width: number; height: number } }): Promise<Page>;
  /**
   * Signs in as a demo owner through the owner API, in the page's context (its cookie jar), then
   * opens the dashboard's root: ends on the page sign-in leads to. The form costs two page loads
   * more; test/dashboard/sign-in.test.ts tests it (signInAsOwnerWithForm).
   */
  signInAsOwner(page: Page, who?: OwnerName): Promise<void>;
  /** Signs in through the sign-in page as a demo owner; ends on the page sign-in leads to. */
  signInAsOwnerWithForm(page: Page, who?: OwnerName): Promise<void>;
  /** Signs in through the sign-in page with the admin token. */
  signInAsOperator(page: Page): Promise<void>;
}

export interface DashboardOptions {
  /** Config settings over the test gateway's (deep-merged). */
  overrides?: Record<string, unknown>;
}

export async function startDashboard(t: TestContext, { overrides = {} }: DashboardOptions = {}): Promise<Dashboard> {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { routes: [{ name: 'things', prefix: '/things', targets: [backend.url] }], ...overrides } });
  // The file's one Chromium (test/helpers/browser.ts): each page below has a context of its own.
  const browser = await sharedChromium();
  const url = `${gw.url}${(gw.services.config as { dashboard: { path: string } }).dashboard.path}`;
  const contexts: BrowserContext[] = [];
  t.after(async () => {
    for (const context of contexts) await context.close();
  });

  const newPage: Dashboard['newPage'] = async ({ viewport = DESKTOP } = {}) => {
    const context = await browser.newContext({ viewport, permissions: ['clipboard-read', 'clipboard-write'] });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      // A refused resource load (a 401 the page expects) is logged by Chromium as an error
      // too; those are not the page's failures. Script errors and policy violations are.
      if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) problems.push(`console error: ${message.text()}`);
    });
    // Nothing is fetched from anywhere but the gateway (no external assets, no leak of a URL).
    const origin = new URL(url).origin;
    page.on('request', (request) => {
      const target = new URL(request.url());
      if (target.protocol !== 'data:' && target.origin !== origin) problems.push(`request to another origin: ${request.url()}`);
    });
    t.after(() => assert.deepEqual(problems, [], 'no script error, no Content-Security-Policy violation and no request elsewhere in the page'));
    return page;
  };

  const signIn = async (page: Page, fill: (page: Page) => Promise<void>) => {
    await page.goto(`${url}/sign-in`);
    await fill(page);
    await page.waitForURL((target) => !target.pathname.endsWith('/sign-in'));
  };

  return {
    gw,
    backend,
    url,
    newPage,
    signInAsOwner: async (page, who = 'alice') => {
      const res = await page.context().request.post(`${gw.url}/owner/v1/session`, { data: { email: OWNERS[who].email, password: OWNERS[who].password } });
      assert.ok(res.ok(), `owner sign-in: ${res.status()} ${await res.text()}`);
      await page.goto(`${url}/`);
      await page.waitForURL((target) => target.pathname !== new URL(`${url}/`).pathname);
    },
    signInAsOwnerWithForm: (page, who = 'alice') => signIn(page, async (p) => {
      await p.getByLabel('Email').fill(OWNERS[who].email);
      await p.getByLabel('Password', { exact: true }).fill(OWNERS[who].password);
      await p.getByRole('button', { name: 'Sign in', exact: true }).click();
    }),
    signInAsOperator: (page) => signIn(page, async (p) => {
      await p.getByLabel('Admin token').fill(ADMIN_TOKEN);
      await p.getByRole('button', { name: 'Sign in as operator' }).click();
    }),
  };
}

/** axe-core's browser bundle, read once per process. */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'];

interface AxeFinding {
  id: string;
  impact: string | null | undefined;
  help: string;
  nodes: string[];
}

/**
 * axe-core over the whole page as it stands (WCAG 2.0–2.2 A and AA rules, and best practices):
 * no violation of serious or critical impact. Every other finding is printed, not hidden.
 * axe.run is called in the page itself, axe injected once per document (Playwright's evaluate
 * is not bound by the page's CSP), and only the violations come back: @axe-core/playwright's
 * builder injected axe again at every check and carried every rule's results across, which cost
 * three times the CPU of the check itself (155 ms of the browser's and 34 of the test's, against
 * 45 and 2).
 */
export async function checkAccessibility(page: Page, name: string): Promise<void> {
  if (!(await page.evaluate('typeof window.axe === "object"'))) await page.evaluate(AXE_SOURCE);
  // resultTypes: every node of a violation, one of each other result (axe then skips building
  // the rest, a third of a check's CPU).
  const options = { runOnly: { type: 'tag', values: AXE_TAGS }, resultTypes: ['violations'] };
  const { violations, passes } = await page.evaluate(`axe.run(document, ${JSON.stringify(options)}).then((r) => ({
    violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) })),
    passes: r.passes.length,
  }))`) as { violations: AxeFinding[]; passes: number };
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const minor = violations.filter((v) => !serious.includes(v));
  if (minor.length > 0) process.stderr.write(`axe on ${name}: ${minor.map((v) => `${v.id} (${v.impact})`).join(', ')}\n`);
  assert.deepEqual(serious.map((v) => ({ rule: v.id, impact: v.impact, help: v.help, nodes: v.nodes })), [], `axe: serious violations on ${name}`);
  assert.ok(passes > 0, 'axe ran its rules');
}

/** A full-page screenshot, `<name>.png` in SCREENSHOTS, when that is set; undefined otherwise. */
export async function screenshot(page: Page, name: string): Promise<string | undefined> {
  if (SCREENSHOTS === undefined) return undefined;
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true, animations: 'disabled' });
  return path;
}

/** The text of the elements a control names in aria-describedby, one per id (hint, then error). */
export async function descriptionOf(page: Page, label: string): Promise<string[]> {
  const ids = (await page.getByLabel(label, { exact: true }).getAttribute('aria-describedby')) ?? '';
  return Promise.all(ids.split(/\s+/).filter((id) => id !== '').map(async (id) => (await page.locator(`[id="${id}"]`).textContent()) ?? ''));
}

/** The accessible name of what has the focus, as far as these pages need: label, aria-label or text. */
export function focusedName(page: Page): Promise<string> {
  return page.evaluate(`(() => {
    const active = document.activeElement;
    return (active.labels?.[0]?.textContent ?? active.getAttribute('aria-label') ?? active.textContent ?? '').trim();
  })()`) as Promise<string>;
}

/** The tag of what has the focus (the h1 after a navigation). */
export function focusedTag(page: Page): Promise<string> {
  return page.evaluate('document.activeElement?.tagName') as Promise<string>;
}

/** Presses Tab (or Shift+Tab) until the control named `name` has the focus. */
export async function tabTo(page: Page, name: string, { back = false } = {}): Promise<void> {
  const seen: string[] = [];
  for (let i = 0; i < 60; i += 1) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    const focused = await focusedName(page);
    if (focused === name) return;
    seen.push(focused);
  }
  assert.fail(`Tab never reached "${name}"; it went through ${JSON.stringify(seen)}`);
}

/** At a phone's width the page itself never scrolls sideways (tables scroll in their own box). */
export async function assertNoSidewaysScroll(page: Page, what: string): Promise<void> {
  const [scroll, width] = await page.evaluate('[document.documentElement.scrollWidth, window.innerWidth]') as [number, number];
  assert.ok(scroll <= width, `${what}: the page does not scroll sideways (${scroll} > ${width})`);
}
