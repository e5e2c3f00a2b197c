/**
 * Debian's Chromium (its headless shell, test/helpers/chromium.ts) driven by playwright-core: the run's shared
 * one (test/helpers/chromium.ts) or, for a file run alone, one for the file; a fresh context for
 * each test. Nothing here downloads a browser: where Chromium is not installed the browser
 * suites skip with a loud message, except under CI (`CI` set), where they run and fail
 * (.ci/run installs it), as test/helpers/redis.ts does for redis-server.
 */
import { existsSync } from 'node:fs';
import { after, type TestContext } from 'node:test';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ENDPOINT, LAUNCH } from './chromium.js';

export { CHROMIUM } from './chromium.js';

let warned = false;

/** The `{ skip }` option of every browser suite (node:test's test options). */
export function browserSuite(): { skip: string | false } {
  if (existsSync(CHROMIUM) || process.env.CI) return { skip: false };
  const message = `${CHROMIUM} is not installed: browser suites SKIPPED (apt-get install chromium-headless-shell; CI runs them)`;
  if (!warned) {
    warned = true;
    process.stderr.write(`\n*** ${message} ***\n\n`);
  }
  return { skip: message };
}

let shared: Promise<Browser> | undefined;

/**
 * The Chromium of the file's tests: the run's, when scripts/run-tests.ts started one, else one
 * for the file, started by its first caller (a start costs about a second of CPU). Tests share
 * nothing through it: each takes a context of its own, with its own cookies and storage.
 * Let go once the file's tests have ended (a connection is closed, the browser it reached not).
 */
export function sharedChromium(): Promise<Browser> {
  const endpoint = process.env[CHROMIUM_ENDPOINT];
  shared ??= endpoint === undefined || endpoint === '' ? chromium.launch(LAUNCH) : chromium.connect(endpoint, { timeout: 30_000 });
  return shared;
}

// Registered at import, so on the file's root: after its last test, whichever started it.
after(async () => {
  if (shared !== undefined) await (await shared.catch(() => undefined))?.close();
});

/**
 * A fresh browser context (no cookies or storage of any other test; pages of one origin in it
 * share localStorage and Web Locks, as tabs do) on the file's Chromium. Closed when `t` ends.
 */
export async function launchBrowser(t: TestContext): Promise<BrowserContext> {
  const context = await (await sharedChromium()).newContext();
  t.after(() => context.close());
  return context;
}
