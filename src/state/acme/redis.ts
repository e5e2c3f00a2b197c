/**
 * ACME's state in Redis, for several instances (or workers): the order lock is one key taken
 * with SET NX PX and a random token, released by a compare-and-delete script (ACME_UNLOCK), so
 * one instance orders at a time and a holder that outlived its lock never releases another's.
 * A saved certificate is announced on `<prefix>:acme`; every instance reads it and serves it.
 * HTTP-01 answers live here too: the CA reaches one instance of many, maybe not the one ordering.
 */
import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '../redis/client.js';
import type { AcmeCertificate, AcmeStore, ChallengeStore } from './store.js';

export class RedisAcmeStore implements AcmeStore {
  readonly #redis: RedisConnection;
  /** This store's id in its announcements, so that its own are not taken for another instance's. */
  readonly #id = randomBytes(8).toString('hex');

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async accountKey(make: () => Promise<string>): Promise<string> {
    const name = this.#redis.keys.acmeAccountKey;
    const kept = await this.#redis.run((c) => c.get(name));
    if (kept !== null) return kept;
    const made = await make();
    return this.#redis.run((c) => c.gwAcmeKeepAccountKey(name, made));
  }

  async certificate(): Promise<AcmeCertificate | undefined> {
    const text = await this.#redis.run((c) => c.get(this.#redis.keys.acmeCertificate));
    return text === null ? undefined : parseCertificate(text);
  }

  async saveCertificate(certificate: AcmeCertificate, expiresAt: number): Promise<void> {
    const { keys } = this.#redis;
    await this.#redis.run((c) => c.gwAcmeSaveCertificate(keys.acmeCertificate, JSON.stringify(certificate), expiresAt, keys.acmeChannel, this.#id));
  }

  async lockOrder(ttlMs: number): Promise<string | undefined> {
    const token = randomBytes(16).toString('hex');
    const taken = await this.#redis.run((c) => c.set(this.#redis.keys.acmeLock, token, 'PX', ttlMs, 'NX'));
    return taken === 'OK' ? token : undefined;
  }

  async unlockOrder(token: string): Promise<void> {
    await this.#redis.run((c) => c.gwAcmeUnlock(this.#redis.keys.acmeLock, token));
  }

  onCertificateSaved(listener: () => void): void {
    // A gap (a lost subscription) may have hidden an announcement: read again as if one came.
    this.#redis.subscribe(this.#redis.keys.acmeChannel, (from) => { if (from !== this.#id) listener(); }, listener);
  }
}

/** A stored certificate that is not one (written by hand, cut short) reads as none: the next check orders. */
function parseCertificate(text: string): AcmeCertificate | undefined {
  try {
    const value = JSON.parse(text) as Partial<AcmeCertificate>;
    if (!Array.isArray(value.serverNames) || typeof value.certPem !== 'string' || typeof value.keyPem !== 'string') return undefined;
    return { serverNames: value.serverNames.map(String), certPem: value.certPem, keyPem: value.keyPem };
  } catch {
    return undefined;
  }
}

export class RedisChallengeStore implements ChallengeStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async set(token: string, keyAuthorization: string, ttlMs: number): Promise<void> {
    await this.#redis.run((c) => c.set(this.#redis.keys.acmeChallenge(token), keyAuthorization, 'PX', ttlMs));
  }

  async delete(token: string): Promise<void> {
    await this.#redis.run((c) => c.del(this.#redis.keys.acmeChallenge(token)));
  }

  async get(token: string): Promise<string | undefined> {
    return (await this.#redis.run((c) => c.get(this.#redis.keys.acmeChallenge(token)))) ?? undefined;
  }
}
