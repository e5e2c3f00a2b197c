/**
 * Which limits a request is counted against, from `limits.*` in the config
 * (docs/rate-limits.md), and the subjects they count:
 *
 *   sign-in, token reset   attempts per address; failures per key+address, per address, per key
 *   owner sign-in          with a device cookie: failures per device; without: attempts per
 *                          address, failures per address (growing delays), per email
 *   operator token         failures per address, apart from every sign-in
 *   refresh                calls per token family (duplicates in the grace window given back), per address
 *   an authenticated route calls per account (and per key, per address where configured), per route
 *   a public route         calls per address, per route
 *   an owner's change      changes per owner, per account (owner API; reads are not counted)
 *
 * A guess at a secret is counted before it is checked, so parallel guesses cannot slip past a
 * limit; a success gives its attempt back (and ends the key+address run of failures), so only
 * failures accumulate. The longer windows of a failure limit are its growing lockout.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Identity } from '../auth/bearer.js';
import type { Config, QuotaRuleConfig, StoreFailurePolicy, WindowConfig } from '../config/schema.js';
import { TooManyRequests } from '../errors/errors.js';
import type { Check, Limit, LimitHeaders, Limiter } from './limiter.js';

export type { LimitHeaders } from './limiter.js';

/** A sign-in (or token reset) let through to the credential check; say how it went. */
export interface Attempt {
  /** The credentials were right: the attempt is not a failure. */
  succeeded(): Promise<void>;
  /** Neither right nor wrong (the check itself failed): the attempt is not a failure either. */
  undecided(): Promise<void>;
  /**
   * The credentials were right and authorise a call rather than a sign-in (an operator's admin
   * token on the owner API, presented with every call): nothing of the attempt is kept, the
   * per-address unit included, so an operator's own use never locks them out. Wrong tokens
   * still count in full, so guessing is stopped as before.
   */
  authorizedCall(): Promise<void>;
}

/** A refresh let through to the token store; say whether it turned out to be a duplicate. */
export interface RefreshAttempt {
  /** The RateLimit fields for the response (as counted when it arrived). */
  headers: LimitHeaders;
  /**
   * It was a duplicate inside the grace window, answered with the pair already minted: the
   * family's unit is given back, so duplicates never spend the family's limit (the address's
   * unit stays spent: every call from an address counts).
   */
  replayed(): Promise<void>;
}

export interface RateLimits {
  /** Before checking an API key's secret; throws TooManyRequests while it is locked out. */
  signIn(apiKey: string, address: string): Promise<Attempt>;
  /**
   * Before checking an owner's password (lowercase `email`); `device` is the id of a valid device
   * cookie for that email (owner/devices.ts), if one came. Throws TooManyRequests while locked out.
   */
  ownerSignIn(email: string, address: string, device: string | undefined): Promise<Attempt>;
  /** Before comparing an operator token on the owner API; throws TooManyRequests while the address is locked out. */
  adminToken(address: string): Promise<Attempt>;
  /** Before rotating a refresh token (`familyId` when the token names one); throws TooManyRequests over a limit. */
  refresh(familyId: string | undefined, address: string): Promise<RefreshAttempt>;
  /** Before serving an admitted call on a route (`identity` undefined on a public route). */
  route(route: RouteRef, identity: Identity | undefined, req: IncomingMessage): Promise<LimitHeaders>;
  /** Before an owner's change through the owner API (`accountId`: the account it changes, one the owner reaches); throws TooManyRequests over a limit. */
  ownerWrite(ownerId: string, accountId: string | undefined): Promise<LimitHeaders>;
  /**
   * Before a mail-based owner flow (a password reset asked for or completed): counted per address
   * (throws TooManyRequests over it) and, with `email` (lowercase), per email: answers false when
   * that email has had its share of mail, so the flow answers as ever and sends nothing. Nothing
   * here counts against sign-in, so no one locks an owner out with it.
   */
  ownerMail(email: string | undefined, address: string): Promise<boolean>;
}

/** What a route quota needs to know of a route: its name (own routes: `sign`, `roles`) and kind. */
export interface RouteRef {
  readonly name: string;
  readonly auth: 'required' | 'public';
}

/** The limits one route applies to one caller, and the cost of a call. */
interface Quota {
  account: Limit | undefined;
  key: Limit | undefined;
  address: Limit | undefined;
  cost: number;
}

