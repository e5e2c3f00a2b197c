/**
 * How the tests start Debian's Chromium through playwright-core: its old headless shell
 * (/usr/bin/chromium-headless-shell, package chromium-headless-shell), the build Playwright
 * itself runs headless tests with. It renders the same pages with the same Blink and V8 as the
 * full browser, at half the CPU: the full browser's headless mode runs its whole window and
 * compositor machinery (measured on the dashboard files: 35 CPU-s of Chromium against 17).
 * Where the shell is not installed but the full browser is (a contributor's machine), that one.
 *
 * One for a whole `npm test` run, started by scripts/run-tests.ts and reached by every browser
 * file through CHROMIUM_ENDPOINT (a start costs about a second of CPU, and twenty files paid it
 * each); a file run on its own starts its own (test/helpers/browser.ts). Nothing downloads a
 * browser. No node:test import here: the runner loads this file too.
 */
import { existsSync } from 'node:fs';
import { chromium, type LaunchOptions } from 'playwright-core';

const HEADLESS_SHELL = '/usr/bin/chromium-headless-shell';
export const CHROMIUM = existsSync(HEADLESS_SHELL) || !existsSync('/usr/bin/chromium') ? HEADLESS_SHELL : '/usr/bin/chromium';

/** The variable that carries the shared Chromium's playwright endpoint to the test processes. */
export const CHROMIUM_ENDPOINT = 'TEST_CHROMIUM_ENDPOINT';

export const LAUNCH: LaunchOptions = {
  executablePath: CHROMIUM,
  headless: true,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
  timeout: 30_000,
};

/** A Chromium the test processes connect to; closed by the returned function. */
export async function startSharedChromium(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const server = await chromium.launchServer({ ...LAUNCH, host: '127.0.0.1' });
  return { endpoint: server.wsEndpoint(), close: () => server.close() };
}
