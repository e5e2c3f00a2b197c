/**
 * The owner's own second-factor operations (owner/second-factor.ts says how sign-in uses them):
 * enroll TOTP, turn it off, new recovery codes, register and remove passkeys, and an account's
 * requirement that its owners use one. Each change runs through the change pipeline; the
 * owner's changes are audited in every account they manage (owner.totp_enable, …), the
 * requirement in its account (account.update, `requireSecondFactor`).
 */
import type { PublicKeyCredentialCreationOptionsJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { Conflict, NotFound, SecondFactorRequired } from '../errors/errors.js';
import type { AuditEvent, OwnerRecord } from '../state/owners/records.js';
import { loadAccount, requireOperator, requireWritable } from './access.js';
import type { OwnerDeps } from './deps.js';
import { passkeyView, removePasskey, type PasskeyView, type RelyingParty } from './passkeys.js';
import { createChangePipeline, editAccount, type AuditTrail, type Persisted } from './pipeline.js';
import { countedFactor, issuerName, wrongCode, type SecondFactorGate } from './second-factor.js';
import { confirmPending, newEnrollment, newRecoveryCodes, useTotpOrRecoveryCode, type TotpEnrollment } from './totp.js';
import type { Actor, Caller } from './types.js';

type OwnerActor = Actor & { caller: Extract<Caller, { kind: 'owner' }> };

export interface SecondFactorsView {
  totp: { enabled: boolean; enabledAt?: string };
  recoveryCodesLeft: number;
  passkeys: PasskeyView[];
  /** The owner must use a second factor (an account's or the deployment's requirement). */
  required: boolean;
}

export interface FactorService {
  describe(caller: Extract<Caller, { kind: 'owner' }>): Promise<SecondFactorsView>;
  /** A new pending secret (replacing one pending); Conflict while TOTP is on. */
  startTotp(actor: OwnerActor): Promise<TotpEnrollment>;
  /** Turns TOTP on with a code of the pending secret; answers the recovery codes (shown once). */
  confirmTotp(actor: OwnerActor, code: string): Promise<{ recoveryCodes: string[] }>;
  /** Turns TOTP off (and drops the recovery codes), with a current code or a recovery code. */
  disableTotp(actor: OwnerActor, code: string): Promise<SecondFactorsView>;
  /** New recovery codes for old ones, with a current code or a recovery code. */
  regenerateRecoveryCodes(actor: OwnerActor, code: string): Promise<{ recoveryCodes: string[] }>;
  startPasskeyRegistration(actor: OwnerActor, rp: RelyingParty): Promise<{ ceremonyId: string; options: PublicKeyCredentialCreationOptionsJSON }>;
  finishPasskeyRegistration(actor: OwnerActor, rp: RelyingParty, answer: { ceremonyId: string; name: string; response: RegistrationResponseJSON }): Promise<PasskeyView>;
  removePasskey(actor: OwnerActor, passkeyId: string): Promise<void>;
  getAccountRequirement(caller: Caller, accountId: string): Promise<{ required: boolean }>;
  /**
   * An operator's: drops every second factor of a member of the account (TOTP, its recovery
   * codes, passkeys), for an owner who lost them all. Audited as owner.totp_disable and
   * owner.passkey_remove by the operator.
   */
  resetMemberFactors(actor: Actor, accountId: string, ownerId: string): Promise<{ ownerId: string; reset: true }>;
  /** The account's requirement that every owner of it use a second factor. */
  setAccountRequirement(actor: Actor, accountId: string, required: boolean): Promise<{ required: boolean }>;
}

/** What the parts of the factor service share. */
interface FactorKit {
  deps: OwnerDeps;
  gate: SecondFactorGate;
  change: ReturnType<typeof createChangePipeline>;
  loadOwner(ownerId: string): Promise<OwnerRecord>;
  /** The owner's own change, recorded in each account they manage (as a password change is). */
  auditInAccounts<S>(ownerId: string, events: AuditEvent[], result: S): Promise<Persisted<S>>;
  /** A signed-in owner's code, counted against the owner's own subject (no stranger reaches it). */
  checkCode(actor: OwnerActor, owner: OwnerRecord, code: string): Promise<unknown>;
  describe: FactorService['describe'];
}

export function createFactorService(deps: OwnerDeps, gate: SecondFactorGate): FactorService {
  const kit = createFactorKit(deps, gate);
  return { describe: kit.describe, ...totpChanges(kit), ...passkeyChanges(kit), ...requirementChanges(kit) };
}

function createFactorKit(deps: OwnerDeps, gate: SecondFactorGate): FactorKit {
  const { store, clock, limits } = deps;
  const loadOwner = async (ownerId: string): Promise<OwnerRecord> => {
    const owner = await store.findOwner(ownerId);
    if (owner === undefined) throw new NotFound();
    return owner;
  };
  return {
    deps,
    gate,
    change: createChangePipeline(deps),
    loadOwner,
    async auditInAccounts(ownerId, events, result) {
      const audited: AuditTrail[] = [];
      for (const accountId of await store.accountsOf(ownerId)) {
        await store.appendAudit(accountId, events);
        audited.push({ accountId, events });
      }
      return { audited, result };
    },
    checkCode: (actor, owner, code) => countedFactor(
      limits,
      { email: owner.email, ip: actor.meta.ip, device: `owner:${owner.id}|2f` },
      () => useTotpOrRecoveryCode(store, gate.box, owner, code, clock.now()).catch((err: unknown) => {
        throw err instanceof SecondFactorRequired ? wrongCode() : err;
      }),
    ),
    async describe(caller) {
      const owner = await loadOwner(caller.ownerId);
      return {
        totp: owner.totp === undefined ? { enabled: false } : { enabled: true, enabledAt: owner.totp.enabledAt },
        recoveryCodesLeft: owner.recoveryCodes?.length ?? 0,
        passkeys: (owner.passkeys ?? []).map(passkeyView),
        required: await gate.isRequired(owner),
      };
    },
  };
}

function totpChanges({ deps, gate, change, loadOwner, auditInAccounts, checkCode, describe }: FactorKit): Pick<FactorService, 'startTotp' | 'confirmTotp' | 'disableTotp' | 'regenerateRecoveryCodes'> {
  const { store, clock, limits, config } = deps;
  const issuer = issuerName(config.owner.publicOrigin);
  return {
    startTotp: (actor) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      apply: (owner) => newEnrollment(owner.email, issuer),
      async persist({ prepared, now }) {
        await store.updateOwner(actor.caller.ownerId, (current) => {
          if (current.totp !== undefined) throw new Conflict('TOTP is on already: turn it off first to enroll another authenticator.');
          return { owner: { ...current, pendingTotp: { secret: gate.box.seal(prepared.secret, current.id), startedAt: new Date(now).toISOString() } }, result: undefined };
        });
        return { audited: [], result: prepared };
      },
    }),

    confirmTotp: (actor, code) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      // The code and the pending secret are checked in the store change that turns TOTP on
      // (totp.ts confirmPending), so two confirmations cannot both win; the audit follows.
      apply: (owner) => countedFactor(limits, { email: owner.email, ip: actor.meta.ip, device: `owner:${owner.id}|2f` }, async () => {
        const confirmed = await confirmPending(store, gate.box, owner.id, code, clock.now());
        if (confirmed === undefined) throw wrongCode();
        return confirmed;
      }),
      persist: ({ prepared, event }) => auditInAccounts(actor.caller.ownerId, [event({ action: 'owner.totp_enable', target: { type: 'owner', id: actor.caller.ownerId } })], { recoveryCodes: prepared.codes }),
    }),

    disableTotp: (actor, code) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      apply: async (owner) => {
        if (owner.totp === undefined) throw new Conflict('TOTP is not on.');
        await checkCode(actor, owner, code);
      },
      async persist({ event }) {
        await store.updateOwner(actor.caller.ownerId, (current) => {
          const { totp: _totp, recoveryCodes: _codes, pendingTotp: _pending, ...rest } = current;
          return { owner: rest, result: undefined };
        });
        return auditInAccounts(actor.caller.ownerId, [event({ action: 'owner.totp_disable', target: { type: 'owner', id: actor.caller.ownerId } })], undefined);
      },
      notify: () => describe(actor.caller),
    }),

    regenerateRecoveryCodes: (actor, code) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      apply: async (owner) => {
        if (owner.totp === undefined) throw new Conflict('Recovery codes come with TOTP: turn it on first.');
        await checkCode(actor, owner, code);
        return newRecoveryCodes();
      },
      async persist({ prepared, event }) {
        await store.updateOwner(actor.caller.ownerId, (current) => ({ owner: { ...current, recoveryCodes: prepared.digests }, result: undefined }));
        return auditInAccounts(actor.caller.ownerId, [event({ action: 'owner.recovery_codes_regenerate', target: { type: 'owner', id: actor.caller.ownerId } })], { recoveryCodes: prepared.codes });
      },
    }),

  };
}

