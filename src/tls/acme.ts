/**
 * The gateway orders and renews its own certificate from an ACME CA (acme-client does the
 * protocol). The manager keeps the account key and the certificate in an `AcmeStore`, hands the
 * certificate to a sink (the CertificateSet), answers HTTP-01 through `AcmeChallenges` (the
 * redirect listener's registry), and renews `renewBeforeDays` before expiry; a failed order is
 * retried with backoff on the injected timers, the certificate in use kept. Private keys are
 * never logged: only names, dates and error messages are.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join, basename } from 'node:path';
import acme from 'acme-client';
import type { Logger } from '../telemetry/log.js';
import type { Scheduler, Timer } from '../util/clock.js';

export interface AcmeCertificate {
  serverNames: string[];
  certPem: string;
  keyPem: string;
}

/** Where the obtained certificate goes: the CertificateSet's setCertificate. */
export interface CertificateSink {
  setCertificate(id: string, certificate: AcmeCertificate): void;
}

/** The HTTP-01 answers the redirect listener serves. */
export interface AcmeChallenges {
  set(token: string, keyAuthorization: string): void;
  delete(token: string): void;
}

/** The account key and the certificate, kept in the gateway's state. */
export interface AcmeStore {
  get(name: string): Promise<string | undefined>;
  put(name: string, value: string): Promise<void>;
  /** Takes the order lock for `ttlMs`; answers a token to release it with, or undefined if another holds it. */
  lock(ttlMs: number): Promise<string | undefined>;
  unlock(token: string): Promise<void>;
}

/** One JSON file beside the data file, written as the data file is: a temporary file, mode 0600, renamed over. */
export function createFileAcmeStore(file: string): AcmeStore {
  let held: string | undefined;
  const readAll = async (): Promise<Record<string, string>> => {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as Record<string, string>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
  };
  return {
    async get(name) {
      return (await readAll())[name];
    },
    async put(name, value) {
      const all = { ...(await readAll()), [name]: value };
      await mkdir(dirname(file), { recursive: true });
      const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(all, null, 2)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await chmod(temp, 0o600);
        await rename(temp, file);
      } catch (err) {
        await unlink(temp).catch(() => undefined);
        throw err;
      }
    },
    // One process owns the file: the lock only keeps two orders of this process apart.
    async lock() {
      if (held !== undefined) return undefined;
      held = randomBytes(16).toString('hex');
      return held;
    },
    async unlock(token) {
      if (held === token) held = undefined;
    },
  };
}

export interface AcmeSettings {
  directoryUrl: string;
  email?: string | undefined;
  domains: string[];
  eabKid?: string | undefined;
  eabHmacKey?: string | undefined;
  renewBeforeDays: number;
}

export interface AcmeManagerOptions {
  settings: AcmeSettings;
  store: AcmeStore;
  sink: CertificateSink;
  challenges: AcmeChallenges;
  scheduler: Scheduler;
  log: Logger;
  /** Skip acme-client's own fetch of the challenge before asking the CA (the names do not resolve to us outside the CA's DNS, as in tests). */
  skipChallengeVerification?: boolean;
}

const CERTIFICATE_ID = 'acme';
const DAY_MS = 24 * 3600 * 1000;
/** First retry after a failed order; doubled each time, up to a day. */
const RETRY_FIRST_MS = 60_000;
const RETRY_MAX_MS = DAY_MS;
const LOCK_TTL_MS = 10 * 60_000;

export interface AcmeManager {
  /** Serves the stored certificate, orders one if there is none or it is due, and schedules renewal. */
  start(): Promise<void>;
  stop(): void;
}

export function createAcmeManager(options: AcmeManagerOptions): AcmeManager {
  const { settings, store, sink, challenges, scheduler, log } = options;
  let timer: Timer | undefined;
  let failures = 0;
  let stopped = false;

  const accountKey = async (): Promise<string> => {
    const stored = await store.get('accountKey');
    if (stored !== undefined) return stored;
    const key = (await acme.crypto.createPrivateKey()).toString();
    await store.put('accountKey', key);
    return key;
  };

  const order = async (): Promise<AcmeCertificate> => {
    const client = new acme.Client({
      directoryUrl: settings.directoryUrl,
      accountKey: await accountKey(),
      ...(settings.eabKid !== undefined && settings.eabHmacKey !== undefined
        ? { externalAccountBinding: { kid: settings.eabKid, hmacKey: settings.eabHmacKey } }
        : {}),
    });
    const [key, csr] = await acme.crypto.createCsr({ commonName: settings.domains[0]!, altNames: settings.domains });
    const certPem = await client.auto({
      csr,
      ...(settings.email !== undefined ? { email: settings.email } : {}),
      termsOfServiceAgreed: true,
      skipChallengeVerification: options.skipChallengeVerification === true,
      challengePriority: ['http-01'],
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => challenges.set(challenge.token, keyAuthorization),
      challengeRemoveFn: async (_authz, challenge) => challenges.delete(challenge.token),
    });
    return { serverNames: settings.domains, certPem, keyPem: key.toString() };
  };

  const dueAt = (certPem: string): number => acme.crypto.readCertificateInfo(certPem).notAfter.getTime() - settings.renewBeforeDays * DAY_MS;

  const schedule = (ms: number) => {
    timer?.cancel();
    if (!stopped) timer = scheduler.setTimer(ms, () => void check());
  };

  /** Uses the stored certificate when it is not due; else orders (under the lock) and stores. */
  const check = async (): Promise<void> => {
    try {
      let stored = await store.get('certificate');
      if (stored === undefined || dueAt((JSON.parse(stored) as AcmeCertificate).certPem) <= scheduler.now()) {
        const token = await store.lock(LOCK_TTL_MS);
        if (token !== undefined) {
          try {
            log.info({ domains: settings.domains }, 'acme: ordering a certificate');
            stored = JSON.stringify(await order());
            await store.put('certificate', stored);
          } finally {
            await store.unlock(token);
          }
        }
      }
      if (stored === undefined) throw new Error('another instance holds the order lock');
      const certificate = JSON.parse(stored) as AcmeCertificate;
      sink.setCertificate(CERTIFICATE_ID, certificate);
      failures = 0;
      schedule(Math.max(0, dueAt(certificate.certPem) - scheduler.now()));
    } catch (err) {
      failures++;
      const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (failures - 1));
      log.error({ err: (err as Error).message, retryInMs: delay, failures }, 'acme: no certificate obtained; retrying');
      schedule(delay);
    }
  };

  return {
    start: check,
    stop() {
      stopped = true;
      timer?.cancel();
    },
  };
}

/**
 * A self-signed stand-in so the HTTPS listener can start before the first order completes.
 * acme-client's TLS-ALPN-01 certificate maker is its one self-signed X.509 writer; the
 * acmeIdentifier extension it adds (over random bytes here) is ignored by ordinary clients.
 */
export async function temporaryCertificate(domains: string[]): Promise<AcmeCertificate> {
  const authz = { identifier: { type: 'dns', value: domains[0] ?? 'localhost' } } as unknown as acme.Authorization;
  const [key, cert] = await acme.crypto.createAlpnCertificate(authz, randomBytes(32).toString('hex'));
  return { serverNames: domains, certPem: cert.toString(), keyPem: key.toString() };
}
