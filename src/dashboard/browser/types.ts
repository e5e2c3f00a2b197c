/**
 * The owner API's objects as the dashboard reads them (docs/owner.md, "Operations"; the
 * gateway's /openapi.json is their full description). Times are ISO 8601 strings in UTC;
 * optional fields are left out, never null.
 */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

export interface Owner {
  id: string;
  email: string;
  mustChangePassword: boolean;
  createdAt: string;
}

export interface Account {
  id: string;
  /** "" when the account has none. */
  name: string;
  enabled: boolean;
  createdAt?: string;
}

export interface Session {
  owner: Owner;
  accounts: Account[];
  csrfToken: string;
  idleExpiresAt: string;
  expiresAt: string;
}

export interface Key {
  id: string;
  apiKey: string;
  name: string;
  description: string;
  enabled: boolean;
  scopes: string[];
  createdAt?: string;
  previousValidUntil?: string;
  /** The last sign-in with the key, to within a few minutes. */
  lastUsedAt?: string;
}

export interface KeyWithSecret {
  key: Key;
  apiSecret: string;
}

export interface Reset {
  scope: 'key' | 'account';
  accountId: string;
  keyId?: string;
  resetAt: string;
}

export interface SettingsToken {
  id: string;
  name: string;
  start: string;
  scopes: string[];
  createdAt: string;
  expiresAt?: string;
  lastUsedAt?: string;
  revokedAt?: string;
  status: 'active' | 'revoked' | 'expired';
}

export interface SettingsTokenWithToken {
  settingsToken: SettingsToken;
  token: string;
}

export interface Role {
  id: number;
  slug: string;
  name: string;
  description: string;
  public: boolean;
}

export interface SignRecord {
  address: string;
  signedNonce: number;
  signedAt: string;
  signedExpiredAt: string;
}

/** A sign record exactly as `/api/sign` serves it (`…/sign-records/{address}/served`). */
export interface ServedSignRecord {
  did: string;
  signedNonce: number;
  signedAt: string;
  signedExpiredAt: string;
}

export interface AuditEvent {
  id: string;
  at: string;
  action: string;
  actor: { type: 'owner' | 'operator' | 'system'; id?: string; email?: string };
  target: { type: string; id: string };
  ip?: string;
  requestId?: string;
  changes?: Record<string, [unknown, unknown]>;
}

/** `GET …/usage`: calls per key id (API keys and settings tokens) in 5-minute buckets. */
export interface Usage {
  from: string;
  to: string;
  bucketSeconds: number;
  /** false when the gateway counts nothing (`usage.enabled` off): the window is then empty. */
  enabled: boolean;
  items: { keyId: string; requests: number; rateLimited: number }[];
}

export interface Invite {
  id: string;
  email: string;
  createdAt: string;
  expiresAt: string;
  status: 'pending' | 'used' | 'revoked' | 'expired';
}
