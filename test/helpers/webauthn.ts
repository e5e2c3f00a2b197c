/**
 * A software passkey for tests that need no browser: answers the gateway's WebAuthn options as
 * an authenticator would (W3C WebAuthn L3 §6.1 authenticator data, §6.5.4 "none" attestation),
 * with a P-256 key (COSE ES256) made here and a signature counter it keeps. Chromium's virtual
 * authenticator is the real one (test/dashboard/second-factors.test.ts); this one lets the HTTP
 * tests and the OpenAPI walk finish ceremonies. Only the CBOR the attestation needs is encoded.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 256) return Buffer.from([(major << 5) | 24, n]);
  return Buffer.from([(major << 5) | 25, n >> 8, n & 255]);
}

type Cbor = number | string | Buffer | Map<Cbor, Cbor>;

function cbor(value: Cbor): Buffer {
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value, 'utf8')]);
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
}

const sha256 = (data: Buffer | string): Buffer => createHash('sha256').update(data).digest();
const b64 = (data: Buffer | string): string => Buffer.from(data).toString('base64url');

export interface SoftPasskey {
  readonly credentialId: string;
  /** Answers registration options (startPasskeyRegistration's `options`). */
  register(options: Record<string, unknown>, origin: string): Record<string, unknown>;
  /** Answers request options (startPasskeySignIn's `options`); `counter` overrides the next count (a clone's). */
  authenticate(options: Record<string, unknown>, origin: string, counter?: number): Record<string, unknown>;
}

export function softPasskey(): SoftPasskey {
  const { privateKey, publicKey }: { privateKey: KeyObject; publicKey: KeyObject } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const id = randomBytes(16);
  let count = 0;
  let rpId = '';
  let userHandle = '';
  const cose = cbor(new Map<Cbor, Cbor>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x!, 'base64url')], [-3, Buffer.from(jwk.y!, 'base64url')]]));
  const counter = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);

  return {
    credentialId: b64(id),
    register(options, origin) {
      rpId = (options.rp as { id: string }).id;
      userHandle = (options.user as { id: string }).id;
      const clientDataJSON = JSON.stringify({ type: 'webauthn.create', challenge: options.challenge, origin, crossOrigin: false });
      // Flags: user present, user verified, attested credential data.
      const authData = Buffer.concat([sha256(rpId), Buffer.from([0x45]), counter(count), Buffer.alloc(16), Buffer.from([0, id.length]), id, cose]);
      const attestationObject = cbor(new Map<Cbor, Cbor>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]));
      return {
        id: b64(id), rawId: b64(id), type: 'public-key', clientExtensionResults: {},
        response: { clientDataJSON: b64(clientDataJSON), attestationObject: b64(attestationObject), transports: ['internal'] },
      };
    },
    authenticate(options, origin, next) {
      count = next ?? count + 1;
      const clientDataJSON = JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin, crossOrigin: false });
      const authenticatorData = Buffer.concat([sha256((options.rpId as string | undefined) ?? rpId), Buffer.from([0x05]), counter(count)]);
      const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(clientDataJSON)]), privateKey);
      return {
        id: b64(id), rawId: b64(id), type: 'public-key', clientExtensionResults: {},
        response: { clientDataJSON: b64(clientDataJSON), authenticatorData: b64(authenticatorData), signature: b64(signature), userHandle },
      };
    },
  };
}
