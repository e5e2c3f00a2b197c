/**
 * Start-up: load the config, build the services, listen, and stop cleanly on SIGTERM/SIGINT.
 * SIGHUP reloads the configuration (config/reload.ts, docs/reload.md).
 * A bad config, data file or signing key stops the process here, before it listens, with a
 * message naming what is wrong; so does the demo data under NODE_ENV=production
 * (state/data-file/demo-data.ts).
 *
 * With `workers` above 1 this process becomes the primary of node:cluster: it forks that many
 * copies of itself, which share the one port (the primary hands out connections round-robin)
 * and share state through Redis (the schema requires it, and one signing key for all). A
 * worker that dies after it was listening is replaced; one that dies before ever listening
 * stops the whole gateway, since its siblings would fail the same way. The primary passes
 * SIGHUP on to every worker, and each reloads on its own.
 *
 * Stopping: the first SIGTERM or SIGINT drains (server.ts: /readyz 503 while still serving,
 * then in-flight work finishes) and the process exits 0; a second one exits at once, with
 * 128 + the signal's number as a shell reports a killed process (143 for SIGTERM, 130 for
 * SIGINT). The primary passes the first on to its workers as an IPC message rather than a
 * signal, so that a worker which got the same signal itself (Ctrl-C reaches the whole process
 * group, systemd signals the whole cgroup) does not take the primary's as a second one; the
 * primary exits once every worker has, and on a second signal kills them (SIGKILL) and exits.
 */
