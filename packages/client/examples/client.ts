/**
 * Every GatewayClient method and option, with the types the compiler must infer. Compiled by
 * `npm run typecheck` (tsconfig.examples.json), never run: a change to a public type that
 * breaks an application breaks this file first.
 */
import {
  GatewayClient, type CallOptions, type ClientOptions, type Credentials, type GatewayRequestInit, type RateLimitInfo,
  type RateLimitItem, type ResetResult, type RetryOptions, type Role, type RolesPage, type RolesQuery, type SignRecord,
  type TokenPair, type TokenStorage,
} from '@auth-gateway/client';
import { expectAssignable, type Equal, type Expect } from './assert-types.js';

// A server: the key and its secret; every option spelt out.
const memory: { pair?: TokenPair } = {};
const storage: TokenStorage = {
  load: () => memory.pair,
  save: (pair) => { memory.pair = pair; },
};
const asyncStorage: TokenStorage = {
  load: async () => undefined,
  save: async (pair: TokenPair | undefined) => { void pair; },
};
const retry: RetryOptions = { retries: 3, maxRetryAfterMs: 30_000, baseDelayMs: 200, maxDelayMs: 5_000 };
const options: ClientOptions = {
  baseUrl: new URL('https://gateway.example.com'),
  credentials: { apiKey: 'ak_…', apiSecret: 'sk_…' },
  storage,
  crossTabLock: false,
  lockName: 'my-app:gateway',
  renewBeforeMs: 10_000,
  timeoutMs: 5_000,
  retry,
  fetch: globalThis.fetch,
  onRateLimit: (info) => { expectAssignable<RateLimitInfo>(info); },
  onSessionExpired: (error) => { expectAssignable<Error>(error); },
  dangerouslyAllowBrowser: false,
};
const gateway = new GatewayClient(options);
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { settingsToken: 'gwst_…' }, retry: false, storage: asyncStorage });
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: '…' } });
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: '…', accessToken: 'eyJ…' } });
// DPoP: a new non-extractable key, or the application's CryptoKeyPair.
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: '…' }, dpop: true });
declare const keyPair: CryptoKeyPair;
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: '…' }, dpop: keyPair });

const controller = new AbortController();
const call: CallOptions = { signal: controller.signal, timeoutMs: 2_000, retry: { retries: 0 } };

type _baseUrl = Expect<Equal<typeof gateway.baseUrl, URL>>;
type _rateLimit = Expect<Equal<typeof gateway.rateLimit, RateLimitInfo | undefined>>;

const signedIn = await gateway.signIn(call);
type _signIn = Expect<Equal<typeof signedIn, void>>;
expectAssignable<string>(await gateway.accessToken({ timeoutMs: 1_000 }));

// GET /api/sign: the interface's exact shape.
const record = await gateway.sign('0x52908400098527886E0F7030069857D2E4169EE7', call);
type _record = Expect<Equal<typeof record, SignRecord>>;
expectAssignable<string>(record.did);
expectAssignable<number>(record.signedNonce);
expectAssignable<string>(record.signedAt);
expectAssignable<string>(record.signedExpiredAt);

// GET /api/roles: numeric id and public, string pages.
const query: RolesQuery = { page: 2, limit: 5, name: 'manager' };
const page = await gateway.roles(query, call);
type _page = Expect<Equal<typeof page, RolesPage>>;
type _pages = Expect<Equal<RolesPage['pages'], string>>;
type _items = Expect<Equal<RolesPage['items'], Role[]>>;
type _total = Expect<Equal<RolesPage['total'], number>>;
type _roleId = Expect<Equal<Role['id'], number>>;
type _rolePublic = Expect<Equal<Role['public'], 0 | 1>>;
await gateway.roles();
const pageCount: number = Number(page.pages);
void pageCount;

// Every role, page after page.
const every = gateway.allRoles({ name: 'admin', limit: 100 }, { signal: controller.signal });
type _every = Expect<Equal<typeof every, AsyncIterableIterator<Role>>>;
for await (const role of gateway.allRoles()) {
  expectAssignable<number>(role.id);
  expectAssignable<string>(role.slug);
  expectAssignable<string>(role.name);
  expectAssignable<string>(role.description);
}

