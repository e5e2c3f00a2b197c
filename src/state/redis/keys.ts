/**
 * Every Redis key and channel name the gateway uses, in one place (docs/redis.md lists them).
 * Names are `<prefix>:<kind>:…`. Token state is hash-tagged by account (`{<accountId>}`), so
 * that each Lua script's keys share one Cluster slot; ids are checked before they get here
 * (auth/refresh.ts, the data file, key-directory.redis.ts), so a tag never holds `{` or `}`.
 */
export interface RedisKeys {
  /** Hash: one refresh token (by its id). TTL: the token's expiry; once consumed, its family's. */
  token(accountId: string, tokenId: string): string;
  /** Hash: one refresh-token family. TTL: the family's absolute expiry. */
  family(accountId: string, familyId: string): string;
  /** Hash: the account's resets (`account`, `key:<keyId>`). TTL: as long as a token from before them can live. */
  resets(accountId: string): string;
  /**
   * Hash: an API key record, by the apiKey clients send. No TTL: written by the operator. For a
   * key of the owner store it holds only `home` (its account id) and `keyId`: the record itself is
   * `accountKey(home, keyId)`, in the account's slot.
   */
  apiKey(apiKey: string): string;
  /** Hash: the same record (or the same pointer), by key id. No TTL. */
  keyId(keyId: string): string;
  /**
   * Hash: the sign-in record of an owner-store key, in its account's slot, so that the script
   * that changes the account writes it in the same step (fields of `apiKey` plus `apiKey`; a
   * deleted key's is `gone` until its pointers are deleted). No TTL.
   */
  accountKey(accountId: string, keyId: string): string;
  /**
   * Pub/sub channel on which every write of a key record is announced (`{"accountId"}`), so
   * that every instance drops its cached key records at once (state/keys/redis.ts).
   */
  readonly keysChannel: string;
  /**
   * String: when the data in this Redis began (epoch ms; state/revocation/store.ts). No TTL, on
   * purpose: it must go only when everything else goes, so that its absence tells of a loss.
   */
  readonly epoch: string;
  /** Pub/sub channel on which every reset is announced. */
  readonly resetChannel: string;
  /**
   * Sorted set: revoked access tokens (RFC 7009), jti scored by the token's expiry (epoch ms),
   * expired members dropped by each write. TTL: the latest expiry in it (state/denylist/redis.ts).
   */
  readonly deniedTokens: string;
  /** Pub/sub channel on which every revoked access token is announced (`{"jti","expiresAt"}`). */
  readonly deniedChannel: string;
  /** Sorted set: the account's role ids, each scored by itself (the listing order). Written by the dashboard. */
  roleIndex(accountId: string): string;
  /** Hash: the account's roles, role id → the role as JSON. Written by the dashboard. */
  roles(accountId: string): string;
  /** Hash: the account's sign records, lowercase address → the record as JSON. Written by the signature collector. */
  signRecords(accountId: string): string;
  /** Pub/sub channel on which writers announce directory changes (docs/directory.md). */
  readonly directoryChannel: string;
  /**
   * String: one rate-limit window of a subject (a limit's name and who it counts), its count.
   * TTL: the rest of the window, and none left once counted back to 0 (deleted). Tagged by
   * subject, so a subject's windows share a slot. A subject's client-chosen parts are at most 64
   * characters or a digest (limits/rate-limits.ts `bounded`), so the name's length is bounded.
   */
  rateWindow(subject: string, ms: number): string;
  /**
   * Hash: one account's usage counts in one 5-minute bucket (state/usage/store.ts), fields
   * `r:<keyId>` (calls), `l:<keyId>` (rate-limited calls) and `1:<keyId>` … `5:<keyId>` (calls
   * answered 1xx … 5xx). `bucketStart` in epoch ms, named in seconds. TTL: 25 hours from the
   * bucket's last write. Tagged by account, so the buckets an account's window reads share a slot
   * and one script reads them.
   */
  usage(accountId: string, bucketStart: number): string;
  /**
   * Hash: one account's usage counts in one UTC day, the same fields as `usage`. `dayStart` in
   * epoch ms, named in seconds. TTL: 32 days from the day's last write. Tagged by account, as
   * `usage` (and in the same slot, so one script writes both).
   */
  usageDay(accountId: string, dayStart: number): string;
  /**
   * Hash: when each API key of the account last signed in (state/key-use/store.ts), key id → epoch
   * ms. TTL: KEY_USE_RETENTION_MS (400 days) from its last write.
   */
  keyUse(accountId: string): string;
  /**
   * String: a DPoP proof already used (state/dpop-proofs/store.ts), named by a digest of its key
   * thumbprint and `jti` (43 characters). TTL: until the proof's `iat` window ends.
   */
  dpopProof(id: string): string;

