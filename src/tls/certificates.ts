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
  pair: CertificatePair;
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
  const certPem = readPem(pair.certFile);
  const keyPem = readPem(pair.keyFile);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(certPem);
  } catch {
    throw new CertificateError(pair.certFile, 'is not a PEM certificate');
  }
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new CertificateError(pair.keyFile, 'is not a PEM private key (unencrypted)');
  }
  if (!leaf.checkPrivateKey(key)) throw new CertificateError(pair.keyFile, `is not the key of the certificate in ${pair.certFile}`);
  let context: SecureContext;
  try {
    context = createSecureContext(contextOptions(settings, certPem, keyPem, clientCaPem));
  } catch (err) {
    throw new CertificateError(pair.certFile, `cannot be used: ${(err as Error).message}`);
  }
  return { pair, certPem, keyPem, context, expiresAt: Date.parse(leaf.validTo) };
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

export interface CertificateSet {
  /**
   * The secure-server options of the main listener: default pair, SNI, versions, ciphers; with
   * tls.clientCaFile, a client certificate asked for in every handshake but required by none
   * (routes decide: tls/client-certificates.ts).
   */
  serverOptions(): TlsOptions;
  /** Serves new handshakes of `server` from this set, including after each reload. */
  attach(server: Server): void;
  /** Reads every file again; a bad set is logged and the one in use stays. True when swapped. */
  reload(reason: string): boolean;
  close(): void;
}

export interface CertificateSetOptions {
  log: Logger;
  clock: Clock;
  timers: Timers;
  registry?: Registry | undefined;
}

/**
 * Loads every pair of `settings` (throws CertificateError on the first bad one), warns about
 * certificates close to expiry, and watches the files every `tls.watchIntervalMs`.
 */
export function createCertificateSet(settings: TlsSettings, { log, clock, timers, registry }: CertificateSetOptions): CertificateSet {
  const pairs = pairsOf(settings);
  if (pairs.length === 0) throw new Error('createCertificateSet needs tls.certFile and tls.keyFile');
  const files = [...pairs.flatMap((pair) => [pair.certFile, pair.keyFile]), ...(settings.clientCaFile === undefined ? [] : [settings.clientCaFile])];
  let clientCaPem = loadClientCa(settings);
  let loaded = pairs.map((pair) => loadPair(pair, settings, clientCaPem));
  let byName = new Map<string, SecureContext>();
  const servers: Server[] = [];

  const index = () => {
    const next = new Map<string, SecureContext>();
    // Later entries do not take a name an earlier one has: the first entry naming a host wins.
    for (const entry of loaded.slice(1)) for (const name of entry.pair.serverNames) if (!next.has(name.toLowerCase())) next.set(name.toLowerCase(), entry.context);
    byName = next;
  };
  const warnAboutExpiry = () => {
    for (const entry of loaded) {
      const left = entry.expiresAt - clock.now();
      if (left <= 0) log.warn({ certificate: entry.pair.certFile, expiresAt: new Date(entry.expiresAt).toISOString() }, 'TLS certificate has expired: clients will refuse it');
      else if (left <= EXPIRY_WARNING_MS) log.warn({ certificate: entry.pair.certFile, expiresAt: new Date(entry.expiresAt).toISOString(), daysLeft: Math.floor(left / 86_400_000) }, 'TLS certificate expires within 14 days');
    }
  };
  index();
  warnAboutExpiry();

  if (registry !== undefined) {
    new Gauge({
      name: 'gateway_tls_certificate_expiry_seconds',
      help: 'Seconds until each TLS certificate of the main listener expires (negative: expired), by its file',
      labelNames: ['certificate'],
      registers: [registry],
      collect() {
        this.reset();
        for (const entry of loaded) this.set({ certificate: entry.pair.certFile }, Math.round((entry.expiresAt - clock.now()) / 1000));
      },
    });
  }

  let signature = signatureOf(files);
  const set: CertificateSet = {
    serverOptions() {
      const main = loaded[0]!;
      return {
        ...contextOptions(settings, main.certPem, main.keyPem, clientCaPem),
        // A client without a certificate, or with one the CAs did not sign, still completes the
        // handshake: a route that requires one answers 401 in the envelope, the others serve it.
        ...(clientCaPem === undefined ? {} : { requestCert: true, rejectUnauthorized: false }),
        SNICallback: (servername, done) => done(null, contextFor(byName, servername) ?? loaded[0]!.context),
      };
    },
    attach(server) {
      servers.push(server);
    },
    reload(reason) {
      let next: Loaded[];
      let nextCa: string | undefined;
      try {
        nextCa = loadClientCa(settings);
        next = pairs.map((pair) => loadPair(pair, settings, nextCa));
      } catch (err) {
        log.error({ reason, problem: (err as Error).message }, 'TLS certificates changed but cannot be used: still serving the previous ones');
        return false;
      }
      loaded = next;
      clientCaPem = nextCa;
      index();
      const main = loaded[0]!;
      // New contexts come with new session-ticket keys and an empty session cache: a resumed
      // session keeps the client-certificate verdict of its first handshake, and none made
      // under the CAs just replaced resumes (test/tls/mtls.test.ts holds it, with SNI and without).
      for (const server of servers) server.setSecureContext(contextOptions(settings, main.certPem, main.keyPem, clientCaPem));
      log.info({ reason, certificates: loaded.map((entry) => entry.pair.certFile), ...(settings.clientCaFile === undefined ? {} : { clientCaFile: settings.clientCaFile }) }, 'TLS certificates reloaded');
      warnAboutExpiry();
      return true;
    },
    close() {
      watch?.cancel();
    },
  };

  const watch = settings.watchIntervalMs === 0 ? undefined : timers.setTimer(settings.watchIntervalMs, () => {
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