// POST /api/reset.
const reset = await gateway.reset({ scope: 'account', timeoutMs: 3_000 });
type _reset = Expect<Equal<typeof reset, ResetResult>>;
expectAssignable<'key' | 'account'>(reset.scope);
expectAssignable<string | undefined>(reset.keyId);
await gateway.reset();

// Proxied routes: fetch's own types, plus the client's per-call options.
const init: GatewayRequestInit = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sku: 'A1' }), timeoutMs: 10_000, retry: false, signal: controller.signal };
const answer = await gateway.fetch('/orders', init);
type _answer = Expect<Equal<typeof answer, Response>>;
await gateway.fetch(new URL('https://gateway.example.com/orders/1'));
await gateway.fetch(new Request('https://gateway.example.com/orders/1', { method: 'DELETE' }));
await gateway.fetch('/uploads', { method: 'PUT', body: new ReadableStream<Uint8Array>(), duplex: 'half' } as GatewayRequestInit & { duplex: 'half' });
// client.fetch drops in where a fetch is expected.
const asFetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response> = gateway.fetch;
void asFetch;

await gateway.forget();

// RFC 7009: revoke one token; sign out (revoke the held pair, then forget it).
const revoked = await gateway.revoke('eyJ…', { tokenTypeHint: 'access_token', timeoutMs: 2_000 });
type _revoke = Expect<Equal<typeof revoked, void>>;
await gateway.revoke('…', { tokenTypeHint: 'refresh_token' });
const signedOut = await gateway.signOut(call);
type _signOut = Expect<Equal<typeof signedOut, void>>;

// The rate-limit fields.
const limits = gateway.rateLimit;
if (limits) {
  const item: RateLimitItem = limits.tightest;
  expectAssignable<string>(item.policy);
  expectAssignable<number>(item.remaining);
  expectAssignable<number>(item.resetSeconds);
  expectAssignable<number | undefined>(item.quota);
  expectAssignable<number | undefined>(item.windowSeconds);
  expectAssignable<RateLimitItem[]>(limits.items);
}

// The credentials union: exactly one of the three shapes.
const credentials: Credentials[] = [{ apiKey: 'a', apiSecret: 'b' }, { settingsToken: 'gwst_' }, { refreshToken: 'r' }];
void credentials;

// Misuse the compiler refuses.
// @ts-expect-error a key without its secret is no credential
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { apiKey: 'ak_…' } });
// @ts-expect-error the secret is apiSecret, not secret
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { apiKey: 'ak_…', secret: 'sk_…' } });
// @ts-expect-error credentials are required
new GatewayClient({ baseUrl: 'https://gateway.example.com' });
// @ts-expect-error dpop is true or a key, not a string
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: '…' }, dpop: 'ES256' });
// @ts-expect-error baseUrl is required
new GatewayClient({ credentials: { settingsToken: 'gwst_…' } });
// @ts-expect-error a storage needs save as well as load
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: 'r' }, storage: { load: () => undefined } });
// @ts-expect-error timeoutMs is a number of milliseconds
new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { refreshToken: 'r' }, timeoutMs: '5s' });
// @ts-expect-error the address is a string
await gateway.sign(123);
// @ts-expect-error sign needs an address
await gateway.sign();
// @ts-expect-error page is a number
await gateway.roles({ page: '1' });
// @ts-expect-error roles takes page, limit and name only
await gateway.roles({ offset: 10 });
// @ts-expect-error allRoles walks every page itself
gateway.allRoles({ page: 2 });
// @ts-expect-error scope is 'key' or 'account'
await gateway.reset({ scope: 'everything' });
// @ts-expect-error the hint is refresh_token or access_token
await gateway.revoke('…', { tokenTypeHint: 'id_token' });
// @ts-expect-error revoke needs the token
await gateway.revoke();
// @ts-expect-error a role's id is a number, not a string
const idAsText: string = page.items[0]!.id;
// @ts-expect-error public is 0 or 1, not a boolean
const isPublic: boolean = page.items[0]!.public;
// @ts-expect-error pages is a string, as the interface sends it
const pagesAsNumber: number = page.pages;
// @ts-expect-error the signal is an AbortSignal
await gateway.sign('0x…', { signal: controller });
// @ts-expect-error baseUrl cannot be reassigned
gateway.baseUrl = new URL('https://elsewhere.example.com');
void idAsText; void isPublic; void pagesAsNumber;
