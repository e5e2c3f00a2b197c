/**
 * npm run tokens:reset -- --account <accountId> [--key <keyId>]
 *
 * The operator's token reset: every refresh token of the key (or of every key of the account)
 * dies, and every access token issued until now is refused by every gateway instance within a
 * second. Owners do the same through POST /api/reset with their key's credentials.
 */
import { RedisRevocationStore } from '../state/revocation/redis.js';
import { resetRetentionMs } from '../state/revocation/store.js';
import { createLogger } from '../telemetry/log.js';
import { UsageError, parseOptions, runWhenExecuted, withRedis } from './redis.js';

const USAGE = 'usage: npm run tokens:reset -- --account <accountId> [--key <keyId>]';

async function main(): Promise<void> {
  const values = parseOptions({ account: { type: 'string' }, key: { type: 'string' } }, USAGE);
  if (values.account === undefined) throw new UsageError(USAGE);
  const scope = values.key === undefined ? { accountId: values.account } : { accountId: values.account, keyId: values.key };
  const at = await withRedis(async (redis, config) => {
    const store = new RedisRevocationStore(redis, { retainMs: resetRetentionMs(config.tokens), log: createLogger('warn', process.stderr) });
    const now = Date.now();
    await store.reset(scope, now);
    return now;
  });
  const what = scope.keyId === undefined ? `every key of account "${scope.accountId}"` : `key "${scope.keyId}" of account "${scope.accountId}"`;
  process.stdout.write(`Reset the tokens of ${what} at ${new Date(at).toISOString()}: every token issued until then is dead.\n`);
}

runWhenExecuted(import.meta.url, main);