  // The owner store (owner-store.redis.ts). What lives in an account's slot is changed by
  // scripts; everything found by another name (an owner, an email, a digest) is a projection
  // or an index written in order around them, which readers check against the account.

  /** Hash: an account: `doc` (AccountDoc JSON) and `v` (its version, +1 per change). No TTL. */
  account(accountId: string): string;
  /** Stream: the account's audit events, each entry one field `e` (the event JSON); capped by MAXLEN. */
  audit(accountId: string): string;
  /**
   * Set: names of the sign-in records (apiKey, keyId) written outside the account's slot by a
   * version before the records moved there, not yet retired; read and deleted by the account's
   * first change since (owner-store.redis.ts). No TTL.
   */
  accountKeys(accountId: string): string;
  /** Sorted set: every account id (deleted ones too), all scored 0 so that they sort by id. */
  readonly accountIndex: string;
  /** Hash: an owner: `doc` (OwnerRecord JSON) and `v`. No TTL. */
  owner(ownerId: string): string;
  /** Set: every owner id written (so an export finds owners who belong to no account). No TTL. */
  readonly ownerIndex: string;
  /** String: the owner id holding this email (lowercase). Claimed with SET NX; trusted only if the owner agrees. */
  ownerEmail(email: string): string;
  /** Set: ids of accounts the owner was made a member of (never shrinks by itself); trusted only if the account agrees. */
  ownerAccounts(ownerId: string): string;
  /** String: the account id holding the settings token with this digest; trusted only if the account agrees. */
  settingsToken(digest: string): string;
  /** String: the account id holding the invite with this digest; trusted only if the account agrees. */
  invite(digest: string): string;
  /** Hash: an owner session, by the digest of its id. TTL: its idle or absolute end, whichever is sooner. */
  session(digest: string): string;
  /** Set: digests of the owner's sessions (ended ones pruned at a sign-in past 16). TTL: its latest session's absolute end. */
  ownerSessions(ownerId: string): string;
  /** String: a WebAuthn ceremony's challenge (state/ceremonies/), taken once. TTL: the ceremony's end. */
  ceremony(id: string): string;
  /**
   * String: written by each /readyz with a PX of a few seconds, to see that Redis takes a write
   * (redis/client.ts). Tagged by `tag`, which the check picks so that one such key lives on each
   * Cluster primary.
   */
  readiness(tag: string): string;

  // ACME (state/acme/redis.ts): one certificate per prefix, ordered by one instance at a time.

  /** String: the ACME account key (PEM). No TTL: it names the account at the CA (its contact, its rate limits); lost, a new account is made. */
  readonly acmeAccountKey: string;
  /** String: the ACME certificate with its key (JSON). TTL: until the certificate expires. */
  readonly acmeCertificate: string;
  /** String: the order lock, holding its holder's random token. TTL: the lock's (10 minutes), so a dead holder's lapses. */
  readonly acmeLock: string;
  /** String: an HTTP-01 key authorization, by its token (checked against RFC 8555's alphabet first). TTL: 10 minutes. */
  acmeChallenge(token: string): string;
  /** Pub/sub channel on which a saved certificate is announced, so every instance serves it at once. */
  readonly acmeChannel: string;

  // The mail outbox (state/outbox/redis.ts): one hash tag, so each script runs on one Cluster node.

  /** Hash: queued mails, id → the mail as JSON (attempts included). No TTL: a mail leaves when sent. */
  readonly outboxMails: string;
  /** Sorted set: queued mail ids scored by when each is due (while claimed: its lease's end). No TTL. */
  readonly outboxDue: string;
  /** Hash: mail id → its current claim's token. No TTL: a field goes with its mail. */
  readonly outboxClaims: string;

