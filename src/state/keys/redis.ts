/**
 * API keys in Redis, for keys managed while the gateway runs (a dashboard, or
 * `npm run keys:create -- --redis`). Each key is two hashes with the same fields, one found by
 * the apiKey clients send and one by key id:
 *   keyId, accountId, secretDigest ("sha256:<64 hex>"), disabled ("0" or "1"), and optionally
 *   scopes (scope tokens separated by single spaces; absent or empty: none), and during a
 *   roll's overlap previousSecretDigest and previousValidUntil (epoch ms), both or neither; for a
 *   key bound to a client certificate, certificateSha256 (64 lowercase hex digits); for a key
 *   that requires DPoP, requireDpop ("1").
 * A record with a missing or malformed field counts as absent, so a half-written key never
 * signs anyone in.
 *
 * Keys of the owner store (owner-store.redis.ts) keep their record in their account's Cluster
 * slot, `<prefix>:akey:{<accountId>}:<keyId>` (the same fields plus `apiKey`), written by the
 * same script as the account: the two hashes above are then pointers holding `home` (the
 * account id) and `keyId`. A lookup that finds a pointer reads the record it leads to (a second
 * round trip, only when the record is not cached); a tombstone there (`gone`) is no key. While
 * that record is not written yet (the key's first change since records moved into the slot),
 * the fields beside the pointer, as an older version wrote them, are the record.
 *
 * Every write of a record is announced on `<prefix>:keys` (`{"accountId"}`, in the same
 * MULTI or script as the write), and a gateway keeps the records it read for a short while
 * (key-directory.cache.ts), dropped whole at each notice: a sign-in or refresh then costs one
 * round trip. Whoever writes these hashes by other means must publish there too, or a gateway
 * goes on serving the old record for up to `redis.keyCacheTtlMs`.
 */
import { ID_PATTERN as ID, SCOPE_PATTERN as SCOPE } from '../../domain/formats.js';
import { SECRET_DIGEST_PATTERN as DIGEST } from '../../domain/secrets.js';
import { toApiKeyRecord, type DataFile } from '../data-file/data-file.js';
import { KeyRecordCache, type KeyCacheSettings } from './cache.js';
import type { ApiKeyRecord, KeyDirectory } from './store.js';
import type { RedisConnection } from '../redis/client.js';

export class RedisKeyDirectory implements KeyDirectory {
  readonly #redis: RedisConnection;
  readonly #cache: KeyRecordCache | undefined;
  #reads = 0;

  /** With `cache` (the gateway's), records read are kept and the keys channel is listened to; without (the CLI), every lookup reads Redis. */
  constructor(redis: RedisConnection, { cache }: { cache?: KeyCacheSettings } = {}) {
    this.#redis = redis;
    if (cache === undefined || cache.ttlMs === 0) return;
    const kept = new KeyRecordCache(cache);
    const drop = () => kept.drop();
    kept.listenTo(redis.subscribe(redis.keys.keysChannel, drop, drop));
    this.#cache = kept;
  }

  findByApiKey(apiKey: string): Promise<ApiKeyRecord | undefined> {
    return this.#find(this.#redis.keys.apiKey(apiKey), { apiKey });
  }

  findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.#find(this.#redis.keys.keyId(keyId), { keyId });
  }

  /** Forgets every cached record: this instance wrote key records (the owner store's onKeysWritten). */
  dropCache(): void {
    this.#cache?.drop();
  }

  /** Records read from Redis so far (tests count them: a cached lookup reads none). */
  get reads(): number {
    return this.#reads;
  }

  #find(name: string, named: { apiKey?: string; keyId?: string }): Promise<ApiKeyRecord | undefined> {
    const read = async () => {
      this.#reads++;
      const fields = await this.#redis.run((c) => c.hgetall(name));
      const { home, keyId } = fields;
      if (home === undefined) return toRecord(fields);
      if (keyId === undefined || !ID.test(home) || !ID.test(keyId) || (named.keyId !== undefined && keyId !== named.keyId)) return undefined;
      const held = await this.#redis.run((c) => c.hgetall(this.#redis.keys.accountKey(home, keyId)));
      if (Object.keys(held).length === 0) return toRecord(fields);
      // The record must be the one the pointer names: the key, its account, its apiKey.
      const record = held.gone === undefined ? toRecord(held) : undefined;
      if (record === undefined || record.accountId !== home || record.keyId !== keyId) return undefined;
      return named.apiKey === undefined || held.apiKey === named.apiKey ? record : undefined;
    };
    return this.#cache === undefined ? read() : this.#cache.find(name, read);
  }

  /**
   * Writes (or overwrites) one key under both of its names, each write announced. Each name is
   * replaced whole: over a key of the owner store, the record written here is what signs in (its
   * pointer is gone) until the owner store next writes that key.
   */
  async putKey(apiKey: string, record: ApiKeyRecord): Promise<void> {
    if (!isWellFormed(record)) {
      throw new TypeError('putKey: the key id and account id must be plain ids, the digest "sha256:<64 hex>" and scopes scope tokens');
    }
    const fields = keyRecordFields(record);
    const k = this.#redis.keys;
    const notice = keyChangeNotice(record.accountId);
    // Two keys in two Cluster slots: two transactions, each with its notice. The id record goes
    // first, so a reader that finds the apiKey record also finds the key it names.
    for (const name of [k.keyId(record.keyId), k.apiKey(apiKey)]) {
      await this.#redis.run(async (c) => {
        const results = await c.multi().del(name).hset(name, fields).publish(k.keysChannel, notice).exec();
        const failed = results?.find(([err]) => err !== null);
        if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('transaction aborted');
      });
    }
    // Its own copies at once, not when its own notice comes back.
    this.#cache?.drop();
  }

  /** Writes every key of a data file; returns how many. */
  async importKeys(data: DataFile): Promise<number> {
    let count = 0;
    for (const account of data.accounts) {
      for (const key of account.apiKeys) {
        await this.putKey(key.apiKey, toApiKeyRecord(account, key));
        count++;
      }
    }
    return count;
  }
}

/** What a write of an account's key records announces on the keys channel. */
export function keyChangeNotice(accountId: string): string {
  return JSON.stringify({ accountId });
}

/** A key record as the fields of its hashes. */
export function keyRecordFields(record: ApiKeyRecord): Record<string, string> {
  return {
    keyId: record.keyId,
    accountId: record.accountId,
    secretDigest: record.secretDigest,
    disabled: record.disabled ? '1' : '0',
    scopes: record.scopes.join(' '),
    ...(record.previousSecretDigest !== undefined && record.previousValidUntil !== undefined
      ? { previousSecretDigest: record.previousSecretDigest, previousValidUntil: String(record.previousValidUntil) }
      : {}),
    ...(record.certificateSha256 === undefined ? {} : { certificateSha256: record.certificateSha256 }),
    ...(record.requireDpop === true ? { requireDpop: '1' } : {}),
  };
}

function toRecord(fields: Record<string, string>): ApiKeyRecord | undefined {
  const { keyId, accountId, secretDigest, disabled, scopes: scopeText = '', previousSecretDigest, previousValidUntil, certificateSha256, requireDpop } = fields;
  if (keyId === undefined || accountId === undefined || secretDigest === undefined || (disabled !== '0' && disabled !== '1')) return undefined;
  const record: ApiKeyRecord = { keyId, accountId, secretDigest, disabled: disabled === '1', scopes: scopeText === '' ? [] : scopeText.split(' ') };
  // A half-present overlap is no overlap: the key signs in with its current secret only.
  if (previousSecretDigest !== undefined && previousValidUntil !== undefined && /^[0-9]{1,16}$/.test(previousValidUntil)) {
    record.previousSecretDigest = previousSecretDigest;
    record.previousValidUntil = Number(previousValidUntil);
  }
  if (certificateSha256 !== undefined) record.certificateSha256 = certificateSha256;
  // Anything but absent requires DPoP: a malformed flag must not let a key sign in without a proof.
  if (requireDpop !== undefined) record.requireDpop = true;
  return isWellFormed(record) ? record : undefined;
}

/** What both directions hold a key record to: plain ids, "sha256:<64 hex>" digests, scope tokens. */
function isWellFormed({ keyId, accountId, secretDigest, scopes, previousSecretDigest, certificateSha256 }: ApiKeyRecord): boolean {
  return ID.test(keyId) && ID.test(accountId) && DIGEST.test(secretDigest) && scopes.every((s) => SCOPE.test(s))
    && (previousSecretDigest === undefined || DIGEST.test(previousSecretDigest))
    // A malformed binding is no key, never an unbound one: it must not sign in without its certificate.
    && (certificateSha256 === undefined || /^[0-9a-f]{64}$/.test(certificateSha256));
}