function passkeyChanges({ deps: { store }, gate, change, loadOwner, auditInAccounts }: FactorKit): Pick<FactorService, 'startPasskeyRegistration' | 'finishPasskeyRegistration' | 'removePasskey'> {
  return {
    async startPasskeyRegistration(actor, rp) {
      // Nothing is written yet, but the passkey could never be stored: refused before the ceremony.
      requireWritable(store);
      return gate.ceremonies.startRegistration(await loadOwner(actor.caller.ownerId), rp);
    },

    finishPasskeyRegistration: (actor, rp, answer) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      apply: (owner) => gate.ceremonies.finishRegistration(owner, rp, answer),
      async persist({ prepared, event }) {
        await store.updateOwner(actor.caller.ownerId, (current) => {
          const passkeys = current.passkeys ?? [];
          if (passkeys.some((p) => p.id === prepared.id)) throw new Conflict('This passkey is registered already.');
          return { owner: { ...current, passkeys: [...passkeys, prepared] }, result: undefined };
        });
        const added = event({ action: 'owner.passkey_add', target: { type: 'passkey', id: prepared.id.slice(0, 256) }, changes: { name: [null, prepared.name] } });
        return auditInAccounts(actor.caller.ownerId, [added], passkeyView(prepared));
      },
    }),

    removePasskey: (actor, passkeyId) => change(actor, {
      load: () => loadOwner(actor.caller.ownerId),
      async persist({ event }) {
        const removed = await removePasskey(store, actor.caller.ownerId, passkeyId);
        const events = [event({ action: 'owner.passkey_remove', target: { type: 'passkey', id: removed.id.slice(0, 256) }, changes: { name: [removed.name, null] } })];
        return auditInAccounts(actor.caller.ownerId, events, undefined);
      },
    }),

  };
}

