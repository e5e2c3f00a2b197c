/**
 * What the admin commands share: the gateway's own configuration (GATEWAY_CONFIG and the
 * environment, as the gateway reads them) and a connection to its Redis. A command needs Redis
 * because its effect must reach every running instance.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { loadConfig } from '../config/load.js';
import { usesRedis, type Config } from '../config/schema.js';
import { connectRedis, type RedisConnection } from '../state/redis/client.js';
import { createLogger } from '../telemetry/log.js';

export class UsageError extends Error {
  override name = 'UsageError';
}

/** The command's options (node:util parseArgs), or a UsageError ending in `usage`. */
export function parseOptions<T extends ParseArgsOptionsConfig>(options: T, usage: string) {
  try {
    return parseArgs({ options }).values;
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`);
  }
}

/** Runs `fn` with the configured Redis, then closes it. */
export async function withRedis<T>(fn: (redis: RedisConnection, config: Config) => Promise<T>): Promise<T> {
  const config = loadConfig();
  if (!usesRedis(config)) {
    throw new UsageError('this command needs the Redis the gateways share: set REDIS_URL (or redis.* in GATEWAY_CONFIG)');
  }
  const redis = connectRedis(config.redis, createLogger('warn', process.stderr));
  try {
    if (!(await redis.waitUntilReady(config.redis.connectTimeoutMs))) throw new UsageError('cannot reach Redis');
    return await fn(redis, config);
  } finally {
    await redis.close();
  }
}

/** What one run of a command writes, and its exit code (commands that tests run in process return it). */
export interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** A command ended by `err`: its message (the stack of one that is no known refusal), exit 2 for a usage error, else 1. */
export function failedRun(err: unknown): CommandRun {
  const known = ['UsageError', 'ConfigError', 'DataFileError', 'DemoDataError'].includes((err as Error).name);
  return { code: err instanceof UsageError ? 2 : 1, stdout: '', stderr: `${known ? (err as Error).message : (err as Error).stack}\n` };
}

/** Runs a command's main when the file is executed, not imported; errors end in a message and exit code. */
export function runWhenExecuted(moduleUrl: string, main: () => Promise<void>): void {
  if (process.argv[1] === undefined || moduleUrl !== pathToFileURL(realpathSync(process.argv[1])).href) return;
  main().catch((err: unknown) => {
    const { code, stderr } = failedRun(err);
    process.stderr.write(stderr);
    process.exitCode = code;
  });
}
