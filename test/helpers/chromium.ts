/**
 * How the tests start Debian's Chromium (/usr/bin/chromium) through playwright-core: one for a
 * whole `npm test` run, started by scripts/run-tests.ts and reached by every browser file
 * through CHROMIUM_ENDPOINT (a start costs about a second of CPU, and twenty files paid it
 * each); a file run on its own starts its own (test/helpers/browser.ts). Nothing downloads a
 * browser. No node:test import here: the runner loads this file too.
 */
import { chromium, type LaunchOptions } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

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
