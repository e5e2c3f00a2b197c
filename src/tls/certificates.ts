/**
 * The main listener's certificates (docs/tls.md): the default pair (tls.certFile, tls.keyFile)
 * and the `tls.certificates` entries chosen by the name a client asks for (SNI). Each pair is
 * read with the bounded reader operators' files get (util/operator-file.ts), and checked before
 * it is used: a certificate Node can parse, a key it can parse, and the key that belongs to the
 * certificate. At start-up a bad pair stops the gateway with a message naming the file; later
 * (a changed file, SIGHUP) a bad set is logged and the set in use stays, whole.
 *
 * A new set takes effect for new handshakes only: the server's default context is replaced
 * (`setSecureContext`) and SNI reads the current map, while connections already open keep the
 * context they were made with.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { statSync } from 'node:fs';
import type { Server } from 'node:https';
import { createSecureContext, type SecureContext, type SecureContextOptions, type TlsOptions } from 'node:tls';
import { Gauge, type Registry } from 'prom-client';
import type { Config } from '../config/schema.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock, Timers } from '../util/clock.js';
import { OperatorFileError, readOperatorFile } from '../util/operator-file.js';

/** A certificate chain or key larger than this is no certificate. */
const MAX_PEM_BYTES = 1_048_576;

/** Warned about at start and at each reload, this long before a certificate expires. */
export const EXPIRY_WARNING_MS = 14 * 24 * 3600 * 1000;

/**
 * TLS 1.3's suites, then TLS 1.2's with forward secrecy and an AEAD only (Mozilla's
 * "intermediate" list): no RSA key exchange, no CBC, no SHA-1 MACs.
 */
export const CIPHERS = [
  'TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** A certificate or key file that cannot be used, named with what is wrong with it. */
export class CertificateError extends Error {
  readonly file: string;
  readonly problem: string;
  constructor(file: string, problem: string) {
    super(`TLS: ${file}: ${problem}`);
    this.name = 'CertificateError';
    this.file = file;
    this.problem = problem;
  }
}

export interface CertificatePair {
  serverNames: readonly string[];
  certFile: string;
  keyFile: string;
}

interface Loaded {
  /** What logs and the expiry metric name it by: its certFile, or the id it was set with (`acme`). */
  label: string;
  serverNames: readonly string[];
  certPem: string;
  keyPem: string;
  context: SecureContext;
  /** The leaf's notAfter, epoch ms. */
  expiresAt: number;
}

type TlsSettings = Config['tls'];

function readPem(file: string): string {
  try {
    return readOperatorFile(file, MAX_PEM_BYTES);
  } catch (err) {
    if (err instanceof OperatorFileError) throw new CertificateError(file, `cannot be read (${err.reason})`);
    throw err;
  }
}

/**
 * `clientCaPem`: the CAs client certificates are verified against (tls.clientCaFile). Every
 * context gets them, the SNI ones too: a handshake verifies the client against the store of the
 * context it was served from.
 */
function contextOptions(settings: TlsSettings, certPem: string, keyPem: string, clientCaPem: string | undefined): SecureContextOptions {
  return { cert: certPem, key: keyPem, minVersion: settings.minVersion, ciphers: CIPHERS, honorCipherOrder: true, ...(clientCaPem === undefined ? {} : { ca: clientCaPem }) };
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/**
 * The client CA file (tls.clientCaFile) as PEM text, each of its certificates parsed; undefined
 * when none is configured. CertificateError names the file: unreadable, no certificate in it,
 * or a block that is not one.
 */
export function loadClientCa(settings: TlsSettings): string | undefined {
  const file = settings.clientCaFile;
  if (file === undefined) return undefined;
  const pem = readPem(file);
  const blocks = pem.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new CertificateError(file, 'holds no PEM certificate');
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch {
      throw new CertificateError(file, `certificate ${i + 1} is not a valid PEM certificate`);
    }
  });
  return pem;
}


/** Reads and checks one pair; CertificateError names the file at fault. */
export function loadPair(pair: CertificatePair, settings: TlsSettings, clientCaPem?: string): Loaded {
  return checkPair({ label: pair.certFile, serverNames: pair.serverNames, certPem: readPem(pair.certFile), keyPem: readPem(pair.keyFile) }, pair, settings, clientCaPem);
}

/**
 * Checks a certificate and its key, wherever they come from; `from` names them in the error
 * (the files, or the id of a certificate set by ACME). The key itself is never in a message.
 */
