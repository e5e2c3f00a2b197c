/**
 * The signature bytes of a compact JWS and the other spellings of one signature that a lax
 * verifier would accept (RFC 7518 §3.4, §3.3, §3.5; RFC 8032 §5.1.7): the tests show the
 * gateway accepts exactly one of them. The curve orders are written out here from SEC 2 §2.4
 * rather than imported from src/, so the tests do not take the implementation's word for them.
 */

/** Order n of the base point of each ECDSA curve (SEC 2 v2 §2.4.2, §2.5.1). */
export const ECDSA_CURVE_ORDER = {
  ES256: BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551'),
  ES384: BigInt('0xffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973'),
} as const;

export type EcdsaAlg = keyof typeof ECDSA_CURVE_ORDER;

/** Order L of the Ed25519 base point (RFC 8032 §5.1). */
export const ED25519_ORDER = (1n << 252n) + 27742317777372353535851937790883648493n;

export function signatureOf(token: string): Buffer {
  return Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
}

export function withSignature(token: string, signature: Uint8Array): string {
  return `${token.slice(0, token.lastIndexOf('.') + 1)}${Buffer.from(signature).toString('base64url')}`;
}

export function toBigInt(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt(`0x${Buffer.from(bytes).toString('hex')}`);
}

/** Big-endian, left-padded to `length` bytes (longer when the value needs more). */
export function toBytes(value: bigint, length: number): Buffer {
  const hex = value.toString(16);
  return Buffer.from(hex.padStart(Math.max(length * 2, hex.length + (hex.length % 2)), '0'), 'hex');
}

/** The ECDSA signature's `s` half (R ‖ S, each as long as the curve order: RFC 7518 §3.4). */
function ecdsaHalves(token: string, alg: EcdsaAlg): { r: Buffer; s: bigint; size: number } {
  const signature = signatureOf(token);
  const size = signature.length / 2;
  if (!Number.isInteger(size) || toBytes(ECDSA_CURVE_ORDER[alg], 0).length !== size) throw new Error(`not an ${alg} signature`);
  return { r: signature.subarray(0, size), s: toBigInt(signature.subarray(size)), size };
}

/** True when the signature's `s` is at most n/2 (the "low-S" form, BIP 62 / SEC 1 §4.1.4 note). */
export function hasLowS(token: string, alg: EcdsaAlg): boolean {
  return ecdsaHalves(token, alg).s <= ECDSA_CURVE_ORDER[alg] / 2n;
}

/** The same token with `s` replaced by `n − s`: the other signature ECDSA verification accepts. */
export function withFlippedS(token: string, alg: EcdsaAlg): string {
  const { r, s, size } = ecdsaHalves(token, alg);
  return withSignature(token, Buffer.concat([r, toBytes(ECDSA_CURVE_ORDER[alg] - s, size)]));
}

/** The token in its low-S form: what a signer that normalises (the gateway's) produces. */
export function withLowS(token: string, alg: EcdsaAlg): string {
  return hasLowS(token, alg) ? token : withFlippedS(token, alg);
}
