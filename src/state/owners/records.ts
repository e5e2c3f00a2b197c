/**
 * What the owner API keeps, as stored: owners (people who sign in to manage accounts), an
 * account's members, invites, API-key metadata, API settings tokens and audit events. One zod
 * schema each, shared by the data file (data-file.ts) and the Redis store, so a record is read
 * back exactly as strictly wherever it lives. Times are ISO 8601 strings (UTC), as the data
 * file already writes sign records; secrets are never stored, only "sha256:<hex>" digests and
 * argon2id PHC strings.
 */
import { z } from 'zod';
import { ID_PATTERN, ID_SPELLING, SCOPE_PATTERN } from '../../domain/formats.js';
import { SECRET_DIGEST_PATTERN } from '../../domain/secrets.js';

/** A certificate's SHA-256 as keys keep it. */
export const CERTIFICATE_SHA256_PATTERN = /^[0-9a-f]{64}$/;

export const ID = z.string().regex(ID_PATTERN, `expected ${ID_SPELLING}`);
export const isoTime = z.iso.datetime({ offset: true });
export const digest = z.string().regex(SECRET_DIGEST_PATTERN, 'expected "sha256:" and 64 lowercase hex digits');
export const scopeList = z.array(z.string().regex(SCOPE_PATTERN, 'expected a scope token (no spaces or quotes)')).max(64);

/** Longest email (RFC 5321 path limit); stored lowercased, which is also how it is unique. */
export const EMAIL_MAX = 254;
export const NAME_MAX = 100;
export const DESCRIPTION_MAX = 4096;

/** A one-time token mailed to an owner, as kept: its SHA-256 only, and when it stops working. */
const oneTimeToken = z.strictObject({ digest, expiresAt: isoTime });
/**
 * A TOTP secret: RFC 4648 base32 without padding, 160 bits (RFC 4226 §4's recommended length),
 * or sealed with `owner.secondFactorKey` (owner/secret-box.ts).
 */
export const TOTP_SECRET_PATTERN = /^(?:[A-Z2-7]{32}|v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{1,128}\.[A-Za-z0-9_-]{22})$/;
export const PASSKEYS_MAX = 20;

export const totpSchema = z.strictObject({
  secret: z.string().regex(TOTP_SECRET_PATTERN),
  enabledAt: isoTime,
  /** The last time step a code was accepted for: a code of it or an earlier one is a replay. */
  lastStep: z.number().int().min(0).optional(),
});

export const pendingTotpSchema = z.strictObject({
  secret: z.string().regex(TOTP_SECRET_PATTERN),
  startedAt: isoTime,
});

/** A WebAuthn credential as @simplewebauthn/server verifies it again: ids and keys base64url. */
export const passkeySchema = z.strictObject({
  /** The credential id (base64url), unique among the owner's. */
  id: z.string().regex(/^[A-Za-z0-9_-]{1,1366}$/),
  /** The COSE public key, base64url. */
  publicKey: z.string().regex(/^[A-Za-z0-9_-]{1,4096}$/),
  counter: z.number().int().min(0),
  transports: z.array(z.string().max(32)).max(8).optional(),
  name: z.string().min(1).max(NAME_MAX),
  createdAt: isoTime,
  lastUsedAt: isoTime.optional(),
});
export type PasskeyRecord = z.infer<typeof passkeySchema>;

export const ownerSchema = z.strictObject({
  id: ID,
  email: z.string().min(3).max(EMAIL_MAX),
  /** argon2id PHC string (owner/passwords.ts). */
  passwordHash: z.string().min(1).max(512),
  /** Set for an initial password an operator chose: every call but the password change is refused. */
  mustChangePassword: z.boolean().default(false),
  disabled: z.boolean().default(false),
  createdAt: isoTime,
  passwordChangedAt: isoTime.optional(),
  /** When the owner followed a verification link sent to `email` (owner/email-verification.ts); absent: not verified. */
  emailVerifiedAt: isoTime.optional(),
  /** The pending verification: the digest of its one-time token, the email it verifies, its end. */
  emailVerification: oneTimeToken.extend({ email: z.string().min(3).max(EMAIL_MAX) }).optional(),
  /** The pending password reset (owner/password-reset.ts): the digest of its one-time token and its end. */
  passwordReset: oneTimeToken.optional(),
  /** A confirmed TOTP second factor (owner/totp.ts); the secret is never answered after enrollment. */
  totp: totpSchema.optional(),
  /** An enrollment started and not yet confirmed: its secret, shown once by startTotpEnrollment. */
  pendingTotp: pendingTotpSchema.optional(),
  /** Digests of the unused one-time recovery codes ("sha256:<hex>", owner/totp.ts). */
  recoveryCodes: z.array(digest).max(16).optional(),
  /** Registered WebAuthn credentials (owner/passkeys.ts). */
  passkeys: z.array(passkeySchema).max(PASSKEYS_MAX).optional(),
});
export type OwnerRecord = z.infer<typeof ownerSchema>;

export const memberSchema = z.strictObject({
  ownerId: ID,
  addedAt: isoTime,
});
export type MemberRecord = z.infer<typeof memberSchema>;

