/**
 * npm run keys:import -- [--file <data file>]
 *
 * Copies the API keys of a data file (default: the configured `data.file`) into Redis, for
 * gateways run with `data.keySource` "redis". Keys already there with the same apiKey or id
 * are overwritten; no key is deleted. Under NODE_ENV=production the demo keys are refused as at
 * the gateway's start-up (state/data-file/demo-data.ts), since a gateway reading keys from Redis never
 * searches them (it refuses a demo secret only when a client presents it: auth/demo-secrets.ts).
 */
import { readDataFile } from '../state/data-file/data-file.js';
import { checkDemoData } from '../state/data-file/demo-data.js';
import { RedisKeyDirectory } from '../state/keys/redis.js';
import { UsageError, parseOptions, runWhenExecuted, withRedis } from './redis.js';

async function main(): Promise<void> {
  const values = parseOptions({ file: { type: 'string' } }, 'usage: npm run keys:import -- [--file <data file>]');
  const { count, file } = await withRedis(async (redis, config) => {
    const file = values.file ?? config.data.file;
    const data = readDataFile(file);
    const warning = checkDemoData(data, { file, isProduction: process.env.NODE_ENV === 'production', allowDemoData: config.data.allowDemoData });
    if (warning !== undefined) process.stderr.write(`warning: ${warning}\n`);
    return { count: await new RedisKeyDirectory(redis).importKeys(data), file };
  });
  process.stdout.write(`Imported ${count} API key${count === 1 ? '' : 's'} from ${file} into Redis.\n`);
}

runWhenExecuted(import.meta.url, main);
