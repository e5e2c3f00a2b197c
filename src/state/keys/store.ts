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
}

export interface KeyDirectory {
  /** The key a client names at sign-in, by its apiKey value; undefined when there is none. */
  findByApiKey(apiKey: string): Promise<ApiKeyRecord | undefined>;
  /** The key behind an issued token, by key id; undefined once the key is gone. */
  findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined>;
}