export const inviteSchema = z.strictObject({
  id: ID,
  email: z.string().min(3).max(EMAIL_MAX),
  /** Digest of the one-time invite token (shown once, never stored). */
  digest,
  createdAt: isoTime,
  expiresAt: isoTime,
  usedAt: isoTime.optional(),
  revokedAt: isoTime.optional(),
});
export type InviteRecord = z.infer<typeof inviteSchema>;

/** An API key as the data file and the owner API keep it; key-directory.ts's ApiKeyRecord is its sign-in view. */
export const apiKeySchema = z.strictObject({
  id: ID,
  apiKey: z.string().min(8).max(256),
  secretDigest: z.string().regex(SECRET_DIGEST_PATTERN, 'expected "sha256:" and 64 lowercase hex digits (see npm run keys:create)'),
  disabled: z.boolean().default(false),
  /** What tokens of this key may do; routes may require one (`requiredScope`). */
  scopes: scopeList.default([]),
  name: z.string().max(NAME_MAX).optional(),
  description: z.string().max(DESCRIPTION_MAX).optional(),
  createdAt: isoTime.optional(),
  /** During a roll's overlap, the secret being replaced still signs in, until `previousValidUntil`. */
  previousSecretDigest: digest.optional(),
  previousValidUntil: isoTime.optional(),
  /** Bound to one client certificate (RFC 8705): its SHA-256, 64 lowercase hex digits (docs/tls.md). */
  certificateSha256: z.string().regex(CERTIFICATE_SHA256_PATTERN, 'expected the certificate\'s SHA-256 as 64 lowercase hex digits').optional(),
  /** Signs in and refreshes only with a DPoP proof (RFC 9449, docs/dpop.md); absent: a proof is the client's choice. */
  requireDpop: z.boolean().optional(),
  /** When a secret-scanning report named its secret (owner/leaks.ts): it signs in no more until an owner rolls it. */
  compromisedAt: isoTime.optional(),
});
export type ApiKeyData = z.infer<typeof apiKeySchema>;

export const settingsTokenSchema = z.strictObject({
  id: ID,
  name: z.string().min(1).max(NAME_MAX),
  /** Digest of the whole token string (domain/settings-token.ts). */
  digest,
  /** The token's first characters (prefix and 4 more), so owners can tell tokens apart. */
  start: z.string().min(1).max(32),
  scopes: scopeList.default([]),
  createdAt: isoTime,
  expiresAt: isoTime.optional(),
  revokedAt: isoTime.optional(),
  lastUsedAt: isoTime.optional(),
});
export type SettingsTokenRecord = z.infer<typeof settingsTokenSchema>;

/** Webhook endpoints one account may have (owner/webhooks.ts). */
export const WEBHOOK_ENDPOINTS_MAX = 16;
/** A webhook signing secret as stored: `whsec_` and base64 (owner/webhook-signing.ts), or sealed (owner/secret-box.ts). */
export const WEBHOOK_SECRET_PATTERN = /^(?:whsec_[A-Za-z0-9+/]{32,88}={0,2}|v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{1,128}\.[A-Za-z0-9_-]{22})$/;

/**
 * An account's webhook endpoint (owner/webhooks.ts). Its signing secret must sign, so it is kept
 * whole (sealed under `owner.secondFactorKey` when that is set), answered only at creation and
 * at a roll, and read by the sender at each attempt.
 */
export const webhookEndpointSchema = z.strictObject({
  /** "whe_" and random characters. */
  id: ID,
  url: z.string().min(1).max(2048),
  description: z.string().max(200).default(''),
  /** Event types asked for (owner/webhook-events.ts); empty: all. */
  events: z.array(z.string().min(1).max(64)).max(32).default([]),
  enabled: z.boolean().default(true),
  secret: z.string().regex(WEBHOOK_SECRET_PATTERN, 'expected whsec_ and base64, or a sealed secret'),
  /** During a roll's overlap, the secret replaced still signs each delivery too, until `previousValidUntil`. */
  previousSecret: z.string().regex(WEBHOOK_SECRET_PATTERN, 'expected whsec_ and base64, or a sealed secret').optional(),
  previousValidUntil: isoTime.optional(),
  createdAt: isoTime,
  updatedAt: isoTime,
});
export type WebhookEndpointRecord = z.infer<typeof webhookEndpointSchema>;

export const ACTOR_TYPES = ['owner', 'operator', 'system'] as const;

/**
 * One recorded change: who, what, which object, when, from where. Built only by
 * owner/audit.ts from an allow-list of fields, so no secret, digest or password reaches it.
 */
export const auditEventSchema = z.strictObject({
  /** Sortable by time: "evt_" + 13-digit epoch ms + "_" + random (Redis keeps its stream id beside). */
  id: z.string().min(1).max(64),
  at: isoTime,
  /** "<object>.<verb>", e.g. "key.create", "role.delete", "account.reset". */
  action: z.string().min(1).max(64),
  actor: z.strictObject({ type: z.enum(ACTOR_TYPES), id: z.string().max(256).optional() }),
  target: z.strictObject({ type: z.string().min(1).max(32), id: z.string().max(256) }),
  ip: z.string().max(64).optional(),
  requestId: z.string().max(128).optional(),
  /** Changed fields: name → [before, after]; only non-secret fields (owner/audit.ts). */
  changes: z.record(z.string().max(64), z.tuple([z.unknown(), z.unknown()])).optional(),
});
export type AuditEvent = z.infer<typeof auditEventSchema>;
