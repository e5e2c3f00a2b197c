/**
 * Debian's Chromium (/usr/bin/chromium) driven by playwright-core, headless, in a fresh
 * profile of its own. Nothing here downloads a browser: where Chromium is not installed the
 * browser suites skip with a loud message, except under CI (`CI` set), where they run and
 * fail (.ci/run installs it), as test/helpers/redis.ts does for redis-server.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

let warned = false;

/** The `{ skip }` option of every browser suite (node:test's test options). */
export function browserSuite(): { skip: string | false } {
  if (existsSync(CHROMIUM) || process.env.CI) return { skip: false };
  const message = `${CHROMIUM} is not installed: browser suites SKIPPED (apt-get install chromium; CI runs them)`;
  if (!warned) {
    warned = true;
    process.stderr.write(`\n*** ${message} ***\n\n`);
  }
  return { skip: message };
}

/**
 * A browser context with a fresh user-data directory (pages of one origin in it share
 * localStorage and Web Locks, as tabs do). Closed when `t` ends.
 */
export async function launchBrowser(t: TestContext): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    timeout: 30_000,
  });
  // Closed before its profile goes: Chromium writes there until it exits.
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
  });
  return context;
}
