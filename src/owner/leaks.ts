/**
 * What a secret-scanning report does to the secrets it names (docs/leaks.md). The report's
 * signature is checked before anything here is called (http/routes/leaks.ts): only GitHub (or
 * the configured reporter) reaches this, and each token is judged on its own:
 *
 * - an API secret (`gwsk_…`, or `<tokens.prefix>sk_…`): the key is marked compromised (`compromisedAt`) and its stored
 *   digest replaced by one of 256 random bits no secret hashes to, so the leaked secret (and a
 *   roll's overlapping previous one) signs in no more; every token of the key is reset on every
 *   instance. Only an owner's roll gives the key a secret again (owner/keys.ts clears the mark).
 *   The key is found by scanning the accounts for the digest: stores index keys by API key, not by
 *   secret. A scan per report is cheap while reports are rare and signed (never a stranger's
 *   lever); an index by digest is the step for deployments with very many keys (the closing
 *   note of this change names it).
 * - an API settings token (`gwst_…`, `<tokens.prefix>st_…`): revoked for good, then reset on every instance, as an
 *   owner's revoke does.
 * - a refresh token: its family ends (auth/token-revocation.ts, the RFC 7009 path) with its
 *   access tokens, on every instance.
 *
 * Each is audited in its account (`key.leak_reported` on the key, also for a refresh token;
 * `settings_token.leak_reported` on the token) with the report's URL, by the actor `system`;
 * the mail notices follow from the audit action (owner/mail-notices.ts). A token
 * that is not a live secret of this deployment (unknown, already revoked, expired, a typo) is a
 * false positive and changes nothing. Nothing here logs a token.
 */
import { randomBytes } from 'node:crypto';
import { parseRefreshToken } from '../auth/refresh.js';
import { hashSecret, secretDigest } from '../domain/secrets.js';
import { isWellFormedSettingsToken, settingsTokenDigest } from '../domain/settings-token.js';
import { DEFAULT_TOKEN_FAMILY, familyOf } from '../domain/token-prefix.js';
import type { ApiKeyData } from '../state/owners/records.js';
import type { AccountDoc } from '../state/owners/store.js';
import type { OwnerDeps } from './deps.js';
import { createChangePipeline, editAccount, trail, type Change, type PersistStep } from './pipeline.js';
import type { Actor, RequestMeta } from './types.js';

export type LeakLabel = 'true_positive' | 'false_positive';

/** One token of a report, as GitHub sends it. */
export interface ReportedToken {
  token: string;
  type: string;
  url?: string | undefined;
  source?: string | undefined;
}

/** GitHub's answer for one token. */
export interface LeakVerdict {
  token_raw: string;
  token_type: string;
  label: LeakLabel;
}

export interface LeakService {
  /** Each token judged and, when live, ended; the answers in the report's order. */
  report(tokens: readonly ReportedToken[], meta: RequestMeta): Promise<LeakVerdict[]>;
}

type Handled = LeakLabel;

export function createLeakService(deps: OwnerDeps): LeakService {
  const change = createChangePipeline(deps);
  return {
    async report(tokens, meta) {
      // The operator's reach (every account): the report is signed, so it speaks for the operator.
      const actor: Actor = { caller: { kind: 'operator' }, meta };
      const verdicts: LeakVerdict[] = [];
      // One at a time: a report is small, and each change is one account write.
      for (const reported of tokens) {
        const label = await judge(deps, change, actor, reported);
        verdicts.push({ token_raw: reported.token, token_type: reported.type, label });
      }
      return verdicts;
    },
  };
}

async function judge(deps: OwnerDeps, change: Change, actor: Actor, { token, url }: ReportedToken): Promise<Handled> {
  // Only the families this deployment made secrets in (domain/token-prefix.ts): another's is no
  // secret of ours, and costs no store read.
  const { prefix, previousPrefixes } = deps.config.tokens;
  const ours = (family: string | undefined) => family !== undefined && (family === prefix || family === DEFAULT_TOKEN_FAMILY || previousPrefixes.includes(family));
  if (ours(familyOf(token, 'settingsToken'))) return isWellFormedSettingsToken(token) ? settingsTokenLeaked(deps, change, actor, token, url) : 'false_positive';
  if (ours(familyOf(token, 'apiSecret'))) return apiSecretLeaked(deps, change, actor, token, url);
  const parsed = parseRefreshToken(token);
  if (parsed !== undefined && deps.tokenRevocation !== undefined) {
    const result = await deps.tokenRevocation.revoke(token);
    if (result.outcome !== 'revoked') return 'false_positive';
    await auditRefreshLeak(deps, change, actor, parsed.accountId, parsed.keyId, url);
    return 'true_positive';
  }
  return 'false_positive';
}