export function createRateLimits(config: Config['limits'], limiter: Limiter, clientAddress: (req: IncomingMessage) => string): RateLimits {
  if (config.mode === 'off') return OFF;
  const limit = limitMaker(config);
  const limits = describeLimits(config, limit);
  const quotas = createQuotaTable(config, limit);

  return {
    signIn: (apiKey, address) => countSignIn(limiter, limits.signIn, apiKey, address),
    ownerSignIn: (email, address, device) => countOwnerSignIn(limiter, limits.ownerSignIn, email, address, device),
    adminToken: (address) => countAdminToken(limiter, limits.adminToken, address),
    refresh: (familyId, address) => countRefresh(limiter, limits.refresh, familyId, address),

    route(route, identity, req) {
      const quota = quotas(route, identity?.accountId);
      const checks: Check[] = [];
      if (identity !== undefined) {
        if (quota.account !== undefined) checks.push({ limit: quota.account, subject: `q:${route.name}:a:${bounded(identity.accountId)}`, cost: quota.cost });
        if (quota.key !== undefined) checks.push({ limit: quota.key, subject: `q:${route.name}:k:${bounded(identity.keyId)}`, cost: quota.cost });
      }
      if (quota.address !== undefined) checks.push({ limit: quota.address, subject: `q:${route.name}:ip:${bounded(clientAddress(req))}`, cost: quota.cost });
      return limiter.take(checks);
    },

    ownerWrite(ownerId, accountId) {
      const l = limits.ownerWrites;
      return limiter.take(present([
        check(l.owner, `ow:o:${bounded(ownerId)}`),
        accountId === undefined ? undefined : check(l.account, `ow:a:${bounded(accountId)}`),
      ]));
    },

    async ownerMail(email, address) {
      const l = limits.ownerMail;
      await limiter.take(present([check(l.address, `om:ip:${bounded(address)}`)]));
      if (email === undefined) return true;
      try {
        await limiter.take(present([check(l.email, `om:e:${bounded(email)}`)]));
        return true;
      } catch (err) {
        if (err instanceof TooManyRequests) return false;
        throw err;
      }
    },
  };
}

/** A Limit from a part of `limits.*`, or undefined when it has no window (not limited). */
function limitMaker(config: Config['limits']): MakeLimit {
  const everyDryRun = config.mode === 'dry-run';
  return (name, windows, policy, dryRun = false) =>
    windows.length === 0 ? undefined : {
      name,
      windows: windows.map((w) => ({ limit: w.limit, ms: w.seconds * 1000 })),
      policy: policy ?? config.onStoreFailure,
      dryRun: everyDryRun || dryRun,
    };
}

interface SignInLimits { address?: Limit; pair?: Limit; failedAddress?: Limit; failedKey?: Limit }
interface OwnerSignInLimits { address?: Limit; failedAddress?: Limit; failedEmail?: Limit; failedDevice?: Limit }
interface RefreshLimits { family?: Limit; address?: Limit }
interface OwnerWriteLimits { owner?: Limit; account?: Limit }
interface OwnerMailLimits { address?: Limit; email?: Limit }

/** Every limit but the route quotas (createQuotaTable), named as the metrics and headers name them. */
function describeLimits(config: Config['limits'], limit: MakeLimit) {
  const s = config.signIn;
  const o = config.ownerSignIn;
  return {
    signIn: {
      address: limit('signin-address', s.perAddress, s.onStoreFailure),
      pair: limit('signin-failures-key-address', s.failuresPerKeyAndAddress, s.onStoreFailure),
      failedAddress: limit('signin-failures-address', s.failuresPerAddress, s.onStoreFailure),
      failedKey: limit('signin-failures-key', s.failuresPerKey, s.onStoreFailure),
    } satisfies SignInLimits,
    ownerSignIn: {
      address: limit('owner-signin-address', o.perAddress, o.onStoreFailure),
      failedAddress: limit('owner-signin-failures-address', o.failuresPerAddress, o.onStoreFailure),
      failedEmail: limit('owner-signin-failures-email', o.failuresPerEmail, o.onStoreFailure),
      failedDevice: limit('owner-signin-failures-device', o.failuresPerDevice, o.onStoreFailure),
    } satisfies OwnerSignInLimits,
    adminToken: limit('admin-token-failures-address', config.adminToken.failuresPerAddress, config.adminToken.onStoreFailure),
    refresh: {
      family: limit('refresh-family', config.refresh.perFamily, config.refresh.onStoreFailure),
      address: limit('refresh-address', config.refresh.perAddress, config.refresh.onStoreFailure),
    } satisfies RefreshLimits,
    ownerWrites: {
      owner: limit('owner-writes-owner', config.owner.perOwner, config.owner.onStoreFailure),
      account: limit('owner-writes-account', config.owner.perAccount, config.owner.onStoreFailure),
    } satisfies OwnerWriteLimits,
    ownerMail: {
      address: limit('owner-mail-address', config.ownerMail.perAddress, config.ownerMail.onStoreFailure),
      email: limit('owner-mail-email', config.ownerMail.perEmail, config.ownerMail.onStoreFailure),
    } satisfies OwnerMailLimits,
  };
}

