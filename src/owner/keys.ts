/**
 * API keys of an account, and token resets. A key's secret is made here, shown once in the
 * answer that made it, and kept only as `secretDigest(hashSecret(secret))` (domain/secrets.ts),
 * the form /api/signin checks. Writing the account is what changes sign-in: every store keeps
 * the key directory it serves in step (state/owners/store.ts).
 *
 * Access tokens already issued are JWTs that no store is asked about, so whatever must stop
 * them (a disabled or deleted key, a reset) goes through the reset machinery
 * (auth/revocation.ts), which every instance hears at once. The reset comes after the write:
 * a key written disabled signs no one in any more, and only then are its tokens killed, so no
 * token can be issued between the two and outlive both.
 */
import { Conflict, NotFound } from '../errors/errors.js';
import { hashSecret, secretDigest } from '../domain/secrets.js';
import { randomBase62 } from '../domain/random.js';
import { DEFAULT_TOKEN_FAMILY, tokenPrefix } from '../domain/token-prefix.js';
import type { ApiKeyData } from '../state/owners/records.js';
import type { AccountDoc, OwnerStore } from '../state/owners/store.js';
import { loadAccount } from './access.js';
import type { OwnerDeps } from './deps.js';
import { pageById } from './pages.js';
import { createChangePipeline, editAccount, trail, type Change, type OwnerChange } from './pipeline.js';
import type { Actor, Caller, Page, PageQuery } from './types.js';

/** A key as the owner API shows it: never its secret or digest. */
export interface KeyView {
  id: string;
  apiKey: string;
  name: string;
  description: string;
  enabled: boolean;
  scopes: string[];
  createdAt?: string;
  /** While a roll's overlap lasts: until when the replaced secret still signs in. */
  previousValidUntil?: string;
  /** The key's last sign-in, to within a few minutes (auth/key-use.ts); absent while none is known. */
  lastUsedAt?: string;
  /** The client certificate the key is bound to (SHA-256, 64 lowercase hex digits); absent: unbound. */
  certificateSha256?: string;
  /** The key signs in and refreshes only with a DPoP proof (docs/dpop.md); absent: it need not. */
  requireDpop?: true;
  /** A secret-scanning report named the key's secret (docs/leaks.md): it signs in no more until its secret is rolled. */
  compromisedAt?: string;
}

export interface CreatedKey {
  key: KeyView;
  /** The new secret: in this answer only. */
  apiSecret: string;
}

export interface ResetView {
  scope: 'key' | 'account';
  accountId: string;
  keyId?: string;
  resetAt: string;
}

export interface NewKey {
  name: string;
  description?: string;
  scopes?: string[];
  /** Binds the key to one client certificate: its SHA-256 as 64 hex digits, either case, bytes may be separated by ":". */
  certificateSha256?: string;
  /** Sign-in and refresh only with a DPoP proof. */
  requireDpop?: boolean;
}

export interface KeyPatch {
  name?: string;
  description?: string;
  enabled?: boolean;
  scopes?: string[];
  /** As NewKey's; null unbinds the key. */
  certificateSha256?: string | null;
  /** true: sign-in and refresh only with a DPoP proof (the key's tokens issued so far stop); false: no longer required. */
  requireDpop?: boolean;
}

/** A fingerprint as the owner gives it (checked by the operation's schema) as keys keep it: lowercase, no ":". */
function normaliseSha256(fingerprint: string): string {
  return fingerprint.replaceAll(':', '').toLowerCase();
}

export interface KeyService {
  list(caller: Caller, accountId: string, page: PageQuery): Promise<Page<KeyView>>;
  create(actor: Actor, accountId: string, input: NewKey): Promise<CreatedKey>;
  get(caller: Caller, accountId: string, keyId: string): Promise<KeyView>;
  /** Disabling stops the key's access tokens at once; enabling again lets it sign in (old tokens stay dead). */
  update(actor: Actor, accountId: string, keyId: string, patch: KeyPatch): Promise<KeyView>;
  remove(actor: Actor, accountId: string, keyId: string): Promise<{ id: string; deleted: true }>;
  /** A new secret; the replaced one signs in for `overlapSeconds` more (0: not at all). */
  roll(actor: Actor, accountId: string, keyId: string, input: { overlapSeconds: number }): Promise<CreatedKey>;
  /** Every token issued so far to this key stops, as `POST /api/reset` with scope key. */
  resetKey(actor: Actor, accountId: string, keyId: string): Promise<ResetView>;
  /**
   * Every token of every key of the account stops, and every API settings token of it is
   * revoked for good (persisted: a reset is remembered for a limited time only).
   */
  resetAccount(actor: Actor, accountId: string): Promise<ResetView>;
}

/** The default family's prefixes (`tokens.prefix` makes others: domain/token-prefix.ts). */
export const API_KEY_PREFIX = tokenPrefix(DEFAULT_TOKEN_FAMILY, 'apiKey');
export const API_SECRET_PREFIX = tokenPrefix(DEFAULT_TOKEN_FAMILY, 'apiSecret');
export const KEY_ID_PREFIX = 'key_';
/** Keys an account holds at most: each change rewrites the account (the whole data file, or its Redis document). */
const MAX_KEYS = 1000;