function requirementChanges({ deps: { store }, change, auditInAccounts }: FactorKit): Pick<FactorService, 'getAccountRequirement' | 'setAccountRequirement' | 'resetMemberFactors'> {
  return {
    resetMemberFactors: (actor, accountId, ownerId) => change(actor, {
      async load() {
        const account = await loadAccount(store, actor.caller, accountId);
        if (!account.members.some((m) => m.ownerId === ownerId)) throw new NotFound('No such member.');
      },
      authorize: () => requireOperator(actor.caller),
      async persist({ event }) {
        const before = await store.updateOwner(ownerId, (current) => {
          const { totp: _totp, recoveryCodes: _codes, pendingTotp: _pending, passkeys: _passkeys, ...rest } = current;
          return { owner: rest, result: current };
        });
        const events = [
          ...(before.totp === undefined ? [] : [event({ action: 'owner.totp_disable', target: { type: 'owner', id: ownerId } })]),
          ...(before.passkeys ?? []).map((p) => event({ action: 'owner.passkey_remove', target: { type: 'passkey', id: p.id.slice(0, 256) }, changes: { name: [p.name, null] } })),
        ];
        return events.length === 0 ? { audited: [], result: { ownerId, reset: true as const } } : auditInAccounts(ownerId, events, { ownerId, reset: true as const });
      },
    }),

    getAccountRequirement: async (caller, accountId) => ({ required: (await loadAccount(store, caller, accountId)).requireSecondFactor === true }),

    setAccountRequirement: (actor, accountId, required) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      persist: ({ event }) => editAccount(store, actor.caller, accountId, (current) => {
        const before = current.requireSecondFactor === true;
        if (before === required) return { events: [], result: { required } };
        const changes = { requireSecondFactor: [before, required] } satisfies Record<string, [unknown, unknown]>;
        return { doc: { ...current, requireSecondFactor: required }, events: [event({ action: 'account.update', target: { type: 'account', id: accountId }, changes })], result: { required } };
      }),
    }),
  };
}
