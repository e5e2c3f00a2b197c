/**
 * The keys that sign secret-scanning reports (docs/leaks.md): GitHub publishes them at
 * `leaks.keysUrl` as `{public_keys: [{key_identifier, key, is_current}]}`, each `key` an SPKI PEM
 * of an ECDSA P-256 key, and signs the raw body of each report with one of them (ECDSA with
 * SHA-256, the DER signature base64 in `Github-Public-Key-Signature`, the key's id in
 * `Github-Public-Key-Identifier`). Verified with node:crypto, which reads the PEM as published.
 *
 * - Every fetch is bounded: `keysFetchTimeoutMs` for the whole answer, `keysMaxBytes` read at
 *   most; no redirects. One fetch at a time: concurrent reports wait for the same one.
 * - The fetched set is used for `keysCacheSeconds`. A key id it does not hold prompts a fetch
 *   (GitHub rotated its keys), but at most one per `keysMinRefetchSeconds`, and so does a failure:
 *   made-up key ids cannot make the gateway hammer GitHub. A set past its time is still used
 *   while a new one cannot be had (the keys are public and rotate rarely; an outage of the key
 *   server must not stop leak reports).
 * - At most MAX_KEYS keys are kept, and only EC P-256 public keys; anything else is dropped.
 * test/http/leaks.test.ts holds it against a key server the test starts.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { Config } from '../config/schema.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { readLimited } from '../util/read-limited.js';

export type LeakKeySettings = Pick<Config['leaks'], 'keysUrl' | 'keysCacheSeconds' | 'keysMinRefetchSeconds' | 'keysFetchTimeoutMs' | 'keysMaxBytes'>;

/** What a report's signature check found. */
export type SignatureCheck = 'valid' | 'bad_signature' | 'unknown_key' | 'keys_unavailable';

export interface LeakReportKeys {
  /** Whether `signature` (base64 DER) is the key `keyId`'s ECDSA P-256 / SHA-256 signature of `body`. */
  verify(keyId: string, signature: string, body: Buffer): Promise<SignatureCheck>;
}

/** More keys than GitHub has ever published at once: the rest of a longer list is ignored. */
const MAX_KEYS = 32;

const keyDocument = z.object({
  public_keys: z.array(z.object({
    key_identifier: z.string().min(1).max(256),
    key: z.string().min(1).max(4096),
  })).max(256),
});

interface KeptSet {
  keys: ReadonlyMap<string, KeyObject>;
  fetchedAt: number;
}

export interface LeakReportKeyDeps {
  settings: LeakKeySettings;
  clock: Clock;
  log: Logger;
  /** Outbound HTTP, injectable; global fetch by default. */
  fetch?: typeof fetch;
}

export function createLeakReportKeys({ settings, clock, log, fetch: doFetch = fetch }: LeakReportKeyDeps): LeakReportKeys {
  let kept: KeptSet | undefined;
  let inFlight: Promise<KeptSet | undefined> | undefined;
  let lastAttemptAt = Number.NEGATIVE_INFINITY;
  const mayPrompt = () => clock.now() - lastAttemptAt >= settings.keysMinRefetchSeconds * 1000;

  function refresh(): Promise<KeptSet | undefined> {
    if (inFlight !== undefined) return inFlight;
    lastAttemptAt = clock.now();
    inFlight = fetchKeys(settings, doFetch).then(
      (keys) => {
        kept = { keys, fetchedAt: clock.now() };
        return kept;
      },
      (err: unknown) => {
        log.warn({ url: settings.keysUrl, reason: err instanceof Error ? err.message : 'error' }, 'secret-scanning report keys could not be fetched');
        return undefined;
      },
    ).finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  async function keyFor(keyId: string): Promise<KeyObject | 'unknown_key' | 'keys_unavailable'> {
    const fresh = kept !== undefined && clock.now() - kept.fetchedAt < settings.keysCacheSeconds * 1000;
    const known = kept?.keys.get(keyId);
    if (fresh && known !== undefined) return known;
    // Unknown id or an old set: fetch again (rate-limited, or join the fetch under way).
    const set = inFlight !== undefined || mayPrompt() ? (await refresh()) ?? kept : kept;
    if (set === undefined) return 'keys_unavailable';
    return set.keys.get(keyId) ?? 'unknown_key';
  }

  return {
    async verify(keyId, signature, body) {
      const key = await keyFor(keyId);
      if (typeof key === 'string') return key;
      const der = Buffer.from(signature, 'base64');
      try {
        return verify('sha256', body, { key, dsaEncoding: 'der' }, der) ? 'valid' : 'bad_signature';
      } catch {
        // Not a DER signature at all.
        return 'bad_signature';
      }
    },
  };
}

async function fetchKeys({ keysUrl, keysFetchTimeoutMs, keysMaxBytes }: LeakKeySettings, doFetch: typeof fetch): Promise<Map<string, KeyObject>> {
  const response = await doFetch(keysUrl, { signal: AbortSignal.timeout(keysFetchTimeoutMs), redirect: 'error', headers: { accept: 'application/json' } });
  if (!response.ok || response.body === null) {
    await response.body?.cancel();
    throw new Error(`the key server answered ${response.status}`);
  }
  const text = await readLimited(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), keysMaxBytes);
  const parsed = keyDocument.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error('the key document is not in the expected format');
  const keys = new Map<string, KeyObject>();
  for (const { key_identifier: id, key: pem } of parsed.data.public_keys.slice(0, MAX_KEYS)) {
    try {
      const key = createPublicKey(pem);
      if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') keys.set(id, key);
    } catch {
      // Not a public key: dropped, as every key of another kind.
    }
  }
  return keys;
}
