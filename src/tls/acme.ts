/**
 * The gateway orders and renews its own certificate from an ACME CA (acme-client does the
 * protocol). The manager keeps the account key and the certificate in an `AcmeStore` (a file,
 * or Redis with an order lock so that one instance of several orders), hands the certificate to
 * a sink (the CertificateSet), leaves the answers of HTTP-01 (served by the redirect listener)
 * and TLS-ALPN-01 (served on the main listener, alpn-challenge.ts) in the challenge store, and
 * renews `renewBeforeDays` before expiry. A failed order is retried with backoff on the
 * injected timers, the certificate in use kept; a certificate another instance saved is taken
 * as soon as it is announced. Private keys are never logged: only names, dates and error
 * messages are. test/tls/acme.test.ts and test/tls/acme-gateway.test.ts hold it against pebble.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import type AcmeClient from 'acme-client';
import type { AcmeCertificate, AcmeStore, ChallengeStore } from '../state/acme/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Scheduler, Timer } from '../util/clock.js';
import { alpnChallengeName, type AlpnChallengeCertificate } from './alpn-challenge.js';

type Acme = typeof AcmeClient;
let loading: Promise<Acme> | undefined;
/**
 * acme-client, loaded on first use: with axios and its own crypto it costs about 80 ms of CPU at
 * every start, which a gateway without ACME (most of them) should not pay.
 */
function acmeClient(): Promise<Acme> {
  loading ??= import('acme-client').then((module) => module.default);
  return loading;
}

export type { AcmeCertificate, AcmeStore, ChallengeStore } from '../state/acme/store.js';

/** Where the obtained certificate goes: the CertificateSet's setCertificate (which throws on a pair it cannot use). */
export interface CertificateSink {
  setCertificate(id: string, certificate: AcmeCertificate): void;
}

export interface AcmeSettings {
  directoryUrl: string;
  email?: string | undefined;
  domains: string[];
  eabKid?: string | undefined;
  eabHmacKey?: string | undefined;
  renewBeforeDays: number;
  /**
   * The challenge types to answer, preferred first: HTTP-01 on the redirect listener (port 80),
   * TLS-ALPN-01 on the main listener (port 443).
   */
  challengeTypes: ('http-01' | 'tls-alpn-01')[];
}

export interface AcmeManagerOptions {
  settings: AcmeSettings;
  store: AcmeStore;
  sink: CertificateSink;
  challenges: ChallengeStore;
  scheduler: Scheduler;
  log: Logger;
  /** Each request to the CA gets this long (default 30 s); see createAcmeManager. */
  requestTimeoutMs?: number;
  /** Called once per order this instance made: `issued`, or `failed` (for the metric). */
  onOrder?: (outcome: 'issued' | 'failed') => void;
}

/** The certificate set's id for the ordered certificate. */
export const ACME_CERTIFICATE_ID = 'acme';
const DAY_MS = 24 * 3600 * 1000;
/** First retry after a failed order; doubled each time, up to a day. */
const RETRY_FIRST_MS = 60_000;
const RETRY_MAX_MS = DAY_MS;
/** Longer than any order takes (pebble: a second; Let's Encrypt: seconds to a minute); a dead holder's lapses after it. */
const LOCK_TTL_MS = 10 * 60_000;
/** Each request to the CA; a timed-out one fails the order, retried with the backoff. */
const REQUEST_TIMEOUT_MS = 30_000;
/** How long an HTTP-01 answer waits at most: as long as the lock, as the order it belongs to. */
const CHALLENGE_TTL_MS = LOCK_TTL_MS;

export interface AcmeManager {
  /**
   * Serves the stored certificate, or orders one if there is none, it does not name exactly
   * `settings.domains`, or it is due; then schedules the next look. Never rejects: a failure is
   * logged and retried with backoff.
   */
  start(): Promise<void>;
  stop(): void;
}