function newSecret(family: string): { apiSecret: string; digest: string } {
  const apiSecret = `${tokenPrefix(family, 'apiSecret')}${randomBase62(43)}`;
  return { apiSecret, digest: secretDigest(hashSecret(apiSecret)) };
}

/** `lastUsedAt`: the key's last sign-in (state/key-use/store.ts), epoch ms. */
export function toKeyView(key: ApiKeyData, lastUsedAt?: number): KeyView {
  return {
    id: key.id,
    apiKey: key.apiKey,
    name: key.name ?? '',
    description: key.description ?? '',
    enabled: !key.disabled,
    scopes: [...key.scopes],
    ...(key.createdAt !== undefined ? { createdAt: key.createdAt } : {}),
    ...(key.previousValidUntil !== undefined && key.previousSecretDigest !== undefined ? { previousValidUntil: key.previousValidUntil } : {}),
    ...(lastUsedAt !== undefined ? { lastUsedAt: new Date(lastUsedAt).toISOString() } : {}),
    ...(key.certificateSha256 !== undefined ? { certificateSha256: key.certificateSha256 } : {}),
    ...(key.requireDpop === true ? { requireDpop: true } : {}),
    ...(key.compromisedAt !== undefined ? { compromisedAt: key.compromisedAt } : {}),
  };
}

function findKey(doc: AccountDoc, keyId: string): ApiKeyData {
  const key = doc.apiKeys.find((k) => k.id === keyId);
  if (key === undefined) throw new NotFound('No such key.');
  return key;
}

/** The audited fields of a key: what its events record before and after a change. */
function audited(key: ApiKeyData | undefined): Record<string, unknown> {
  return {
    name: key?.name, description: key?.description, enabled: key === undefined ? undefined : !key.disabled,
    scopes: key?.scopes, previousValidUntil: key?.previousValidUntil, certificateSha256: key?.certificateSha256, requireDpop: key?.requireDpop,
    compromisedAt: key?.compromisedAt,
  };
}

function changesOf(before: ApiKeyData | undefined, after: ApiKeyData | undefined): Record<string, [unknown, unknown]> {
  const was = audited(before);
  const now = audited(after);
  return Object.fromEntries(Object.keys(now).map((field) => [field, [was[field], now[field]]]));
}

export function createKeyService(deps: OwnerDeps): KeyService {
  const { store, keyUse } = deps;
  const change = createChangePipeline(deps);
  const lastUses = async (accountId: string) => keyUse?.read(accountId) ?? new Map<string, number>();
  return {
    async list(caller, accountId, page) {
      const doc = await loadAccount(store, caller, accountId);
      const used = await lastUses(accountId);
      return pageById(doc.apiKeys, page, (key) => toKeyView(key, used.get(key.id)));
    },

    async get(caller, accountId, keyId) {
      const key = findKey(await loadAccount(store, caller, accountId), keyId);
      return toKeyView(key, (await lastUses(accountId)).get(key.id));
    },

    ...createKeyChanges(deps, change),
    ...createResets(deps, change),
  };
}

/**
 * One change of one key with its event, as the pipeline runs it: `edit` gets a copy of the key
 * as stored now and answers the key to store (undefined: deleted).
 */
function keyChange<T>(store: OwnerStore, actor: Actor, accountId: string, keyId: string, action: string, edit: (key: ApiKeyData, now: number) => { key: ApiKeyData | undefined; result: T }): OwnerChange<AccountDoc, undefined, T, T> {
  return {
    load: () => loadAccount(store, actor.caller, accountId),
    persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (doc) => {
      const before = findKey(doc, keyId);
      const { key, result } = edit(structuredClone(before), now);
      const events = [event({ action, target: { type: 'key', id: keyId }, changes: changesOf(before, key) })];
      const apiKeys = key === undefined ? doc.apiKeys.filter((k) => k.id !== keyId) : doc.apiKeys.map((k) => (k.id === keyId ? key : k));
      return { doc: { ...doc, apiKeys }, events, result };
    }),
  };
}