import cluster from 'node:cluster';
import { randomBytes } from 'node:crypto';
import { availableParallelism, constants } from 'node:os';
import { resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { ConfigError, describeConfig, loadConfig } from './config/load.js';
import { createConfigReloader } from './config/reload.js';
import { workerCount, type Config } from './config/schema.js';
import { SigningKeyError } from './auth/signer.js';
import { createServices, type Services } from './services.js';
import { dataFileWrittenBy } from './state/index.js';
import { startServer, type RunningServer } from './server.js';
import { CertificateError } from './tls/certificates.js';
import { DataFileError } from './state/data-file/data-file.js';
import { lockDataFile } from './state/data-file/lock.js';
import { DemoDataError } from './state/data-file/demo-data.js';
import { groupScrape, serveGroupMetrics } from './telemetry/cluster-metrics.js';
import { createLogger, type Logger } from './telemetry/log.js';

/**
 * V8's allocation-site pretenuring off. Once a warm-up or a burst makes V8 see a proxied
 * request's objects (its ClientRequest, parser results, headers) outlive a scavenge, it decides
 * to allocate them in the old generation from then on: every request's garbage then waits for
 * a full mark-compact (about one a second under load), and the scavenges that come in between
 * take 15–25 ms instead of 1–3 ms. That was the gateway's p99: 25 ms against 8.5 ms without it,
 * and 1.24× the throughput (bench/README.md). A gateway's objects live for one request; nothing
 * it keeps is allocated per request in bulk, so it loses nothing by letting them age normally.
 * Set before any request is served, which is all the flag needs (it applies to the decisions
 * made from then on); workers run this too.
 */
setFlagsFromString('--no-allocation-site-pretenuring');

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    return fail(err);
  }
  const workers = workerCount(config, availableParallelism());
  const root = createLogger(config.log.level);
  if (workers > 1 && cluster.isPrimary) return superviseWorkers(workers, root, config);
  const log = cluster.isWorker ? root.child({ worker: cluster.worker!.id }) : root;
  log.debug({ settings: describeConfig(config) }, 'configuration');
  // Nothing to reload before the gateway listens, but SIGHUP must not end it either (Node's default).
  let reload = () => log.warn({ signal: 'SIGHUP' }, 'SIGHUP before the gateway listens: ignored');
  process.on('SIGHUP', () => reload());
  // Listened for before starting, so that a stop asked for meanwhile (a worker's order from
  // the primary, above all) is not lost: it is carried out once the server runs.
  let running: RunningServer | undefined;
  let stopAsked: string | undefined;
  const stop = (signal: string) => {
    if (stopAsked !== undefined) return;
    stopAsked = signal;
    if (running === undefined) return;
    const { drainDelayMs, shutdownTimeoutMs } = config.server;
    log.info({ signal, drainDelayMs, shutdownTimeoutMs }, 'shutting down');
    running.drain().then(() => {
      log.info('stopped');
      process.exit(0);
    }, (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  let isWaitingForLock = false;
  onStopSignals(log, (signal) => {
    // Waiting for the data file's lock, the process holds nothing yet: it stops at once.
    if (isWaitingForLock) {
      log.info({ signal }, 'stopped while waiting for the data file lock');
      process.exit(0);
    }
    stop(signal);
  });
  if (cluster.isWorker) process.on('message', (message: unknown) => { if (isDrainOrder(message)) stop('primary'); });
  // The data file has one writer: the lock is taken before the file is read, so a process that
  // waited for it starts from every change the previous holder acknowledged.
  const written = dataFileWrittenBy(config);
  if (written !== undefined) {
    isWaitingForLock = true;
    try {
      await lockDataFile(written.file, {
        log,
        staleMs: config.data.lockStaleMs,
        createDirectory: written.createDirectory,
        onLost(err) {
          // Another process may be writing the file by now: any write of this one could undo its changes.
          log.error({ err, file: written.file }, 'lost the data file lock: exiting');
          process.exit(1);
        },
      });
    } catch (err) {
      return fail(err);
    }
    isWaitingForLock = false;
  }
  let services;
  try {
    services = createServices(config, { log, isProduction: process.env.NODE_ENV === 'production' });
    // A scrape of any worker answers for the whole group (telemetry/cluster-metrics.ts).
    if (cluster.isWorker && config.metrics.enabled) services.metrics.scrapeWith(groupScrape(services.metrics.registry));
    running = await startServer(services);
  } catch (err) {
    await services?.close();
    return fail(err);
  }
  const dashboard = config.dashboard.enabled ? `${running.url}${config.dashboard.path}/` : undefined;
  log.info({ url: running.url, managementUrl: running.managementUrl, dashboard, dataFile: config.data.file, state: services.state, keySource: config.data.keySource, directoryStore: config.directory.store }, `gateway listening on ${running.url}`);
  const reloadConfig = reloadsOf(config, services, log);
  const { certificates } = running;
  reload = certificates === undefined ? reloadConfig : () => {
    reloadConfig();
    certificates.reload('SIGHUP');
  };
  if (stopAsked !== undefined) {
    const signal = stopAsked;
    stopAsked = undefined;
    stop(signal);
  }
}

/** The primary's order to a worker to stop as on its own first signal. */
const DRAIN_ORDER = { gateway: 'drain' } as const;

function isDrainOrder(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { gateway?: unknown }).gateway === DRAIN_ORDER.gateway;
}

/**
 * Calls `first` on the first SIGTERM or SIGINT; on the next one, `second` (if given) and
 * exits at once with 128 + its number.
 */
function onStopSignals(log: Logger, first: (signal: string) => void, second?: () => void): void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (!signalled) {
      signalled = true;
      first(signal);
      return;
    }
    log.warn({ signal }, 'second signal: exiting at once');
    second?.();
    process.exit(128 + constants.signals[signal]);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** What SIGHUP does once the gateway listens; with `reload.watch`, a change of the GATEWAY_CONFIG file does the same. */
function reloadsOf(config: Config, services: Services, log: Logger): () => void {
  const reloader = createConfigReloader({ initial: config, load: () => loadConfig(), apply: (next) => services.reload(next), log });
  const file = process.env.GATEWAY_CONFIG;
  if (config.reload.watch) {
    if (file === undefined || file === '') log.warn('reload.watch is on, but GATEWAY_CONFIG names no file to watch: only SIGHUP reloads');
    else reloader.watch(resolve(file), config.reload.watchIntervalMs);
  }
  return () => void reloader.reload('SIGHUP');
}

function superviseWorkers(count: number, log: Logger, config: Config): void {
  const listening = new Set<number>();
  let stopping = false;
  // Without a configured key each process would sign device cookies with its own: one key made
  // here for every worker (and every replacement), so a device one worker marked is known to all.
  const env = {
    ...(config.owner.deviceCookieSecret === undefined ? { OWNER_DEVICE_COOKIE_SECRET: randomBytes(32).toString('base64url') } : {}),
    // Likewise the DPoP nonces' key, so a nonce one worker gave is good at every worker.
    ...(config.dpop.nonceSecret === undefined ? { DPOP_NONCE_SECRET: randomBytes(32).toString('base64url') } : {}),
  };
  const fork = () => {
    const worker = cluster.fork(env);
    worker.once('listening', () => listening.add(worker.id));
  };
  cluster.on('exit', (worker, code, signal) => {
    const wasListening = listening.delete(worker.id);
    if (stopping) {
      // A worker whose shutdown failed (or that was killed) makes the whole stop a failure.
      if (code !== 0) process.exitCode = 1;
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0);
      return;
    }
    if (!wasListening) {
      log.error({ worker: worker.id, code, signal }, 'a worker failed to start: stopping the gateway');
      stopping = true;
      process.exitCode = 1;
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM');
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(1);
      return;
    }
    log.error({ worker: worker.id, code, signal }, 'a worker died: starting another');
    fork();
  });
  serveGroupMetrics();
  for (let i = 0; i < count; i++) fork();
  log.info({ workers: count }, `gateway started ${count} workers`);

  onStopSignals(log, (signal) => {
    log.info({ signal }, 'shutting down');
    stopping = true;
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0);
    // Each worker drains as on its own first signal: /readyz 503, open requests finish first.
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker?.isConnected()) worker.send(DRAIN_ORDER);
      else worker?.process.kill('SIGTERM');
    }
  }, () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
  });
  // Each worker reads the configuration again itself, and logs what it made of it. Only those
  // listening: one still starting has nothing to reload yet, or no handler to survive the signal.
  process.on('SIGHUP', () => {
    log.info({ signal: 'SIGHUP', workers: listening.size }, 'passing SIGHUP on to the workers');
    for (const worker of Object.values(cluster.workers ?? {})) if (worker !== undefined && listening.has(worker.id)) worker.process.kill('SIGHUP');
  });
}

function fail(err: unknown): void {
  const known = err instanceof ConfigError || err instanceof DataFileError || err instanceof DemoDataError || err instanceof SigningKeyError || err instanceof CertificateError
    || (err as NodeJS.ErrnoException).code === 'EADDRINUSE' || (err as NodeJS.ErrnoException).code === 'EACCES';
  process.stderr.write(`gateway: cannot start: ${known ? (err as Error).message : (err as Error).stack}\n`);
  process.exitCode = 1;
}

await main();
