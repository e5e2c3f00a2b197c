/**
 * API settings tokens: long-lived access tokens an owner takes from the dashboard, accepted
 * wherever an access token is (auth/settings-tokens.ts checks them). Made here, shown once,
 * kept only as a digest with their first characters (domain/settings-token.ts).
 *
 * A revoke is written first (durable: the token never works again, even after the reset
 * record below has expired or a restart has forgotten it), then announced as a reset of the
 * token's id, which every instance hears at once, whatever its cached copy of the token says.
 */
import { randomBase62 } from '../domain/random.js';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../domain/settings-token.js';
import { Conflict, NotFound } from '../errors/errors.js';
import type { SettingsTokenRecord } from '../state/owners/records.js';
import type { AccountDoc } from '../state/owners/store.js';
import { loadAccount } from './access.js';
import type { OwnerDeps } from './deps.js';
import { revokeSettingsTokens } from './keys.js';
import { pageById } from './pages.js';
import { createChangePipeline, editAccount } from './pipeline.js';
import type { Actor, Caller, Page, PageQuery } from './types.js';

export type SettingsTokenStatus = 'active' | 'revoked' | 'expired';

/**
 * Tokens revoked or expired longer ago than this are dropped when a new one is made: a token
 * no longer stored is unknown, so refused all the same.
 */
const ENDED_TOKEN_KEPT_MS = 30 * 86_400_000;
/** Tokens an account holds at most (ended ones within ENDED_TOKEN_KEPT_MS included): each change rewrites the account. */
const MAX_SETTINGS_TOKENS = 100;

export interface SettingsTokenView {
  id: string;
  name: string;
  start: string;
  scopes: string[];
  createdAt: string;
  expiresAt?: string;
  lastUsedAt?: string;
  revokedAt?: string;
  status: SettingsTokenStatus;
}

export interface NewSettingsToken {
  name: string;
  scopes?: string[];
  /** Absent: the token never expires (unless owner.settingsTokenMaxDays caps it). */
  expiresInSeconds?: number;
}

export interface SettingsTokenService {
  list(caller: Caller, accountId: string, page: PageQuery): Promise<Page<SettingsTokenView>>;
  create(actor: Actor, accountId: string, input: NewSettingsToken): Promise<{ settingsToken: SettingsTokenView; token: string }>;
  get(caller: Caller, accountId: string, tokenId: string): Promise<SettingsTokenView>;
  /** Revoked for good, on every instance at once; revoking a revoked token changes nothing. */
  revoke(actor: Actor, accountId: string, tokenId: string): Promise<SettingsTokenView>;
  /**
   * Every token of the account revoked for good, without an owner's request: what
   * `POST /api/reset` with scope account adds to its reset (auth/service.ts). No-op when the
   * store takes no writes or the account is gone.
   */
  revokeAllOf(accountId: string): Promise<void>;
}

export const SETTINGS_TOKEN_ID_PREFIX = 'stk_';

/** When a token stopped working (or will), if it does. */
function endOf(token: SettingsTokenRecord): number {
  return Math.min(token.revokedAt === undefined ? Infinity : Date.parse(token.revokedAt), token.expiresAt === undefined ? Infinity : Date.parse(token.expiresAt));
}

export function toSettingsTokenView(token: SettingsTokenRecord, now: number): SettingsTokenView {
  const status: SettingsTokenStatus = token.revokedAt !== undefined
    ? 'revoked'
    : token.expiresAt !== undefined && Date.parse(token.expiresAt) <= now ? 'expired' : 'active';
  return {
    id: token.id,
    name: token.name,
    start: token.start,
    scopes: [...token.scopes],
    createdAt: token.createdAt,
    ...(token.expiresAt !== undefined ? { expiresAt: token.expiresAt } : {}),
    ...(token.lastUsedAt !== undefined ? { lastUsedAt: token.lastUsedAt } : {}),
    ...(token.revokedAt !== undefined ? { revokedAt: token.revokedAt } : {}),
    status,
  };
}