/** `RateLimits.signIn`. */
async function countSignIn(limiter: Limiter, l: SignInLimits, apiKey: string, address: string): Promise<Attempt> {
  // An apiKey nobody holds is counted like a real one: any difference in the counting would
  // show in the answers (a lockout or none) and tell which keys exist. What made-up keys
  // can store is bounded by the per-address failure limit, and each key name by `bounded`.
  const [ip, key] = [bounded(address), bounded(apiKey)];
  const checks = present([
    check(l.address, `si:ip:${ip}`),
    check(l.pair, `sf:ka:${ip}|${key}`),
    check(l.failedAddress, `sf:ip:${ip}`),
    check(l.failedKey, `sf:k:${key}`),
  ]);
  await limiter.take(checks);
  // A success or an undecided check is no failed guess: the failure counts get their unit
  // back, and a success ends the key+address run of failures altogether.
  const giveBack = async (clearRun: boolean, address = false) => {
    await Promise.all(checks.map((c) => {
      if (c.limit === l.pair && clearRun) return limiter.clear(c);
      return c.limit === l.address && !address ? undefined : limiter.refund(c);
    }));
  };
  return { succeeded: () => giveBack(true), undecided: () => giveBack(false), authorizedCall: () => giveBack(true, true) };
}

/** `RateLimits.ownerSignIn`. */
async function countOwnerSignIn(limiter: Limiter, l: OwnerSignInLimits, email: string, address: string, device: string | undefined): Promise<Attempt> {
  // OWASP's device cookies: an attempt from a device the owner signed in from before is
  // counted against that device alone, so strangers' failures (per email, per address: a
  // NAT shared with a guesser) never reach it; every other attempt is an untrusted client's,
  // slowed per address and, past the email's failure limit, locked out for that email.
  const checks = device !== undefined
    ? present([check(l.failedDevice, `ow:d:${bounded(device)}`)])
    : present([
      check(l.address, `ow:ip:${bounded(address)}`),
      check(l.failedAddress, `owf:ip:${bounded(address)}`),
      check(l.failedEmail, `owf:e:${bounded(email)}`),
    ]);
  await limiter.take(checks);
  // A success or an undecided check is no failed guess: its failure units are given back, and
  // a success ends the device's run of failures. The address's and the email's runs stay: a
  // guesser with an account of their own could clear them by signing in to it.
  const giveBack = async (clearRun: boolean) => {
    await Promise.all(checks.map((c) => {
      if (c.limit === l.address) return undefined;
      return c.limit === l.failedDevice && clearRun ? limiter.clear(c) : limiter.refund(c);
    }));
  };
  return { succeeded: () => giveBack(true), undecided: () => giveBack(false), authorizedCall: () => giveBack(true) };
}

/** `RateLimits.adminToken`. */
async function countAdminToken(limiter: Limiter, adminLimit: Limit | undefined, address: string): Promise<Attempt> {
  // Its own counter: wrong operator tokens from an address (a script with an old token behind
  // an office NAT) lock out operator tokens from there, never the owners' sign-in or API keys.
  const checks = present([check(adminLimit, `ad:ip:${bounded(address)}`)]);
  await limiter.take(checks);
  const giveBack = async () => {
    await Promise.all(checks.map((c) => limiter.refund(c)));
  };
  return { succeeded: giveBack, undecided: giveBack, authorizedCall: giveBack };
}

/** `RateLimits.refresh`. */
async function countRefresh(limiter: Limiter, l: RefreshLimits, familyId: string | undefined, address: string): Promise<RefreshAttempt> {
  const family = familyId === undefined ? undefined : check(l.family, `rf:f:${bounded(familyId)}`);
  const headers = await limiter.take(present([family, check(l.address, `rf:ip:${bounded(address)}`)]));
  return { headers, replayed: async () => { if (family !== undefined) await limiter.refund(family); } };
}

/** RateLimits whose rules a reload replaces (services.ts): each call is decided by the set in force when it starts. */
export interface ReplaceableRateLimits extends RateLimits {
  replace(next: RateLimits): void;
}

