/**
 * Start-up: load the config, build the services, listen, and stop cleanly on SIGTERM/SIGINT.
 * A bad config, data file or signing key stops the process here, before it listens, with a
 * message naming what is wrong.
 */
import { ConfigError, describeConfig, loadConfig } from './config/load.js';
import { SigningKeyError } from './auth/signer.js';
import { createServices } from './services.js';
import { startServer } from './server.js';
import { DataFileError } from './stores/data-file.js';
import { createLogger } from './telemetry/log.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    return fail(err);
  }
  const log = createLogger(config.log.level);
  log.debug({ settings: describeConfig(config) }, 'configuration');
  let running;
  let services;
  try {
    services = createServices(config, { log });
    running = await startServer(services);
  } catch (err) {
    await services?.close();
    return fail(err);
  }
  log.info({ url: running.url, dataFile: config.data.file, state: services.state, keySource: config.data.keySource }, `gateway listening on ${running.url}`);

  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down');
    running.close().then(() => process.exit(0), (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

function fail(err: unknown): void {
  const known = err instanceof ConfigError || err instanceof DataFileError || err instanceof SigningKeyError
    || (err as NodeJS.ErrnoException).code === 'EADDRINUSE' || (err as NodeJS.ErrnoException).code === 'EACCES';
  process.stderr.write(`gateway: cannot start: ${known ? (err as Error).message : (err as Error).stack}\n`);
  process.exitCode = 1;
}

await main();
