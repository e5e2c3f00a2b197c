/** Accounts' API keys. Only a digest of the secret's hash is kept (see domain/secrets.ts). */
export interface ApiKeyRecord {
  /** Stable id of the key; goes into tokens as `client_id`. Not secret. */
  keyId: string;
  accountId: string;
  /** "sha256:" + hex SHA-256 of the 32 raw bytes of the client's apiSecret (itself SHA-256 of the secret). */
  secretDigest: string;
  disabled: boolean;
  /** Granted to the key's tokens (the `scope` claim). */
  scopes: readonly string[];
  /** A rolled key's replaced secret, which still signs in until `previousValidUntil` (epoch ms). */
  previousSecretDigest?: string;
  previousValidUntil?: number;
  /**
   * The client certificate the key is bound to (RFC 8705): SHA-256 of its DER, 64 lowercase hex
   * digits. Such a key signs in only over a connection that presented that certificate, and its
   * access tokens carry it (`cnf.x5t#S256`).
   */
  certificateSha256?: string;
  /**
   * RFC 9449: the key signs in and refreshes only with a DPoP proof (docs/dpop.md), so every
   * token it gets is DPoP-bound. Absent: a proof is the client's choice.
   */
  requireDpop?: boolean;
}

export interface KeyDirectory {
  /** The key a client names at sign-in, by its apiKey value; undefined when there is none. */
  findByApiKey(apiKey: string): Promise<ApiKeyRecord | undefined>;
  /** The key behind an issued token, by key id; undefined once the key is gone. */
  findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined>;
}
