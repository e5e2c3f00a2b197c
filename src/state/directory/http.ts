/**
 * Roles and sign records from an existing HTTP backend (the "http" store). The mapping, in
 * docs/directory.md ("HTTP upstream mapping"):
 *
 *   findSignRecord  GET <signUrl with {accountId}, {address}>
 *                   200: the record, or the interface's envelope around it → the record
 *                   404: no record
 *   listRoles       GET <rolesUrl with {accountId}>?page=<n>&limit=<n>[&name=<text>]
 *                   200: {items, total} (extra fields such as `pages` ignored), or the envelope
 *                   around it; 404: the account has no roles
 *
 * Every call sends the service credential (`Authorization: Bearer <token>`), the account id in
 * the configured account header, and is abandoned after `timeoutMs` (StoreTimeout, 504). Any
 * other status, a broken connection or an oversized answer is StoreUnavailable (503); after
 * `breakerFailures` of those in a row calls fail at once (cockatiel) until a trial call after
 * `breakerCooldownMs` succeeds, so a down upstream costs callers nothing but the cache's answer.
 */
import { Readable } from 'node:stream';
import { BrokenCircuitError, handleWhen, type CircuitBreakerPolicy } from 'cockatiel';
import type { Config } from '../../config/schema.js';
import { BadStoreData, StoreTimeout, StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { createStoreBreaker } from '../breaker.js';
import type { RecordReader } from './records.js';
import type { Directory, RolePage, RoleQuery, SignRecord } from './store.js';
import { readLimited } from '../../util/read-limited.js';

interface Answer {
  status: 200 | 404;
  body?: unknown;
}

export class HttpDirectory implements Directory {
  readonly #settings: Config['directory']['http'];
  readonly #records: RecordReader;
  readonly #accountHeader: string;
  readonly #breaker: CircuitBreakerPolicy;
  readonly #retryAfterSeconds: number;

  constructor(settings: Config['directory']['http'], { records, accountHeader, log, metrics }: { records: RecordReader; accountHeader: string; log: Logger; metrics?: Pick<Metrics, 'watchBreaker'> }) {
    this.#settings = settings;
    this.#records = records;
    this.#accountHeader = accountHeader;
    // Bad data is the upstream answering: only failures to answer open the breaker.
    const { breaker, retryAfterSeconds } = createStoreBreaker('directory upstream', settings, log, handleWhen((err) => !(err instanceof BadStoreData)));
    this.#breaker = breaker;
    metrics?.watchBreaker('directory', breaker);
    this.#retryAfterSeconds = retryAfterSeconds;
  }

  async findSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    const url = new URL(fill(this.#settings.signUrl!, accountId, address));
    const answer = await this.#get(url, accountId);
    if (answer.status === 404) return undefined;
    return this.#records.signRecord(unwrap(answer.body, 'sign record'), address, 'sign record');
  }

  async listRoles(accountId: string, { offset, limit, nameContains }: RoleQuery): Promise<RolePage> {
    // The route asks for whole pages only; the upstream is asked the same way.
    if (offset % limit !== 0) throw new RangeError('the HTTP store reads whole pages: offset must be a multiple of limit');
    const url = new URL(fill(this.#settings.rolesUrl!, accountId, ''));
    url.searchParams.set('page', String(offset / limit + 1));
    url.searchParams.set('limit', String(limit));
    if (nameContains !== undefined) url.searchParams.set('name', nameContains);
    const answer = await this.#get(url, accountId);
    if (answer.status === 404) return { items: [], total: 0 };
    return this.#records.rolePage(unwrap(answer.body, 'roles'), 'roles');
  }

  async #get(url: URL, accountId: string): Promise<Answer> {
    try {
      return await this.#breaker.execute(() => this.#call(url, accountId));
    } catch (err) {
      if (err instanceof BrokenCircuitError) throw new StoreUnavailable(new Error('directory upstream circuit breaker open'), this.#retryAfterSeconds);
      throw err;
    }
  }

  async #call(url: URL, accountId: string): Promise<Answer> {
    const { token, timeoutMs, maxResponseBytes } = this.#settings;
    const signal = AbortSignal.timeout(timeoutMs);
    const where = `directory upstream ${url.origin}`;
    try {
      const res = await fetch(url, {
        signal,
        redirect: 'error',
        headers: {
          accept: 'application/json',
          [this.#accountHeader]: accountId,
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
      });
      if (res.status === 404) {
        await res.body?.cancel();
        return { status: 404 };
      }
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new StoreUnavailable(new Error(`${where} answered ${res.status}`), this.#retryAfterSeconds);
      }
      const text = res.body === null ? '' : await readLimited(Readable.fromWeb(res.body), maxResponseBytes);
      try {
        return { status: 200, body: JSON.parse(text) };
      } catch {
        throw new BadStoreData(new Error(`${where}: the answer is not JSON`));
      }
    } catch (err) {
      if (err instanceof BadStoreData || err instanceof StoreUnavailable) throw err;
      if (signal.aborted) throw new StoreTimeout(new Error(`${where} did not answer within ${timeoutMs} ms`), this.#retryAfterSeconds);
      const reason = (err as { type?: string }).type === 'entity.too.large' ? `answered more than ${maxResponseBytes} bytes` : 'could not be reached';
      throw new StoreUnavailable(new Error(`${where} ${reason}`), this.#retryAfterSeconds);
    }
  }
}

function fill(template: string, accountId: string, address: string): string {
  return template.replaceAll('{accountId}', encodeURIComponent(accountId)).replaceAll('{address}', encodeURIComponent(address));
}

/** The interface's envelope, when the upstream uses it: its `message`; else the body itself. */
function unwrap(body: unknown, where: string): unknown {
  if (typeof body !== 'object' || body === null || !('success' in body) || !('message' in body)) return body;
  if (body.success !== true) throw new BadStoreData(new Error(`${where}: the upstream answered success: ${String(body.success)}`));
  return body.message;
}