function checkPair(given: Omit<Loaded, 'context' | 'expiresAt'>, from: { certFile: string; keyFile: string }, settings: TlsSettings, clientCaPem: string | undefined): Loaded {
  const { certPem, keyPem } = given;
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(certPem);
  } catch {
    throw new CertificateError(from.certFile, 'is not a PEM certificate');
  }
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new CertificateError(from.keyFile, 'is not a PEM private key (unencrypted)');
  }
  if (!leaf.checkPrivateKey(key)) throw new CertificateError(from.keyFile, `is not the key of the certificate in ${from.certFile}`);
  let context: SecureContext;
  try {
    context = createSecureContext(contextOptions(settings, certPem, keyPem, clientCaPem));
  } catch (err) {
    throw new CertificateError(from.certFile, `cannot be used: ${(err as Error).message}`);
  }
  return { ...given, context, expiresAt: Date.parse(leaf.validTo) };
}

function pairsOf(settings: TlsSettings): CertificatePair[] {
  if (settings.certFile === undefined || settings.keyFile === undefined) return [];
  return [{ serverNames: [], certFile: settings.certFile, keyFile: settings.keyFile }, ...settings.certificates];
}

/** What is wrong with each pair of `settings` and the client CA file (config check): none when TLS is off or all are good. */
export function certificateProblems(settings: TlsSettings): string[] {
  const problems: string[] = [];
  try {
    loadClientCa(settings);
  } catch (err) {
    if (!(err instanceof CertificateError)) throw err;
    problems.push(err.message);
  }
  for (const pair of pairsOf(settings)) {
    try {
      loadPair(pair, settings);
    } catch (err) {
      if (!(err instanceof CertificateError)) throw err;
      problems.push(err.message);
    }
  }
  return problems;
}

/** The context for `servername` in `byName`: its own name first, then `*.` and its parent domain. */
function contextFor(byName: ReadonlyMap<string, SecureContext>, servername: string): SecureContext | undefined {
  const name = servername.toLowerCase().replace(/\.$/, '');
  const exact = byName.get(name);
  if (exact !== undefined) return exact;
  const dot = name.indexOf('.');
  return dot > 0 ? byName.get(`*${name.slice(dot)}`) : undefined;
}

/** What the file watch compares: a changed size, modification time or inode is a change. */
function signatureOf(files: readonly string[]): string {
  return files.map((file) => {
    try {
      const stats = statSync(file);
      return `${stats.ino}:${stats.size}:${stats.mtimeMs}`;
    } catch {
      return 'missing';
    }
  }).join('|');
}

/** A certificate that is not read from files (ACME's): chain and key in PEM, and the names it is served for. */
export interface GivenCertificate {
  serverNames: readonly string[];
  certPem: string;
  keyPem: string;
}

/** The expiry gauge of the main listener's certificates, read at each scrape. */
function countExpiry(registry: Registry, clock: Clock, entries: () => Loaded[]): void {
  new Gauge({
    name: 'gateway_tls_certificate_expiry_seconds',
    help: 'Seconds until each TLS certificate of the main listener expires (negative: expired), by its file (`acme` for the one ACME obtained)',
    labelNames: ['certificate'],
    registers: [registry],
    collect() {
      this.reset();
      for (const entry of entries()) this.set({ certificate: entry.label }, Math.round((entry.expiresAt - clock.now()) / 1000));
    },
  });
}

/** A warning for each of `entries` that has expired or expires within 14 days. */
function warnAboutExpiryOf(entries: readonly Loaded[], clock: Clock, log: Logger): void {
  for (const entry of entries) {
    const left = entry.expiresAt - clock.now();
    if (left <= 0) log.warn({ certificate: entry.label, expiresAt: new Date(entry.expiresAt).toISOString() }, 'TLS certificate has expired: clients will refuse it');
    else if (left <= EXPIRY_WARNING_MS) log.warn({ certificate: entry.label, expiresAt: new Date(entry.expiresAt).toISOString(), daysLeft: Math.floor(left / 86_400_000) }, 'TLS certificate expires within 14 days');
  }
}

export interface CertificateSet {
  /** The secure-server options of the main listener: default pair, SNI, versions, ciphers. */
  serverOptions(): TlsOptions;
  /** Serves new handshakes of `server` from this set, including after each reload. */
  attach(server: Server): void;
  /** Reads every file again; a bad set is logged and the one in use stays. True when swapped. */
  reload(reason: string): boolean;
  /**
   * Serves `certificate` for its names from the next handshake on, in place of the one set
   * with the same `id`; the default too when there are no files. Kept apart from the files'
   * pairs, so a reload leaves it in place. Throws CertificateError (naming `id`) on a pair that
   * cannot be used, and then changes nothing.
   */
  setCertificate(id: string, certificate: GivenCertificate): void;
  close(): void;
}

export interface CertificateSetOptions {
  log: Logger;
  clock: Clock;
  timers: Timers;
  registry?: Registry | undefined;
  /** Without certificate files (ACME on): the certificate served until setCertificate replaces the one of this id. */
  initial?: { id: string; certificate: GivenCertificate } | undefined;
}

