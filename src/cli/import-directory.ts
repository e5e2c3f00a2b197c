/**
 * npm run directory:import -- [--file <data file>]
 *
 * Copies the roles and sign records of a data file (default: the configured `data.file`) into
 * Redis, in the layout gateways with `directory.store` "redis" read, and announces each change so
 * that running gateways read it at once. Records already there with the same id or address are
 * overwritten; nothing is deleted.
 */
import { readDataFile } from '../state/data-file/data-file.js';
import { createRecordReader } from '../state/directory/records.js';
import { RedisDirectory } from '../state/directory/redis.js';
import { createLogger } from '../telemetry/log.js';
import { UsageError, parseOptions, runWhenExecuted, withRedis } from './redis.js';

async function main(): Promise<void> {
  const values = parseOptions({ file: { type: 'string' } }, 'usage: npm run directory:import -- [--file <data file>]');
  const { counts, file } = await withRedis(async (redis, config) => {
    const file = values.file ?? config.data.file;
    const directory = new RedisDirectory(redis, { records: createRecordReader(config.directory.timeZone), log: createLogger('warn', process.stderr) });
    return { counts: await directory.importData(readDataFile(file)), file };
  });
  process.stdout.write(`Imported ${counts.roles} role${counts.roles === 1 ? '' : 's'} and ${counts.signRecords} sign record${counts.signRecords === 1 ? '' : 's'} from ${file} into Redis.\n`);
}

runWhenExecuted(import.meta.url, main);
