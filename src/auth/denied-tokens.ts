/**
 * Revoked access tokens refused on every call (RFC 7009 §2: "the token [is] invalidated
 * immediately"): every instance keeps the whole deny list (state/denylist/) in memory, so the
 * bearer check (auth/bearer.ts) asks a Map per request, hit or miss of the verified-token cache,
 * and no store at all. An entry is a token's `jti`, or `sid:<sid>` for every access token of a
 * revoked refresh family (auth/token-revocation.ts).
 *
 * The list is read whole from the store whenever its notices may have been missed: when Redis
 * first confirms the subscription (reported as a gap: nothing was heard before it) and after
 * every later gap; between reads, each revocation made anywhere arrives as a notice (Redis
 * pub/sub: within a round trip, well inside the 1 s the docs promise). In memory the store is
 * this process's, and its listeners are called at once. An entry leaves at its token's `exp`
 * (plus clock skew), when the signature check refuses the token anyway.
 *
 * A revocation is recorded here as soon as the store confirms it, so this instance refuses the
 * token from its answer on, whenever its own notice comes back. While the list cannot be read
 * (Redis down at start), the tokens revoked before are accepted, as a reset is in that outage
 * (docs/redis.md); the read is tried again with each gap and on the next revocation heard.
 * test/http/revoke.test.ts and test/redis/revocation-instances.test.ts hold it.
 */
import type { DeniedToken, DenyOutcome, TokenDenylist } from '../state/denylist/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';

/** The deny list's entry for every access token of a sign-in session (`sid`): jtis hold no `:`. */
export function sessionEntry(sid: string): string {
  return `sid:${sid}`;
}

export interface DeniedTokens {
  /**
   * True when the token with this `jti`, or every token of its session (`sid`, its refresh
   * family's: the family was revoked), was revoked and has not expired. Synchronous: Map look-ups.
   */
  isDenied(jti: string, sid?: string): boolean;
  /** Revokes the token (a jti, or a `sessionEntry`) until `expiresAt` (epoch ms), on every instance. */
  deny(entry: string, expiresAt: number): Promise<DenyOutcome>;
  /** Reads the whole list from the store (done by itself on each gap in the notices). Never rejects. */
  load(): Promise<void>;
  /** Told of each entry this instance learns of (for what holds a token open: a WebSocket asks isDenied again). */
  watch(listener: (entry: string) => void): void;
}

export function createDeniedTokens({ store, clock, log }: { store: TokenDenylist; clock: Clock; log: Logger }): DeniedTokens {
  const denied = new Map<string, number>();
  const listeners: ((entry: string) => void)[] = [];
  let sweepAt = 0;
  const add = ({ jti, expiresAt }: DeniedToken) => {
    const known = denied.get(jti);
    if (expiresAt > (known ?? 0)) denied.set(jti, expiresAt);
    if (known === undefined) for (const listener of listeners) listener(jti);
  };
  // Entries past their expiry are swept at most once a minute, by a look-up: no timer.
  const sweep = (now: number) => {
    if (now < sweepAt) return;
    sweepAt = now + 60_000;
    for (const [jti, expiresAt] of denied) if (expiresAt <= now) denied.delete(jti);
  };
  /**
   * False from a failed read until one succeeds. A failed read is tried again, after 0.5 s and
   * then twice as long each time up to 30 s, and by the next notice heard: the subscription can
   * be confirmed before the command connection is (at start-up), and without another notice a
   * list read then would never be read again. The first failure is only a debug line (that
   * start-up race); a second in a row is the warning.
   */
  let complete = true;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;
  const load = async () => {
    try {
      for (const token of await store.list(clock.now())) add(token);
      complete = true;
      failures = 0;
    } catch (err) {
      complete = false;
      failures += 1;
      const message = err instanceof Error ? err.message : String(err);
      if (failures === 1) log.debug({ err: message }, 'could not read the revoked access tokens yet: trying again');
      else log.warn({ err: message }, 'could not read the revoked access tokens: tokens revoked before are accepted until it can');
      if (retry === undefined) {
        retry = setTimeout(() => { retry = undefined; if (!complete) void load(); }, Math.min(30_000, 500 * 2 ** (failures - 1)));
        retry.unref();
      }
    }
  };
  store.watch({
    onDenied(token) {
      add(token);
      if (!complete) void load();
    },
    onGap: () => void load(),
  });

  return {
    isDenied(jti, sid) {
      if (denied.size === 0) return false;
      const now = clock.now();
      sweep(now);
      const expiresAt = denied.get(jti) ?? (sid === undefined ? undefined : denied.get(sessionEntry(sid)));
      return expiresAt !== undefined && expiresAt > now;
    },
    async deny(jti, expiresAt) {
      const outcome = await store.deny({ jti, expiresAt }, clock.now());
      if (outcome !== 'full') add({ jti, expiresAt });
      return outcome;
    },
    load,
    watch(listener) {
      listeners.push(listener);
    },
  };
}