export function createReplaceableRateLimits(initial: RateLimits): ReplaceableRateLimits {
  let current = initial;
  return {
    signIn: (apiKey, address) => current.signIn(apiKey, address),
    ownerSignIn: (email, address, device) => current.ownerSignIn(email, address, device),
    adminToken: (address) => current.adminToken(address),
    refresh: (familyId, address) => current.refresh(familyId, address),
    route: (route, identity, req) => current.route(route, identity, req),
    ownerWrite: (ownerId, accountId) => current.ownerWrite(ownerId, accountId),
    ownerMail: (email, address) => current.ownerMail(email, address),
    replace(next) {
      current = next;
    },
  };
}

/** A route call's answer while limits are off: one settled promise for every call, nothing allocated. */
const NO_LIMIT: Promise<LimitHeaders> = Promise.resolve(undefined);

const UNCOUNTED: Attempt = { succeeded: async () => {}, undecided: async () => {}, authorizedCall: async () => {} };

const OFF: RateLimits = {
  signIn: async () => UNCOUNTED,
  ownerSignIn: async () => UNCOUNTED,
  adminToken: async () => UNCOUNTED,
  refresh: async () => ({ headers: undefined, replayed: async () => {} }),
  route: () => NO_LIMIT,
  ownerWrite: () => NO_LIMIT,
  ownerMail: async () => true,
};

/** True for the limits of `limits.mode` "off": every route call admitted, without headers. */
export function limitsAreOff(limits: RateLimits): boolean {
  return limits === OFF;
}

/** Longest part of a subject kept as it came (the 45 characters of an IPv6 address fit). */
const MAX_SUBJECT_PART = 64;

/**
 * A part of a subject that a client chooses (an apiKey, a family id, an address), bounded: kept
 * as it is up to MAX_SUBJECT_PART characters, else replaced by `#` and the base64url SHA-256 of
 * it (44 characters), so a counter's key name stays short whatever a client sends. A part that
 * itself starts with `#` is digested too, so a raw part never reads as another one's digest.
 */
function bounded(part: string): string {
  if (part.length <= MAX_SUBJECT_PART && !part.startsWith('#')) return part;
  return `#${createHash('sha256').update(part, 'utf8').digest('base64url')}`;
}

function check(limit: Limit | undefined, subject: string): Check | undefined {
  return limit === undefined ? undefined : { limit, subject, cost: 1 };
}

function present(checks: (Check | undefined)[]): Check[] {
  return checks.filter((c): c is Check => c !== undefined);
}

type MakeLimit = (name: string, windows: readonly WindowConfig[], policy: StoreFailurePolicy | undefined, dryRun?: boolean) => Limit | undefined;

/**
 * The quota of a route for an account: the first rule naming this route (or none) and this
 * account (or none), its windows in place of the defaults it leaves out. Each route's quotas
 * are resolved when its first request comes, so a request costs two map lookups.
 */
function createQuotaTable(config: Config['limits'], limit: MakeLimit): (route: RouteRef, accountId: string | undefined) => Quota {
  const { rules } = config;

  function build(route: RouteRef, rule: QuotaRuleConfig | undefined): Quota {
    const dryRun = rule?.dryRun ?? false;
    const cost = rule?.cost ?? 1;
    if (route.auth === 'public') {
      return { account: undefined, key: undefined, address: limit(`${route.name}-address`, rule?.perAddress ?? config.public.perAddress, config.public.onStoreFailure, dryRun), cost };
    }
    const policy = config.calls.onStoreFailure;
    return {
      account: limit(`${route.name}-account`, rule?.perAccount ?? config.calls.perAccount, policy, dryRun),
      key: limit(`${route.name}-key`, rule?.perKey ?? config.calls.perKey, policy, dryRun),
      address: limit(`${route.name}-address`, rule?.perAddress ?? [], policy, dryRun),
      cost,
    };
  }

  /** Per route: the quota of each account a rule names before the first rule for any account, and everyone else's. */
  const plans = new Map<string, { named: Map<string, Quota>; any: Quota }>();
  function planOf(route: RouteRef) {
    const named = new Map<string, Quota>();
    for (const rule of rules) {
      if (rule.route !== undefined && rule.route !== route.name) continue;
      if (rule.account === undefined) return { named, any: build(route, rule) };
      if (!named.has(rule.account)) named.set(rule.account, build(route, rule));
    }
    return { named, any: build(route, undefined) };
  }

  return (route, accountId) => {
    let plan = plans.get(route.name);
    if (plan === undefined) {
      plan = planOf(route);
      plans.set(route.name, plan);
    }
    return (accountId === undefined ? undefined : plan.named.get(accountId)) ?? plan.any;
  };
}