function findToken(doc: AccountDoc, tokenId: string): SettingsTokenRecord {
  const token = doc.settingsTokens.find((t) => t.id === tokenId);
  if (token === undefined) throw new NotFound('No such settings token.');
  return token;
}

export function createSettingsTokenService(deps: OwnerDeps): SettingsTokenService {
  const { store, revocations, clock, config } = deps;
  const change = createChangePipeline(deps);
  const maxSeconds = config.owner.settingsTokenMaxDays === undefined ? undefined : config.owner.settingsTokenMaxDays * 86_400;

  return {
    async list(caller, accountId, page) {
      const doc = await loadAccount(store, caller, accountId);
      const now = clock.now();
      return pageById(doc.settingsTokens, page, (t) => toSettingsTokenView(t, now));
    },

    async get(caller, accountId, tokenId) {
      return toSettingsTokenView(findToken(await loadAccount(store, caller, accountId), tokenId), clock.now());
    },

    create: (actor, accountId, { name, scopes = [], expiresInSeconds }) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      async persist({ now, event }) {
        // The configured cap shortens a longer lifetime, and gives one to a token asked for without.
        const lifetime = maxSeconds === undefined ? expiresInSeconds : Math.min(expiresInSeconds ?? maxSeconds, maxSeconds);
        const token = mintSettingsToken(config.tokens.prefix);
        const record: SettingsTokenRecord = {
          id: `${SETTINGS_TOKEN_ID_PREFIX}${randomBase62(16)}`,
          name,
          digest: settingsTokenDigest(token),
          start: settingsTokenStart(token),
          scopes: [...new Set(scopes)],
          createdAt: new Date(now).toISOString(),
          ...(lifetime !== undefined ? { expiresAt: new Date(now + lifetime * 1000).toISOString() } : {}),
        };
        const events = [event({
          action: 'settings_token.create',
          target: { type: 'settings_token', id: record.id },
          changes: { name: [undefined, name], scopes: [undefined, record.scopes], expiresAt: [undefined, record.expiresAt] },
        })];
        const saved = await editAccount(store, actor.caller, accountId, (doc) => {
          const kept = doc.settingsTokens.filter((t) => endOf(t) > now - ENDED_TOKEN_KEPT_MS);
          if (kept.length >= MAX_SETTINGS_TOKENS) throw new Conflict(`An account holds at most ${MAX_SETTINGS_TOKENS} API settings tokens, counting those revoked or expired in the last 30 days.`);
          return { doc: { ...doc, settingsTokens: [...kept, record] }, events, result: undefined };
        });
        return { ...saved, result: { settingsToken: toSettingsTokenView(record, now), token } };
      },
    }),

    revoke: (actor, accountId, tokenId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (doc) => {
        const token = findToken(doc, tokenId);
        if (token.revokedAt !== undefined) return { events: [], result: toSettingsTokenView(token, now) };
        const next = { ...token, revokedAt: new Date(now).toISOString() };
        const events = [event({ action: 'settings_token.revoke', target: { type: 'settings_token', id: tokenId } })];
        return { doc: { ...doc, settingsTokens: doc.settingsTokens.map((t) => (t.id === tokenId ? next : t)) }, events, result: toSettingsTokenView(next, now) };
      }),
      async notify(view) {
        // Also for a token already revoked: a retried call after a failed reset must still make it.
        await revocations.reset({ accountId, keyId: tokenId });
        return view;
      },
    }),

    async revokeAllOf(accountId) {
      if (store.readOnly !== undefined) return;
      const account = await store.readAccount(accountId);
      if (account === undefined || account.deletedAt !== undefined || account.settingsTokens.every((t) => t.revokedAt !== undefined)) return;
      const now = clock.now();
      await store.updateAccount(accountId, (doc) => ({ doc: revokeSettingsTokens(doc, now), events: [], result: undefined }));
    },
  };
}