/** The event of a leak: by `system`, with the report's URL. */
function leakEvent(step: PersistStep<unknown, unknown>, action: string, target: { type: string; id: string }, url: string | undefined, changes: Record<string, [unknown, unknown]> = {}) {
  return { ...step.event({ action, target, changes: { ...changes, leakUrl: [undefined, url] } }), actor: { type: 'system' as const } };
}

async function settingsTokenLeaked({ store, revocations, clock }: OwnerDeps, change: Change, actor: Actor, token: string, url: string | undefined): Promise<Handled> {
  const found = await store.findSettingsToken(settingsTokenDigest(token));
  if (found === undefined) return 'false_positive';
  const { accountId, token: record } = found;
  const expired = record.expiresAt !== undefined && Date.parse(record.expiresAt) <= clock.now();
  if (record.revokedAt !== undefined || expired) return 'false_positive';
  const revoked = await change(actor, {
    load: async () => undefined,
    persist: (step) => editAccount(store, undefined, accountId, (doc) => {
      const stored = doc.settingsTokens.find((t) => t.id === record.id);
      if (doc.deletedAt !== undefined || stored === undefined || stored.revokedAt !== undefined) return { events: [], result: false };
      const events = [leakEvent(step, 'settings_token.leak_reported', { type: 'settings_token', id: record.id }, url)];
      const at = new Date(step.now).toISOString();
      return { doc: { ...doc, settingsTokens: doc.settingsTokens.map((t) => (t.id === record.id ? { ...t, revokedAt: at } : t)) }, events, result: true };
    }),
    async notify(written) {
      // As an owner's revoke: every instance drops it at once, whatever its cached copy says.
      if (written) await revocations.reset({ accountId, keyId: record.id });
      return written;
    },
  });
  return revoked ? 'true_positive' : 'false_positive';
}

/** The account and key holding `digest` as its secret, or as a roll's previous secret still in its overlap. */
async function findKeyBySecret({ store, clock }: OwnerDeps, digest: string): Promise<{ accountId: string; keyId: string } | undefined> {
  const now = clock.now();
  const holds = (key: ApiKeyData) => key.secretDigest === digest
    || (key.previousSecretDigest === digest && key.previousValidUntil !== undefined && Date.parse(key.previousValidUntil) > now);
  for (const account of await store.listAccounts()) {
    if (account.deletedAt !== undefined) continue;
    const key = account.apiKeys.find(holds);
    if (key !== undefined) return { accountId: account.id, keyId: key.id };
  }
  return undefined;
}

async function apiSecretLeaked(deps: OwnerDeps, change: Change, actor: Actor, secret: string, url: string | undefined): Promise<Handled> {
  const digest = secretDigest(hashSecret(secret));
  const found = await findKeyBySecret(deps, digest);
  if (found === undefined) return 'false_positive';
  const { accountId, keyId } = found;
  const compromised = await change(actor, {
    load: async () => undefined,
    persist: (step) => editAccount(deps.store, undefined, accountId, (doc: AccountDoc) => {
      const key = doc.apiKeys.find((k) => k.id === keyId);
      // Rolled or deleted meanwhile: the leaked secret signs in no more, nothing to do.
      if (doc.deletedAt !== undefined || key === undefined || (key.secretDigest !== digest && key.previousSecretDigest !== digest)) return { events: [], result: false };
      const at = new Date(step.now).toISOString();
      const { previousSecretDigest: _digest, previousValidUntil: _until, ...rest } = key;
      // No secret hashes to 32 random bytes' digest: sign-in is refused until an owner rolls.
      const next: ApiKeyData = { ...rest, secretDigest: `sha256:${randomBytes(32).toString('hex')}`, compromisedAt: at };
      const events = [leakEvent(step, 'key.leak_reported', { type: 'key', id: keyId }, url, { compromisedAt: [key.compromisedAt, at] })];
      return { doc: { ...doc, apiKeys: doc.apiKeys.map((k) => (k.id === keyId ? next : k)) }, events, result: true };
    }),
    async notify(written) {
      if (written) await deps.revocations.reset({ accountId, keyId });
      return written;
    },
  });
  return compromised ? 'true_positive' : 'false_positive';
}

/** A refresh token's family is already over (auth/token-revocation.ts): the leak is recorded on its key. */
async function auditRefreshLeak({ store }: OwnerDeps, change: Change, actor: Actor, accountId: string, keyId: string, url: string | undefined): Promise<void> {
  await change(actor, {
    load: async () => undefined,
    async persist(step) {
      const doc = await store.readAccount(accountId);
      if (doc === undefined || doc.deletedAt !== undefined) return trail(accountId, [], undefined);
      const events = [leakEvent(step, 'key.leak_reported', { type: 'key', id: keyId }, url, { tokenType: [undefined, 'refresh_token'] })];
      await store.appendAudit(accountId, events);
      return trail(accountId, events, undefined);
    },
  });
}