export function createAcmeManager(options: AcmeManagerOptions): AcmeManager {
  const { settings, store, sink, scheduler, log } = options;
  let timer: Timer | undefined;
  let failures = 0;
  let stopped = false;
  const order = orderFrom(options);
  const dueAt = (certificate: AcmeCertificate): number => notAfter(certificate) - settings.renewBeforeDays * DAY_MS;
  /** Names exactly the configured domains, and `until` (its expiry, or the start of its renewal window) is still ahead. */
  const isValid = (certificate: AcmeCertificate, until: (c: AcmeCertificate) => number): boolean => sameNames(certificate.serverNames, settings.domains) && until(certificate) > scheduler.now();

  const schedule = (ms: number) => {
    timer?.cancel();
    if (!stopped) timer = scheduler.setTimer(ms, () => void check());
  };
  /** Hands `certificate` to the sink unless it is the one in use already. */
  let inUse: string | undefined;
  const use = (certificate: AcmeCertificate) => {
    if (stopped || certificate.certPem === inUse) return;
    sink.setCertificate(ACME_CERTIFICATE_ID, certificate);
    inUse = certificate.certPem;
    log.info({ domains: certificate.serverNames, expiresAt: new Date(notAfter(certificate)).toISOString() }, 'acme: certificate in use');
  };
  const serve = (certificate: AcmeCertificate) => {
    use(certificate);
    failures = 0;
    schedule(dueAt(certificate) - scheduler.now());
  };

  /** The stored certificate, now in use, unless expired (one due is served while its order runs), for other names, or refused by the sink. */
  const takeStored = async (): Promise<AcmeCertificate | undefined> => {
    const stored = await store.certificate();
    if (stored === undefined || !isValid(stored, notAfter)) return undefined;
    try {
      use(stored);
      return stored;
    } catch (err) {
      log.warn({ problem: (err as Error).message }, 'acme: the stored certificate cannot be used; ordering a new one');
      return undefined;
    }
  };

  /** Serves the stored certificate when usable; else orders one under the lock, stores and serves it. */
  const check = async (): Promise<void> => {
    try {
      const stored = await takeStored();
      if (stored !== undefined && isValid(stored, dueAt)) return serve(stored);
      const token = await store.lockOrder(LOCK_TTL_MS);
      if (token === undefined) {
        // Another instance is ordering: its announcement brings the certificate; this is the fallback.
        log.info({ retryInMs: RETRY_FIRST_MS }, 'acme: another instance is ordering the certificate');
        return schedule(RETRY_FIRST_MS);
      }
      let ordered: AcmeCertificate;
      try {
        // Read again under the lock: another instance may have stored one since the first look.
        const again = await takeStored();
        if (again !== undefined && isValid(again, dueAt)) return serve(again);
        log.info({ domains: settings.domains }, 'acme: ordering a certificate');
        ordered = await order().catch((err: unknown) => {
          options.onOrder?.('failed');
          throw asCaFailure(err, settings.directoryUrl);
        });
        options.onOrder?.('issued');
        await store.saveCertificate(ordered, notAfter(ordered));
      } finally {
        await store.unlockOrder(token).catch(() => undefined);
      }
      serve(ordered);
    } catch (err) {
      // An order still running when the gateway stopped ends here: nothing to retry, nothing to say.
      if (stopped) return;
      const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++);
      // The message only: acme-client's errors carry the CA's problem document, never a key.
      log.error({ err: (err as Error).message, retryInMs: delay, failures }, 'acme: no certificate obtained; retrying');
      schedule(delay);
    }
  };

  /** Another instance stored a certificate: serve it if usable (never order from here). */
  const adopt = async (): Promise<void> => {
    try {
      const stored = await takeStored();
      if (stored !== undefined && isValid(stored, dueAt)) serve(stored);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'acme: could not read the certificate another instance stored');
    }
  };

  return {
    start() {
      store.onCertificateSaved(() => { if (!stopped) void adopt(); });
      return check();
    },
    stop() {
      stopped = true;
      timer?.cancel();
    },
  };
}

/**
 * One order with acme-client: the account key from the store (made there on the first order),
 * a new certificate key and CSR for every domain, the challenges answered through the challenge
 * store (TLS-ALPN-01's certificate made here, with a throwaway ECDSA key).
 * acme-client's own look at the challenge before it asks the CA is skipped: it fetches the name
 * from where the gateway stands, which behind a load balancer or split DNS often fails when the
 * CA's would not; the CA's validation is the one that counts, and a failed one is retried.
 */