  // The webhook deliveries (state/webhooks/queue.ts): the outbox's scripts on keys of their own.

  /** Hash: queued deliveries, id → the delivery as JSON (attempts included). No TTL: it leaves when delivered or given up. */
  readonly webhookDeliveries: string;
  /** Sorted set: queued delivery ids scored by when each is due (while claimed: its lease's end). No TTL. */
  readonly webhookDue: string;
  /** Hash: delivery id → its current claim's token. No TTL. */
  readonly webhookClaims: string;
  /** List: an endpoint's delivery log (state/webhooks/redis.ts), newest first, at most 50 entries. TTL: 30 days from the last attempt. */
  webhookLog(endpointId: string): string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    token: (accountId, tokenId) => `${prefix}:rt:{${accountId}}:${tokenId}`,
    family: (accountId, familyId) => `${prefix}:fam:{${accountId}}:${familyId}`,
    resets: (accountId) => `${prefix}:reset:{${accountId}}`,
    apiKey: (apiKey) => `${prefix}:apikey:${apiKey}`,
    keyId: (keyId) => `${prefix}:key:${keyId}`,
    accountKey: (accountId, keyId) => `${prefix}:akey:{${accountId}}:${keyId}`,
    keysChannel: `${prefix}:keys`,
    epoch: `${prefix}:epoch`,
    resetChannel: `${prefix}:resets`,
    deniedTokens: `${prefix}:denied`,
    deniedChannel: `${prefix}:denied-tokens`,
    roleIndex: (accountId) => `${prefix}:roles:{${accountId}}`,
    roles: (accountId) => `${prefix}:role:{${accountId}}`,
    signRecords: (accountId) => `${prefix}:sign:{${accountId}}`,
    directoryChannel: `${prefix}:directory`,
    rateWindow: (subject, ms) => `${prefix}:rl:{${subject}}:${ms}`,
    usage: (accountId, bucketStart) => `${prefix}:usage:{${accountId}}:${bucketStart / 1000}`,
    usageDay: (accountId, dayStart) => `${prefix}:usage-day:{${accountId}}:${dayStart / 1000}`,
    keyUse: (accountId) => `${prefix}:key-use:{${accountId}}`,
    dpopProof: (id) => `${prefix}:dpop-jti:${id}`,
    account: (accountId) => `${prefix}:acct:{${accountId}}`,
    audit: (accountId) => `${prefix}:audit:{${accountId}}`,
    accountKeys: (accountId) => `${prefix}:acct-keys:{${accountId}}`,
    accountIndex: `${prefix}:accounts`,
    owner: (ownerId) => `${prefix}:owner:${ownerId}`,
    ownerIndex: `${prefix}:owners`,
    ownerEmail: (email) => `${prefix}:email:${email}`,
    ownerAccounts: (ownerId) => `${prefix}:owner-accts:${ownerId}`,
    settingsToken: (digest) => `${prefix}:stoken:${digest}`,
    invite: (digest) => `${prefix}:invite:${digest}`,
    session: (digest) => `${prefix}:sess:${digest}`,
    ownerSessions: (ownerId) => `${prefix}:owner-sess:${ownerId}`,
    ceremony: (id) => `${prefix}:ceremony:${id}`,
    readiness: (tag) => `${prefix}:readyz:{${tag}}`,
    acmeAccountKey: `${prefix}:acme:account`,
    acmeCertificate: `${prefix}:acme:cert`,
    acmeLock: `${prefix}:acme:lock`,
    acmeChallenge: (token) => `${prefix}:acme:challenge:${token}`,
    acmeChannel: `${prefix}:acme`,
    outboxMails: `${prefix}:outbox:{mail}:mails`,
    outboxDue: `${prefix}:outbox:{mail}:due`,
    outboxClaims: `${prefix}:outbox:{mail}:claims`,
    webhookDeliveries: `${prefix}:webhooks:{webhook}:deliveries`,
    webhookDue: `${prefix}:webhooks:{webhook}:due`,
    webhookClaims: `${prefix}:webhooks:{webhook}:claims`,
    webhookLog: (endpointId) => `${prefix}:webhooks:log:{${endpointId}}`,
  };
}
