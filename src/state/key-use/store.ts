/**
 * When each API key last signed in, for owners (the owner API's key view, the dashboard's keys
 * table). Kept apart from the account (the owner store): a sign-in is no change to the account,
 * so it must not rewrite the data file, re-project the key's sign-in records or send the key
 * notices that drop every instance's cached keys. Written at sign-in only (auth/key-use.ts, at
 * most every few minutes per key), never per request. Implementations: memory (one process,
 * since it started) and Redis (shared, kept KEY_USE_RETENTION_MS from the last write); the
 * contract suite test/contracts/key-use.contract.ts holds both.
 */

/** How long Redis keeps an account's last sign-ins after the last one written: 400 days. */
export const KEY_USE_RETENTION_MS = 400 * 86_400_000;

export interface KeyUseStore {
  /** Records that `keyId` of `accountId` signed in at `at` (epoch ms); an earlier time never replaces a later one. */
  record(accountId: string, keyId: string, at: number): Promise<void>;
  /** The account's keys' last sign-ins: key id → epoch ms (keys never seen are absent). */
  read(accountId: string): Promise<Map<string, number>>;
}