function orderFrom({ settings, store, challenges, requestTimeoutMs }: AcmeManagerOptions): () => Promise<AcmeCertificate> {
  return async () => {
    const acme = await acmeClient();
    boundRequests(acme, requestTimeoutMs ?? REQUEST_TIMEOUT_MS);
    const client = new acme.Client({
      directoryUrl: settings.directoryUrl,
      accountKey: await store.accountKey(async () => (await acme.crypto.createPrivateKey()).toString()),
      ...(settings.eabKid !== undefined && settings.eabHmacKey !== undefined
        ? { externalAccountBinding: { kid: settings.eabKid, hmacKey: settings.eabHmacKey } }
        : {}),
    });
    // The account of a kept key is looked up rather than registered again: acme-client would
    // then send it an update, empty without an email, which CAs refuse (pebble does).
    await client.createAccount({ onlyReturnExisting: true }).catch(() => undefined);
    const [key, csr] = await acme.crypto.createCsr({ commonName: settings.domains[0]!, altNames: settings.domains });
    const certPem = await client.auto({
      csr,
      ...(settings.email !== undefined ? { email: settings.email } : {}),
      termsOfServiceAgreed: true,
      skipChallengeVerification: true,
      challengePriority: settings.challengeTypes,
      // acme-client's types name http-01 and dns-01 only; its code answers tls-alpn-01 too (RFC 8737).
      challengeCreateFn: async (authz, challenge, keyAuthorization) => {
        if (!isTlsAlpn(challenge)) return challenges.set(challenge.token, keyAuthorization, CHALLENGE_TTL_MS);
        const [alpnKey, alpnCert] = await acme.crypto.createAlpnCertificate(authz, keyAuthorization, await acme.crypto.createPrivateEcdsaKey());
        const answer: AlpnChallengeCertificate = { certPem: alpnCert.toString(), keyPem: alpnKey.toString() };
        return challenges.set(alpnChallengeName(authz.identifier.value), JSON.stringify(answer), CHALLENGE_TTL_MS);
      },
      challengeRemoveFn: async (authz, challenge) => challenges.delete(isTlsAlpn(challenge) ? alpnChallengeName(authz.identifier.value) : challenge.token),
    });
    return { serverNames: [...settings.domains], certPem, keyPem: key.toString() };
  };
}

/**
 * acme-client sends every request through an axios instance of its own, with no timeout: a CA
 * that accepts and never answers would hold an order, and so every renewal, for ever. The
 * instance is acme-client's alone (no other axios of the process changes), and a gateway
 * process has one manager.
 */
function boundRequests(acme: Acme, timeoutMs: number): void {
  acme.axios.defaults.timeout = timeoutMs;
}

/**
 * acme-client's retry interceptor reads `response.config` of a failed request that has no
 * response (a refused connection once its retries are spent, a timeout), so what reaches us is a
 * TypeError that has lost the cause: said here as what it is.
 */
function asCaFailure(err: unknown, directoryUrl: string): unknown {
  if (err instanceof TypeError && /reading 'config'/.test(err.message)) return new Error(`no answer from the ACME CA at ${directoryUrl} (connection failed or timed out)`);
  return err;
}

function isTlsAlpn(challenge: { type: string }): boolean {
  return challenge.type === 'tls-alpn-01';
}

/** The leaf's notAfter, epoch ms (node:crypto reads the first certificate of the chain). */
function notAfter(certificate: AcmeCertificate): number {
  return Date.parse(new X509Certificate(certificate.certPem).validTo);
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  const norm = (names: readonly string[]) => [...new Set(names.map((n) => n.toLowerCase()))].sort().join(',');
  return norm(a) === norm(b);
}

/**
 * A self-signed stand-in so the HTTPS listener can start before the first order completes.
 * acme-client's TLS-ALPN-01 certificate maker is its one self-signed X.509 writer; the
 * acmeIdentifier extension it adds (over random bytes here, so it proves nothing) is ignored by
 * ordinary clients. Its validity ends as it begins: clients refuse it twice over, which is the
 * point (nothing is served under a name not yet proven), and the expiry metric reads below 0
 * until the first order completes.
 */
export async function temporaryCertificate(domains: string[]): Promise<AcmeCertificate> {
  const acme = await acmeClient();
  const authz = { identifier: { type: 'dns', value: domains[0] ?? 'localhost' } } as unknown as AcmeClient.Authorization;
  const [key, cert] = await acme.crypto.createAlpnCertificate(authz, randomBytes(32).toString('hex'), await acme.crypto.createPrivateEcdsaKey());
  return { serverNames: domains, certPem: cert.toString(), keyPem: key.toString() };
}
