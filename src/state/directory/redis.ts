/**
 * Roles and sign records in Redis, written by the dashboard and the signature collector (or
 * `npm run directory:import`), read here. The layout, per account (docs/directory.md):
 *
 *   <prefix>:roles:{<accountId>}  sorted set of role ids, each scored by its own id
 *   <prefix>:role:{<accountId>}   hash, role id → {"id","slug","name","description","public"} JSON
 *   <prefix>:sign:{<accountId>}   hash, lowercase address → {"signedNonce","signedAt","signedExpiredAt"} JSON
 *
 * and one channel, `<prefix>:directory`, on which a writer announces each change (as JSON:
 * {"kind":"roles","accountId"}, {"kind":"sign","accountId","address"} or {"kind":"account",
 * "accountId"}) so that every instance's cache reads it again at once. A page of roles, and a
 * name search, are computed in Redis by one script: a big account's roles never travel whole.
 * Values go through directory-records.ts: what cannot be read is a store error.
 */
import { ADDRESS_PATTERN, ID_PATTERN } from '../../domain/formats.js';
import { BadStoreData, StoreTimeout } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import { toSignRecord, type DataFile } from '../data-file/data-file.js';
import type { RecordReader } from './records.js';
import type { Directory, DirectoryChange, DirectoryChangeListener, DirectoryChanges, Role, RolePage, RoleQuery, SignRecord } from './store.js';
import { timedOut, type RedisClient, type RedisConnection } from '../redis/client.js';

export class RedisDirectory implements Directory, DirectoryChanges {
  readonly #redis: RedisConnection;
  readonly #records: RecordReader;
  readonly #log: Logger;

  constructor(redis: RedisConnection, { records, log }: { records: RecordReader; log: Logger }) {
    this.#redis = redis;
    this.#records = records;
    this.#log = log;
  }

  async findSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    const json = await this.#run((c) => c.hget(this.#redis.keys.signRecords(accountId), address));
    if (json === null) return undefined;
    return this.#records.signRecord(parseJson(json, 'sign record'), address, 'sign record');
  }

  async listRoles(accountId: string, { offset, limit, nameContains = '' }: RoleQuery): Promise<RolePage> {
    const k = this.#redis.keys;
    const [total, ...pairs] = await this.#run((c) => c.gwRolesPage(k.roleIndex(accountId), k.roles(accountId), offset, limit, nameContains));
    // Named with its account: the operator must find the record (Redis's cjson refuses some
    // JSON JavaScript reads, e.g. a lone surrogate's escape).
    if (total === -1) throw new BadStoreData(new Error(`account ${accountId}, role ${String(pairs[0])}: no readable name`));
    const items: Role[] = [];
    for (let i = 0; i < pairs.length; i += 2) {
      const id = String(pairs[i]);
      const json = pairs[i + 1];
      const where = `role ${id}`;
      if (typeof json !== 'string') throw new BadStoreData(new Error(`${where}: in the index but not in the hash`));
      const value = parseJson(json, where);
      const role = this.#records.role(typeof value === 'object' && value !== null && !('id' in value) ? { ...value, id } : value, where);
      if (String(role.id) !== id) throw new BadStoreData(new Error(`${where}: its JSON names another id`));
      items.push(role);
    }
    return { items, total: Number(total) };
  }

  watch(listener: DirectoryChangeListener): void {
    this.#redis.subscribe(this.#redis.keys.directoryChannel, (message) => {
      const change = parseChange(message);
      if (change !== undefined) {
        listener.onChange(change);
        return;
      }
      // Something else wrote there: whatever it meant to announce, nothing cached is sure.
      this.#log.warn('ignored a malformed notice on the directory channel');
      listener.onGap();
    }, () => listener.onGap());
  }

  // Writes, for `npm run directory:import` and for tests; the dashboard writes the same layout.
  // Each is one MULTI (the records and the notice together): readers never see a change unannounced.

  async putRoles(accountId: string, roles: readonly Role[]): Promise<void> {
    const k = this.#redis.keys;
    await this.#write({ kind: 'roles', accountId }, (m) => {
      for (const role of roles) {
        m.zadd(k.roleIndex(accountId), role.id, String(role.id));
        m.hset(k.roles(accountId), String(role.id), JSON.stringify(role));
      }
    });
  }

  async deleteRoles(accountId: string, ids: readonly number[]): Promise<void> {
    const k = this.#redis.keys;
    await this.#write({ kind: 'roles', accountId }, (m) => {
      for (const id of ids) {
        m.zrem(k.roleIndex(accountId), String(id));
        m.hdel(k.roles(accountId), String(id));
      }
    });
  }

  async putSignRecord(accountId: string, record: SignRecord): Promise<void> {
    const { address, signedNonce, signedAt, signedExpiredAt } = record;
    const json = JSON.stringify({ signedNonce, signedAt: new Date(signedAt).toISOString(), signedExpiredAt: new Date(signedExpiredAt).toISOString() });
    await this.#write({ kind: 'sign', accountId, address }, (m) => m.hset(this.#redis.keys.signRecords(accountId), address, json));
  }

  async deleteSignRecord(accountId: string, address: string): Promise<void> {
    await this.#write({ kind: 'sign', accountId, address }, (m) => m.hdel(this.#redis.keys.signRecords(accountId), address));
  }

  /** Writes every role and sign record of a data file (nothing is deleted); returns the counts. */
  async importData(data: DataFile): Promise<{ roles: number; signRecords: number }> {
    const counts = { roles: 0, signRecords: 0 };
    for (const account of data.accounts) {
      if (account.roles.length > 0) await this.putRoles(account.id, account.roles);
      for (const s of account.signRecords) await this.putSignRecord(account.id, toSignRecord(s));
      counts.roles += account.roles.length;
      counts.signRecords += account.signRecords.length;
    }
    return counts;
  }

  async #write(change: DirectoryChange, queue: (multi: ReturnType<RedisClient['multi']>) => void): Promise<void> {
    await this.#run(async (c) => {
      const multi = c.multi();
      queue(multi);
      multi.publish(this.#redis.keys.directoryChannel, JSON.stringify(change));
      const results = await multi.exec();
      const failed = results?.find(([err]) => err !== null);
      if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('transaction aborted');
    });
  }

  /** A call through the connection's breaker; a call Redis let time out is a 504 here. */
  async #run<T>(call: (client: RedisClient) => Promise<T>): Promise<T> {
    try {
      return await this.#redis.run(call);
    } catch (err) {
      throw timedOut(err) ? new StoreTimeout((err as Error).cause) : err;
    }
  }
}

function parseJson(json: string, where: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    throw new BadStoreData(new Error(`${where}: not JSON`));
  }
}

/** A notice from the channel, or undefined when it is not one this gateway understands. */
export function parseChange(message: string): DirectoryChange | undefined {
  let notice: { kind?: unknown; accountId?: unknown; address?: unknown };
  try {
    notice = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof notice !== 'object' || notice === null) return undefined;
  const { kind, accountId, address } = notice;
  if (typeof accountId !== 'string' || !ID_PATTERN.test(accountId)) return undefined;
  if (kind === 'roles' || kind === 'account') return { kind, accountId };
  if (kind === 'sign' && typeof address === 'string' && ADDRESS_PATTERN.test(address)) {
    return { kind, accountId, address: address.toLowerCase() };
  }
  return undefined;
}