function createKeyChanges({ store, revocations, config }: OwnerDeps, change: Change): Pick<KeyService, 'create' | 'update' | 'remove' | 'roll'> {
  return {
    create: (actor, accountId, { name, description, scopes = [], certificateSha256, requireDpop }) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      async persist({ now, event }) {
        const { apiSecret, digest } = newSecret(config.tokens.prefix);
        const key: ApiKeyData = {
          id: `${KEY_ID_PREFIX}${randomBase62(16)}`,
          apiKey: `${tokenPrefix(config.tokens.prefix, 'apiKey')}${randomBase62(24)}`,
          secretDigest: digest,
          disabled: false,
          scopes: [...new Set(scopes)],
          name,
          ...(description !== undefined && description !== '' ? { description } : {}),
          createdAt: new Date(now).toISOString(),
          ...(certificateSha256 !== undefined ? { certificateSha256: normaliseSha256(certificateSha256) } : {}),
          ...(requireDpop === true ? { requireDpop: true } : {}),
        };
        const events = [event({ action: 'key.create', target: { type: 'key', id: key.id }, changes: changesOf(undefined, key) })];
        const saved = await editAccount(store, actor.caller, accountId, (doc) => {
          if (doc.apiKeys.length >= MAX_KEYS) throw new Conflict(`An account holds at most ${MAX_KEYS} keys: delete some first.`);
          return { doc: { ...doc, apiKeys: [...doc.apiKeys, key] }, events, result: undefined };
        });
        return { ...saved, result: { key: toKeyView(key), apiSecret } };
      },
    }),

    update: (actor, accountId, keyId, patch) => change(actor, {
      ...keyChange(store, actor, accountId, keyId, 'key.update', (key) => {
        const next: ApiKeyData = { ...key };
        if (patch.name !== undefined) next.name = patch.name;
        if (patch.description !== undefined) next.description = patch.description;
        if (patch.enabled !== undefined) next.disabled = !patch.enabled;
        if (patch.scopes !== undefined) next.scopes = [...new Set(patch.scopes)];
        if (patch.certificateSha256 === null) delete next.certificateSha256;
        else if (patch.certificateSha256 !== undefined) next.certificateSha256 = normaliseSha256(patch.certificateSha256);
        if (patch.requireDpop === true) next.requireDpop = true;
        else if (patch.requireDpop === false) delete next.requireDpop;
        // A disabled key's tokens stop; so do those carrying a scope the key no longer grants,
        // and those bound to no certificate or another one once the key is bound to a new one.
        // Also when it was disabled already: a retry after a failed reset must still make it.
        const disabled = next.disabled && patch.enabled === false;
        const narrowed = key.scopes.some((scope) => !next.scopes.includes(scope));
        const rebound = next.certificateSha256 !== undefined && patch.certificateSha256 !== undefined;
        // Likewise the tokens it got without a proof once it requires DPoP (bound ones too: one reset).
        const dpopRequired = patch.requireDpop === true;
        return { key: next, result: { view: toKeyView(next), stopTokens: disabled || narrowed || rebound || dpopRequired } };
      }),
      async notify({ view, stopTokens }) {
        if (stopTokens) await revocations.reset({ accountId, keyId });
        return view;
      },
    }),

    remove: (actor, accountId, keyId) => change(actor, {
      ...keyChange(store, actor, accountId, keyId, 'key.delete', () => ({ key: undefined, result: undefined })),
      async notify() {
        await revocations.reset({ accountId, keyId });
        return { id: keyId, deleted: true as const };
      },
    }),

    roll(actor, accountId, keyId, { overlapSeconds }) {
      const { apiSecret, digest } = newSecret(config.tokens.prefix);
      return change(actor, {
        ...keyChange(store, actor, accountId, keyId, 'key.roll', (key, now) => {
          // A compromised key's secret is no secret (owner/leaks.ts): the roll clears the mark, and
          // what it replaces overlaps with nothing.
          const { previousSecretDigest: _digest, previousValidUntil: _until, compromisedAt, ...rest } = key;
          const next: ApiKeyData = overlapSeconds === 0 || compromisedAt !== undefined
            ? { ...rest, secretDigest: digest }
            : { ...rest, secretDigest: digest, previousSecretDigest: key.secretDigest, previousValidUntil: new Date(now + overlapSeconds * 1000).toISOString() };
          return { key: next, result: toKeyView(next) };
        }),
        notify: async (view) => ({ key: view, apiSecret }),
      });
    },
  };
}

/** Token resets: the reset itself is what every instance hears (auth/revocation.ts). */
function createResets({ store, revocations }: OwnerDeps, change: Change): Pick<KeyService, 'resetKey' | 'resetAccount'> {
  return {
    resetKey: (actor, accountId, keyId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      // The reset is the change: nothing of the account is written, the event goes with it.
      async persist({ loaded, event }) {
        findKey(loaded, keyId);
        const at = await revocations.reset({ accountId, keyId });
        const events = [event({ action: 'key.reset', target: { type: 'key', id: keyId } }, { at })];
        await store.appendAudit(accountId, events);
        return trail(accountId, events, { scope: 'key' as const, accountId, keyId, resetAt: new Date(at).toISOString() });
      },
    }),

    resetAccount: (actor, accountId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      // Persisted first: the reset below stops the tokens everywhere at once, but is itself
      // remembered only for a while, and a settings token lives longer.
      persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (doc) => ({
        doc: revokeSettingsTokens(doc, now),
        events: [event({ action: 'account.reset', target: { type: 'account', id: accountId } })],
        result: undefined,
      })),
      async notify() {
        const at = await revocations.reset({ accountId });
        return { scope: 'account' as const, accountId, resetAt: new Date(at).toISOString() };
      },
    }),
  };
}

/** The account with every settings token not yet revoked revoked at `now`. */
export function revokeSettingsTokens(doc: AccountDoc, now: number): AccountDoc {
  const at = new Date(now).toISOString();
  return { ...doc, settingsTokens: doc.settingsTokens.map((t) => (t.revokedAt === undefined ? { ...t, revokedAt: at } : t)) };
}