/**
 * Loads every pair of `settings` (throws CertificateError on the first bad one), warns about
 * certificates close to expiry, and watches the files every `tls.watchIntervalMs`. Without
 * files, `initial` is the default until setCertificate replaces it.
 */
export function createCertificateSet(settings: TlsSettings, { log, clock, timers, registry, initial }: CertificateSetOptions): CertificateSet {
  const pairs = pairsOf(settings);
  if (pairs.length === 0 && initial === undefined) throw new Error('createCertificateSet needs tls.certFile and tls.keyFile, or an initial certificate');
  const files = [...pairs.flatMap((pair) => [pair.certFile, pair.keyFile]), ...(settings.clientCaFile === undefined ? [] : [settings.clientCaFile])];
  let clientCaPem = loadClientCa(settings);
  let loaded = pairs.map((pair) => loadPair(pair, settings, clientCaPem));
  /** Certificates set by id (ACME's), after the files' in SNI and apart from their reloads. */
  const given = new Map<string, Loaded>();
  const check = (id: string, certificate: GivenCertificate, caPem = clientCaPem) => checkPair({ label: id, ...certificate }, { certFile: id, keyFile: `${id} (key)` }, settings, caPem);
  if (initial !== undefined) given.set(initial.id, check(initial.id, initial.certificate));
  let byName = new Map<string, SecureContext>();
  const servers: Server[] = [];
  const all = () => [...loaded, ...given.values()];
  // The files' default pair; without files, the first certificate set by id.
  const main = () => loaded[0] ?? given.values().next().value!;

  const index = () => {
    const next = new Map<string, SecureContext>();
    // Later entries do not take a name an earlier one has: the first entry naming a host wins.
    for (const entry of [...loaded.slice(1), ...given.values()]) for (const name of entry.serverNames) if (!next.has(name.toLowerCase())) next.set(name.toLowerCase(), entry.context);
    byName = next;
  };
  const warnAboutExpiry = (entries: Loaded[]) => warnAboutExpiryOf(entries, clock, log);
  // New contexts come with new session-ticket keys and an empty session cache: a resumed
  // session keeps the client-certificate verdict of its first handshake, and none made under
  // client CAs a reload replaced resumes (test/tls/mtls.test.ts holds it, with SNI and without).
  const useDefault = () => {
    const { certPem, keyPem } = main();
    for (const server of servers) server.setSecureContext(contextOptions(settings, certPem, keyPem, clientCaPem));
  };
  index();
  warnAboutExpiry(loaded);

  if (registry !== undefined) countExpiry(registry, clock, all);

  let signature = signatureOf(files);
  const set: CertificateSet = {
    serverOptions() {
      const { certPem, keyPem } = main();
      return {
        ...contextOptions(settings, certPem, keyPem, clientCaPem),
        // A client without a certificate, or with one the CAs did not sign, still completes the
        // handshake: a route that requires one answers 401 in the envelope, the others serve it.
        ...(clientCaPem === undefined ? {} : { requestCert: true, rejectUnauthorized: false }),
        SNICallback: (servername, done) => done(null, contextFor(byName, servername) ?? main().context),
      };
    },
    attach(server) {
      servers.push(server);
    },
    reload(reason) {
      if (files.length === 0) return false;
      let next: Loaded[];
      let nextCa: string | undefined;
      let nextGiven: Array<[string, Loaded]>;
      try {
        nextCa = loadClientCa(settings);
        next = pairs.map((pair) => loadPair(pair, settings, nextCa));
        // Certificates set by id keep theirs, in contexts that verify clients against the new CAs.
        nextGiven = [...given].map(([id, entry]) => [id, check(id, entry, nextCa)]);
      } catch (err) {
        log.error({ reason, problem: (err as Error).message }, 'TLS certificates changed but cannot be used: still serving the previous ones');
        return false;
      }
      loaded = next;
      clientCaPem = nextCa;
      for (const [id, entry] of nextGiven) given.set(id, entry);
      index();
      useDefault();
      log.info({ reason, certificates: loaded.map((entry) => entry.label), ...(settings.clientCaFile === undefined ? {} : { clientCaFile: settings.clientCaFile }) }, 'TLS certificates reloaded');
      warnAboutExpiry(loaded);
      return true;
    },
    setCertificate(id, certificate) {
      const entry = check(id, certificate);
      given.set(id, entry);
      index();
      if (loaded.length === 0) useDefault();
      warnAboutExpiry([entry]);
    },
    close() {
      watch?.cancel();
    },
  };

  const watch = settings.watchIntervalMs === 0 || files.length === 0 ? undefined : timers.setTimer(settings.watchIntervalMs, () => {
    const now = signatureOf(files);
    // Once per change: a bad version is logged once, not at every look.
    if (now !== signature) {
      signature = now;
      set.reload('files changed');
    }
    watch!.refresh();
  });
  return set;
}
