/**
 * Every setting of the gateway, in one place: type, default, environment name and one line of
 * documentation. The `Config` type is inferred from this schema and never written twice; the
 * settings table in docs/configuration.md is checked against `describeSettings()` by
 * test/unit/config-docs.test.ts.
 *
 * Unknown keys are errors (a misspelt setting must not be silently ignored), and every problem
 * is reported with its path by load.ts before the process listens.
 */
import { pathToRegexp } from 'path-to-regexp';
import { z } from 'zod';
import { SCOPE_PATTERN } from '../domain/formats.js';
import { DEFAULT_TOKEN_FAMILY, TOKEN_FAMILY_PATTERN } from '../domain/token-prefix.js';

/** Metadata attached to a leaf setting: its doc line and, where operators need one, an env name. */
export interface SettingMeta {
  description: string;
  env?: string;
  /** true for values that must never be printed (config dumps redact them). */
  secret?: boolean;
  /** A list whose environment value may be comma-separated (`a,b`) as well as a JSON array. */
  list?: 'comma';
}

function setting<T extends z.ZodType>(schema: T, meta: SettingMeta): T {
  return schema.meta(meta as unknown as Record<string, unknown>) as T;
}

const seconds = () => z.number().int().positive();
/** A name that goes into key ids, Redis key names and log lines as it is. */
const plainName = (maxLength: number) => z.string().min(1).max(maxLength).regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" or "-"');
const hostPort = z.string().regex(/^[^:\s]+:\d{1,5}$/, 'expected "host:port"');

export const SIGNING_ALGORITHMS = ['EdDSA', 'ES256', 'ES384', 'PS256', 'RS256'] as const;

const signingKeySchema = z.strictObject({
  kid: plainName(128),
  alg: z.enum(SIGNING_ALGORITHMS),
  /** PEM text: a PKCS#8 private key (signs and verifies) or an SPKI public key (verifies only). */
  pem: z.string().min(1).optional(),
  /** Path to a PEM file, the alternative to `pem`. */
  pemFile: z.string().min(1).optional(),
}).refine((k) => (k.pem === undefined) !== (k.pemFile === undefined), {
  message: 'exactly one of "pem" or "pemFile" is required',
});

/**
 * Algorithms a trusted issuer's tokens may use: asymmetric only. `none` and the HMAC family are
 * never accepted (an HS* token "signed" with an issuer's public key is the classic confusion).
 */
export const ISSUER_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;
/** A route's name for the gateway's own tokens in its `issuers`. */
/** What a DPoP proof may be signed with (RFC 9449 §4.2: asymmetric only; `none` and MACs never). */
export const DPOP_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'] as const;

export const SELF_ISSUER = 'self';
const claimName = z.string().min(1).max(256);

/** One trusted token issuer (docs/identity-providers.md): whose access tokens routes that name it accept. */
const trustedIssuerSchema = z.strictObject({
  issuer: z.string().min(1).max(512).refine((u) => /^https?:\/\/[^\s]+$/.test(u) && URL.canParse(u) && new URL(u).username === '' && !/[?#]/.test(u),
    'expected the issuer URL exactly as its tokens\' `iss` spells it (http(s), no credentials, query or fragment)'),
  audience: z.string().min(1).max(512),
  jwksUri: z.url({ protocol: /^https?$/ }).optional(),
  algorithms: z.array(z.enum(ISSUER_ALGORITHMS)).min(1).default(['RS256', 'PS256', 'ES256', 'EdDSA']),
  accountClaim: claimName.default('sub'),
  scopeClaim: claimName.default('scope'),
  rolesClaim: claimName.optional(),
  audienceClaim: claimName.default('aud'),
  requiredClaims: z.array(claimName).max(32).default([]),
  tokenType: z.string().regex(/^[A-Za-z0-9.+/-]{1,64}$/, 'expected a media type such as "at+jwt"').optional(),
});

const HEADER_NAME = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, 'expected an HTTP header name');
const IDENTITY_PARTS = ['account', 'key', 'token', 'request', 'scopes', 'roles'] as const;
/** What a route sends unless it says otherwise; `scopes` and `roles` are asked for by name. */
const DEFAULT_IDENTITY_PARTS: readonly IdentityPart[] = ['account', 'key', 'token', 'request'];

/** The methods a rule may name: those the gateway serves (TRACE is refused before any rule). */
export const RULE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** A token claim's name: printable ASCII without space (`email`, `https://example.com/tenant`). */
const CLAIM_NAME = z.string().regex(/^[\x21-\x7e]{1,256}$/, 'expected a claim name (printable ASCII, no space)');
const CLAIM_VALUE = z.union([z.string().max(1024), z.number(), z.boolean()]);
const SOURCE = z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()]);
/** Header names a route cannot fill from claims: the gateway's own framing, forwarding and credentials. */
const RESERVED_HEADERS: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive',
  'proxy-connection', 'te', 'trailer', 'upgrade', 'expect', 'proxy-authenticate', 'proxy-authorization', 'authorization', 'cookie',
  'forwarded', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'x-real-ip', 'traceparent', 'tracestate']);
/** The metric label of a request no rule allowed: no rule may take it as its name. */
export const NO_RULE = 'none';

/**
 * One rule of a route's `allow` list (docs/policies.md): every selector it names must match,
 * and one it leaves out matches anything. Compiled once per route table (proxy/policy.ts).
 */
const ruleSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" or "-"').refine((n) => n !== NO_RULE, `"${NO_RULE}" names the requests no rule allowed`).optional(),
  methods: z.array(z.enum(RULE_METHODS)).min(1).optional(),
  /** Parsed here; checked against the route's prefix in routeSchema's refinement (it needs the prefix). */
  paths: z.array(z.string().min(1).max(1024).superRefine(refinePathPattern)).min(1).max(64).optional(),
  scopes: z.array(z.string().regex(SCOPE_PATTERN, 'expected one scope token')).min(1).max(64).optional(),
  anyScopes: z.array(z.string().regex(SCOPE_PATTERN, 'expected one scope token')).min(1).max(64).optional(),
  roles: z.array(z.string().min(1).max(256)).min(1).max(64).optional(),
  claims: z.record(CLAIM_NAME, z.union([CLAIM_VALUE, z.array(CLAIM_VALUE).min(1).max(64)])).optional(),
  accounts: z.array(z.string().min(1).max(256)).min(1).max(1024).optional(),
  sources: z.array(SOURCE).min(1).max(256).optional(),
});
/** The selectors that need a caller: a public route's rules cannot name them. */
const CALLER_SELECTORS = ['scopes', 'anyScopes', 'roles', 'claims', 'accounts'] as const;

/**
 * One proxied route. Documented field by field in docs/proxying.md; the defaults are the
 * careful ones: authentication required, the caller's Authorization removed, the backend's
 * own Host name sent, every identity header sent.
 */
const routeSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" or "-"').optional(),
  prefix: z.string().regex(/^\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]+(?:\/[A-Za-z0-9\-._~!$&'()*+,;=:@]+)*)?$/,
    'expected "/" or "/segment[/segment…]" without "//", a trailing "/", or percent-escapes')
    .refine((p) => !p.split('/').some((seg) => seg === '.' || seg === '..'), 'must not contain "." or ".." segments'),
  targets: z.array(z.url({ protocol: /^https?$/, normalize: true })
    .refine((u) => !/[?#]/.test(u) && new URL(u).username === '', 'a target is scheme://host[:port][/base path], without credentials, query or fragment'))
    // None: a decision-only route, asked through /api/forward-auth and never proxied (docs/forward-auth.md).
    .default([]),
  auth: z.enum(['required', 'public']).default('required'),
  stripPrefix: z.boolean().default(false),
  host: z.enum(['target', 'preserve']).default('target'),
  forwardAuthorization: z.boolean().default(false),
  identity: z.array(z.enum(IDENTITY_PARTS)).default([...DEFAULT_IDENTITY_PARTS]),
  /** Whose tokens the route accepts: "self" (the gateway's own) and trusted issuers by their `issuer`. */
  issuers: z.array(z.string().min(1).max(512)).min(1).max(16).default([SELF_ISSUER]),
  assertion: z.boolean().default(false),
  requiredScope: z.string().regex(SCOPE_PATTERN, 'expected one scope token').optional(),
  allow: z.array(ruleSchema).max(256).optional(),
  allowMode: z.enum(['enforce', 'report']).default('enforce'),
  identityHeaders: z.record(HEADER_NAME, CLAIM_NAME).optional(),
  websocket: z.boolean().default(false),
  clientCertificate: z.enum(['required', 'optional']).optional(),
  connectTimeoutMs: z.number().int().min(10).max(60_000).default(3000),
  responseTimeoutMs: z.number().int().min(10).max(3_600_000).default(30_000),
  idleTimeoutMs: z.number().int().min(10).max(86_400_000).default(300_000),
  webSocketIdleTimeoutMs: z.number().int().min(0).max(86_400_000).default(300_000),
  ejectAfterFailures: z.number().int().min(1).max(1000).default(2),
  ejectMs: z.number().int().min(100).max(3_600_000).default(10_000),
}).refine((r) => r.auth === 'required' || r.requiredScope === undefined, {
  message: 'a public route cannot require a scope', path: ['requiredScope'],
}).refine((r) => new Set(r.issuers).size === r.issuers.length, {
  message: 'each issuer once', path: ['issuers'],
}).refine((r) => r.auth === 'required' || (r.issuers.length === 1 && r.issuers[0] === SELF_ISSUER), {
  message: 'a public route checks no token: leave out issuers', path: ['issuers'],
}).refine((r) => r.auth === 'required' || !r.assertion, {
  message: 'a public route has no caller to assert', path: ['assertion'],
}).refine((r) => r.targets.length > 0 || !r.websocket, {
  message: 'a decision-only route (no targets) proxies no WebSocket', path: ['websocket'],
}).superRefine(refineRules);

/**
 * What a rule or claim header can only get wrong beside its route: a path outside the prefix or
 * not a pattern, a caller's selector on a public route, a header name the gateway owns or given
 * twice. (The route's identity header names are checked against `proxy.identityHeaders` at the top.)
 */
function refineRules(r: { prefix: string; auth: string; allow?: readonly z.infer<typeof ruleSchema>[] | undefined; identityHeaders?: Record<string, string> | undefined }, ctx: z.RefinementCtx): void {
  const prefix = r.prefix.toLowerCase();
  (r.allow ?? []).forEach((rule, i) => {
    rule.paths?.forEach((path, j) => {
      const problem = pathProblem(prefix, path);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', path: ['allow', i, 'paths', j], message: problem });
    });
    if (r.auth !== 'public') return;
    for (const field of CALLER_SELECTORS) {
      if (rule[field] !== undefined) ctx.addIssue({ code: 'custom', path: ['allow', i, field], message: 'a public route has no caller: its rules can name only methods, paths and sources' });
    }
  });
  const seen = new Set<string>();
  for (const name of Object.keys(r.identityHeaders ?? {})) {
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) ctx.addIssue({ code: 'custom', path: ['identityHeaders', name], message: `"${name}" is set by the gateway itself` });
    if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: ['identityHeaders', name], message: `"${name}" is given twice (header names compare without case)` });
    seen.add(lower);
  }
}

/** Why `path` cannot be a pattern of the route at `prefix` (lower case), or undefined. */
function pathProblem(prefix: string, path: string): string | undefined {
  const lower = path.toLowerCase();
  if (prefix !== '/' && lower !== prefix && !lower.startsWith(`${prefix}/`)) return `expected a pattern under the route's prefix "${prefix}" (such as "${prefix}/:id")`;
  return undefined;
}

/** A rule's path: a path-to-regexp pattern of a whole path (proxy/policy.ts compiles it). */
function refinePathPattern(path: string, ctx: z.RefinementCtx): void {
  if (!path.startsWith('/')) {
    ctx.addIssue({ code: 'custom', message: 'expected a pattern starting with "/"' });
    return;
  }
  try {
    pathToRegexp(path);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a path pattern: ${(err as Error).message.split(';')[0]}` });
  }
}

/**
 * One counting window of a limit: at most `limit` units (requests, or their cost) per window
 * of `seconds`, counted from the window's first request (see limits/limiter.ts and state/rate-counters/store.ts).
 */
const windowSchema = z.strictObject({
  limit: z.number().int().min(1).max(1_000_000_000),
  seconds: z.number().int().min(1).max(31_536_000),
});
/** Several windows of one limit: each must have room. Empty: no limit. */
const windowsSchema = z.array(windowSchema).max(8)
  .refine((ws) => new Set(ws.map((w) => w.seconds)).size === ws.length, 'each window of a limit needs its own length in seconds');
const STORE_FAILURE_POLICIES = ['memory', 'open', 'closed'] as const;
const storeFailure = () => z.enum(STORE_FAILURE_POLICIES).optional();

/** One quota rule (docs/rate-limits.md, "Quotas"): the first rule matching a request's route and account wins. */
const quotaRuleSchema = z.strictObject({
  route: z.string().min(1).max(128).optional(),
  account: z.string().min(1).max(256).optional(),
  perAccount: windowsSchema.optional(),
  perKey: windowsSchema.optional(),
  perAddress: windowsSchema.optional(),
  cost: z.number().int().min(1).max(1_000_000).default(1),
  dryRun: z.boolean().default(false),
});

const w = (limit: number, seconds: number) => ({ limit, seconds });

/** A browser origin, spelt as browsers send it in Origin; or "*" (alone: checked below). */
/** The dashboard's path: lower case like every own path (app.ts compares own paths in lower case). */
const DASHBOARD_PATH = /^(?:\/[a-z0-9][a-z0-9._-]*)+$/;
/** First segments the gateway answers itself; the dashboard may not take them. */
const OWN_FIRST_SEGMENTS = ['api', 'owner', '.well-known', 'healthz', 'readyz', 'metrics', 'openapi.json'];

const corsOrigin = z.union([
  z.literal('*'),
  z.string().regex(/^https?:\/\/[^/?#\s]+$/, { message: 'expected an origin: "http(s)://host[:port]", without a path or trailing "/"', abort: true })
    .refine(isOrigin, 'expected an origin as browsers send it: lower-case scheme and host, without a default port'),
], { error: 'expected an origin "http(s)://host[:port]" (no path, no trailing "/") or "*"' });

export const configSchema = z.strictObject({
  server: z.strictObject({
    host: setting(z.string().min(1).default('127.0.0.1'), {
      env: 'HOST',
      description: 'Address to listen on (the Docker image sets 0.0.0.0).',
    }),
    port: setting(z.number().int().min(0).max(65535).default(8080), {
      env: 'PORT',
      description: 'TCP port to listen on (0 picks a free one).',
    }),
    bodyLimitBytes: setting(z.number().int().min(64).max(1_048_576).default(4096), {
      env: 'BODY_LIMIT_BYTES',
      description: 'Largest request body the gateway reads itself (sign-in, refresh); larger gets 413.',
    }),
    requestTimeoutMs: setting(z.number().int().min(1000).default(60_000), {
      env: 'REQUEST_TIMEOUT_MS',
      description: 'A request whose headers and body have not all arrived by then is answered 408 and closed.',
    }),
    drainDelayMs: setting(z.number().int().min(0).max(3_600_000).default(5000), {
      env: 'DRAIN_DELAY_MS',
      description: 'On SIGTERM/SIGINT, how long the gateway keeps serving with /readyz answering 503 (so load balancers take it out) before it stops accepting connections.',
    }),
    shutdownTimeoutMs: setting(z.number().int().positive().default(10_000), {
      env: 'SHUTDOWN_TIMEOUT_MS',
      description: 'Once it stops accepting, how long open requests, streams and WebSocket closes may take before the rest are cut and the process exits.',
    }),
    listenWaitMs: setting(z.number().int().min(0).max(3_600_000).default(30_000), {
      env: 'LISTEN_WAIT_MS',
      description: 'While the port is in use (the process being replaced still drains), how long to keep trying to listen, with a growing pause up to a second, before giving up (0: give up at once).',
    }),
  }).prefault({}),

  tokens: z.strictObject({
    issuer: setting(z.string().min(1).default('auth-gateway'), {
      env: 'TOKEN_ISSUER',
      description: 'The `iss` of access tokens, required on validation.',
    }),
    audience: setting(z.string().min(1).default('auth-gateway'), {
      env: 'TOKEN_AUDIENCE',
      description: 'The `aud` of access tokens, required on validation.',
    }),
    accessTokenTtlSeconds: setting(seconds().default(900), {
      env: 'ACCESS_TOKEN_TTL_SECONDS',
      description: 'Lifetime of an access token.',
    }),
    refreshTokenTtlSeconds: setting(seconds().default(1_209_600), {
      env: 'REFRESH_TOKEN_TTL_SECONDS',
      description: 'Idle lifetime of a refresh token: unused this long, it expires.',
    }),
    refreshFamilyMaxSeconds: setting(seconds().default(2_592_000), {
      env: 'REFRESH_FAMILY_MAX_SECONDS',
      description: 'Absolute lifetime of a refresh-token family, counted from sign-in; then sign in again.',
    }),
    refreshGraceSeconds: setting(z.number().int().min(0).max(300).default(10), {
      env: 'REFRESH_GRACE_SECONDS',
      description: 'A rotated refresh token presented again this soon gets the same successor pair back; later it revokes the family (0 disables).',
    }),
    memoryStoreMaxTokens: setting(z.number().int().min(1000).default(1_000_000), {
      description: 'Without Redis: most refresh tokens kept in memory; past it the least recently used expire early.',
    }),
    revokedAccessTokensMax: setting(z.number().int().min(100).max(10_000_000).default(100_000), {
      description: 'Most revoked access tokens (POST /api/revoke) kept until their expiry, on every instance (about 150 bytes each); past it a revocation of an access token is answered 503 and nothing is recorded (docs/tokens.md).',
    }),
    clockSkewSeconds: setting(z.number().int().min(0).max(300).default(5), {
      env: 'CLOCK_SKEW_SECONDS',
      description: 'Tolerance for `exp`, `nbf` and `iat` when validating access tokens.',
    }),
    // lru-cache allocates its slots for every entry up front (about 44 bytes each): hence the cap.
    prefix: setting(z.string().regex(TOKEN_FAMILY_PATTERN, 'a lowercase letter, then up to 15 lowercase letters or digits').default(DEFAULT_TOKEN_FAMILY), {
      env: 'TOKEN_PREFIX',
      description: 'The family prefix of the secrets the gateway makes, so secret scanners tell this deployment\'s apart: API keys `<prefix>k_…`, API secrets `<prefix>sk_…`, API settings tokens `<prefix>st_…` (docs/tokens.md). Changing it changes what is made from then on; what was made before keeps working.',
    }),
    previousPrefixes: setting(z.array(z.string().regex(TOKEN_FAMILY_PATTERN, 'a lowercase letter, then up to 15 lowercase letters or digits')).max(16).default([]), {
      env: 'TOKEN_PREVIOUS_PREFIXES',
      list: 'comma',
      description: 'Families this deployment used before `tokens.prefix` (`gw` is always one): a leak report of a secret of another family is a false positive at once (docs/leaks.md).',
    }),
    verifiedCacheMaxEntries: setting(z.number().int().min(0).max(1_000_000).default(50_000), {
      env: 'VERIFIED_TOKEN_CACHE_MAX_ENTRIES',
      description: 'Most access tokens remembered as verified, so a token presented again skips the signature check (docs/tokens.md); 0 turns the cache off.',
    }),
    verifiedCacheMaxBytes: setting(z.number().int().min(65_536).default(64 * 1024 * 1024), {
      env: 'VERIFIED_TOKEN_CACHE_MAX_BYTES',
      description: 'Most memory the verified-token cache may hold, in bytes (an entry is counted as twice its token\'s length plus 160, about 1 KB for a default token); the least recently used go first.',
    }),
  }).prefault({}),

  // The standard OAuth 2.0 face (docs/oauth.md): the token endpoint and its metadata.
  oauth: z.strictObject({
    publicOrigin: setting(z.string().regex(/^https?:\/\/[^/?#\s]+$/, { message: 'expected an origin: scheme, host and port only (no path)', abort: true }).refine(isOrigin, 'expected an origin as browsers send it: lowercase, without a default port').optional(), {
      env: 'OAUTH_PUBLIC_ORIGIN',
      description: 'The origin OAuth clients reach the gateway at (`https://api.example.com`): the authorization server metadata\'s endpoint URLs start with it, and so does its `issuer` unless `tokens.issuer` is itself an http(s) URL. Unset: `owner.publicOrigin` where that is set (one origin serves both), else the request\'s own origin (from a trusted proxy, its X-Forwarded-Proto/-Host or Forwarded).',
    }),
  }).prefault({}),

  // DPoP (RFC 9449): sender-constrained tokens (docs/dpop.md, auth/dpop.ts).
  dpop: z.strictObject({
    enabled: setting(z.boolean().default(true), {
      env: 'DPOP_ENABLED',
      description: 'Accept DPoP proofs at sign-in and refresh (the pair is then bound to the proof\'s key, `cnf.jkt`); off: a `DPoP` header there is refused and keys with `requireDpop` cannot sign in. Tokens already bound are checked either way.',
    }),
    algorithms: setting(z.array(z.enum(DPOP_ALGORITHMS)).min(1).default(['ES256', 'EdDSA', 'RS256', 'PS256']), {
      env: 'DPOP_ALGORITHMS',
      list: 'comma',
      description: 'Signature algorithms a DPoP proof may use (asymmetric only; the challenge\'s `algs`).',
    }),
    iatWindowSeconds: setting(z.number().int().min(5).max(600).default(60), {
      env: 'DPOP_IAT_WINDOW_SECONDS',
      description: 'A proof\'s `iat` may be at most this far in the past, and `tokens.clockSkewSeconds` in the future; its `jti` is remembered (on every instance, with Redis) for as long.',
    }),
    nonce: setting(z.enum(['off', 'required']).default('off'), {
      env: 'DPOP_NONCE',
      description: 'Server nonces (RFC 9449 §8, §9): "required" refuses every proof without a current `nonce` (401 `use_dpop_nonce` with a `DPoP-Nonce` to use); "off" asks for none.',
    }),
    nonceSecret: setting(z.string().min(32).optional(), {
      env: 'DPOP_NONCE_SECRET',
      secret: true,
      description: 'Key (32 characters or more) of the stateless nonces (an HMAC of the time step): set the same on every instance so each accepts the others\' nonces. Unset: a random key per gateway (its workers share one).',
    }),
    nonceStepSeconds: setting(z.number().int().min(10).max(3600).default(300), {
      description: 'A nonce is good in the step it was made in and the next one (so for one to two steps).',
    }),
    publicOrigins: setting(z.array(z.string().regex(/^https?:\/\/[^/?#\s]+$/, 'expected an origin: scheme, host and port only (no path)').refine(isOrigin, 'expected an origin as browsers send it: lowercase, without a default port')).max(16).default([]), {
      env: 'DPOP_PUBLIC_ORIGINS',
      list: 'comma',
      description: 'Origins a proof\'s `htu` may name (`https://gw.example.com`); empty: the request\'s own origin, from its Host (a trusted proxy\'s X-Forwarded-Host and -Proto win) and whether it came over TLS.',
    }),
    replayCacheMaxEntries: setting(z.number().int().min(1000).max(10_000_000).default(1_000_000), {
      description: 'Without Redis: most proof `jti`s remembered; past it the oldest are forgotten early (docs/dpop.md).',
    }),
    maxProofBytes: setting(z.number().int().min(512).max(16_384).default(4096), {
      description: 'Longest `DPoP` header read; a longer one is an invalid proof.',
    }),
  }).prefault({}),

  signing: z.strictObject({
    keys: setting(z.array(signingKeySchema).default([]), {
      env: 'SIGNING_KEYS',
      secret: true,
      description: 'Signing keys as a JSON array of {kid, alg, pem or pemFile}; empty: one EdDSA key is made at start-up.',
    }),
    activeKid: setting(z.string().min(1).optional(), {
      env: 'SIGNING_ACTIVE_KID',
      description: 'The `kid` that signs new tokens; the others only verify. Required when several private keys are given.',
    }),
  }).prefault({}),

  // Access tokens of other issuers (docs/identity-providers.md, auth/trusted-issuers.ts).
  trustedIssuers: setting(z.array(trustedIssuerSchema).max(32).default([]), {
    env: 'TRUSTED_ISSUERS',
    description: 'Issuers whose JWT access tokens routes may accept (route `issuers`), as a JSON array of {issuer, audience, jwksUri?, algorithms?, accountClaim?, scopeClaim?, rolesClaim?, audienceClaim?, requiredClaims?, tokenType?}; see docs/identity-providers.md.',
  }),
  issuerKeys: z.strictObject({
    fetchTimeoutMs: setting(z.number().int().min(100).max(60_000).default(3000), {
      env: 'ISSUER_KEYS_FETCH_TIMEOUT_MS',
      description: 'Longest wait for a trusted issuer\'s discovery document or JWKS, body included; a token that needs it meanwhile gets 401.',
    }),
    maxBytes: setting(z.number().int().min(1024).max(16_777_216).default(1_048_576), {
      env: 'ISSUER_KEYS_MAX_BYTES',
      description: 'Largest discovery document or JWKS read from a trusted issuer; a larger answer is a failed fetch.',
    }),
    cacheSeconds: setting(z.number().int().min(1).max(86_400).default(600), {
      env: 'ISSUER_KEYS_CACHE_SECONDS',
      description: 'How long a fetched key set is used as it is; after that it is fetched again in the background while the old one still answers.',
    }),
    maxStaleSeconds: setting(z.number().int().min(0).max(604_800).default(3600), {
      env: 'ISSUER_KEYS_MAX_STALE_SECONDS',
      description: 'While the issuer cannot be reached, how long past `cacheSeconds` its last key set is still used; after that its tokens are refused (fail closed).',
    }),
    minRefetchSeconds: setting(z.number().int().min(1).max(3600).default(30), {
      env: 'ISSUER_KEYS_MIN_REFETCH_SECONDS',
      description: 'Fewest seconds between two fetches of one issuer\'s keys prompted by an unknown `kid` or a failure, so that tokens with made-up kids cannot make the gateway hammer the issuer.',
    }),
  }).prefault({}),

  // Secret-scanning reports (docs/leaks.md, http/routes/leaks.ts): GitHub's partner program.
  leaks: z.strictObject({
    keysUrl: setting(z.url({ protocol: /^https?$/ }).default('https://api.github.com/meta/public_keys/secret_scanning'), {
      env: 'LEAK_REPORT_KEYS_URL',
      description: 'Where the public keys that sign secret-scanning reports are published (GitHub\'s format: `{public_keys: [{key_identifier, key}]}`); a report signed by any other key is refused.',
    }),
    keysCacheSeconds: setting(z.number().int().min(1).max(604_800).default(3600), {
      env: 'LEAK_REPORT_KEYS_CACHE_SECONDS',
      description: 'How long the fetched keys are used before they are fetched again (an unknown key id fetches them sooner, at most once per `keysMinRefetchSeconds`).',
    }),
    keysMinRefetchSeconds: setting(z.number().int().min(1).max(3600).default(60), {
      env: 'LEAK_REPORT_KEYS_MIN_REFETCH_SECONDS',
      description: 'Fewest seconds between two fetches of the keys prompted by an unknown key id or a failure, so made-up key ids cannot make the gateway hammer the key server.',
    }),
    keysFetchTimeoutMs: setting(z.number().int().min(100).max(60_000).default(3000), {
      description: 'Longest wait for the keys, body included; a report that needs them meanwhile gets 503.',
    }),
    keysMaxBytes: setting(z.number().int().min(1024).max(1_048_576).default(65_536), {
      description: 'Largest key document read; a larger answer is a failed fetch.',
    }),
    maxBodyBytes: setting(z.number().int().min(1024).max(4_194_304).default(262_144), {
      env: 'LEAK_REPORT_MAX_BODY_BYTES',
      description: 'Largest report read (413 above it).',
    }),
    maxTokens: setting(z.number().int().min(1).max(1000).default(100), {
      description: 'Most tokens one report may list (400 above it).',
    }),
  }).prefault({}),

  data: z.strictObject({
    file: setting(z.string().min(1).default('config/demo-data.json'), {
      env: 'GATEWAY_DATA_FILE',
      description: 'Data file with accounts, API keys, roles and sign records (relative paths: from the config file, else the working directory).',
    }),
    demoSaveFile: setting(z.string().min(1).default('data/gateway-data.json'), {
      env: 'DEMO_SAVE_FILE',
      description: 'The shipped demo data file is never written: owner API changes made on it are saved here, and once this file exists it is read instead of the demo file (relative paths: from the working directory).',
    }),
    keySource: setting(z.enum(['file', 'redis']).default('file'), {
      env: 'KEY_SOURCE',
      description: 'Where API keys are looked up: the data file, or Redis (written by `npm run keys:create -- --redis` or `keys:import`; needs Redis).',
    }),
    timeZone: setting(z.string().min(1).default('UTC'), {
      env: 'TIME_ZONE',
      description: 'IANA time zone in which `signedAt` and `signedExpiredAt` are written.',
    }),
    watchIntervalMs: setting(z.number().int().min(0).max(3_600_000).default(1000), {
      env: 'DATA_WATCH_INTERVAL_MS',
      description: 'How often the data file is checked for changes; a changed, valid file replaces keys, roles and sign records without a restart (0: read once).',
    }),
    lockStaleMs: setting(z.number().int().min(2000).max(3_600_000).default(10_000), {
      env: 'DATA_LOCK_STALE_MS',
      description: 'The process that writes the data file holds `<file>.lock` and renews it every half of this; a lock not renewed for this long (its holder was killed) is taken over by the process waiting for it.',
    }),
    allowDemoData: setting(z.boolean().default(false), {
      env: 'ALLOW_DEMO_DATA',
      description: 'With `NODE_ENV=production` the gateway refuses to start while the data file holds the demo API keys or demo owners, whose secrets and passwords are published, and refuses a sign-in with them from any key source (Redis too); true serves them, with a warning.',
    }),
  }).prefault({}),

  directory: z.strictObject({
    store: setting(z.enum(['file', 'redis', 'http']).default('file'), {
      env: 'DIRECTORY_STORE',
      description: 'Where roles and sign records are read: the data file, Redis (needs Redis; see docs/directory.md), or an HTTP upstream (`directory.http.*`).',
    }),
    timeZone: setting(z.string().min(1).default('UTC'), {
      description: 'Redis and HTTP stores: IANA time zone of times they hold as `YYYY-MM-DD HH:MM:SS` (epoch ms and ISO 8601 times with an offset need none).',
    }),
    http: z.strictObject({
      signUrl: setting(z.string().optional(), {
        env: 'DIRECTORY_SIGN_URL',
        description: 'HTTP store: URL of one sign record, with `{accountId}` and `{address}` placeholders.',
      }),
      rolesUrl: setting(z.string().optional(), {
        env: 'DIRECTORY_ROLES_URL',
        description: 'HTTP store: URL of an account\'s roles, with an `{accountId}` placeholder; `page`, `limit` and `name` are added to its query.',
      }),
      token: setting(z.string().min(1).optional(), {
        env: 'DIRECTORY_TOKEN',
        secret: true,
        description: 'HTTP store: the gateway\'s service credential, sent as `Authorization: Bearer <token>`.',
      }),
      timeoutMs: setting(z.number().int().min(10).max(60_000).default(2000), {
        env: 'DIRECTORY_TIMEOUT_MS',
        description: 'HTTP store: a call not answered by then is abandoned (504 when no stale copy may be served).',
      }),
      maxResponseBytes: setting(z.number().int().min(1024).max(67_108_864).default(1_048_576), {
        description: 'HTTP store: largest answer read; a larger one is a store error.',
      }),
      breakerFailures: setting(z.number().int().min(1).max(1000).default(5), {
        description: 'HTTP store: consecutive failed calls after which calls fail at once, until one trial call succeeds after `breakerCooldownMs`.',
      }),
      breakerCooldownMs: setting(z.number().int().min(100).max(600_000).default(1000), {
        description: 'HTTP store: how long the breaker stays open before one call tries the upstream again.',
      }),
    }).prefault({}),
    cache: z.strictObject({
      ttlMs: setting(z.number().int().min(0).max(86_400_000).default(10_000), {
        env: 'DIRECTORY_CACHE_TTL_MS',
        description: 'How long a record or page read from the store is served without asking the store again.',
      }),
      staleWhileRevalidateMs: setting(z.number().int().min(0).max(86_400_000).default(5000), {
        description: 'After `ttlMs`, how long the cached copy is still served at once while one call refreshes it in the background.',
      }),
      negativeTtlMs: setting(z.number().int().min(0).max(86_400_000).default(2000), {
        env: 'DIRECTORY_CACHE_NEGATIVE_TTL_MS',
        description: 'How long "no sign record for this address" is cached.',
      }),
      maxStaleMs: setting(z.number().int().min(0).max(86_400_000).default(300_000), {
        env: 'DIRECTORY_MAX_STALE_MS',
        description: 'While the store fails or is slow, a cached copy up to this much older than its TTL is served instead of 503/504.',
      }),
      maxEntries: setting(z.number().int().min(100).max(10_000_000).default(100_000), {
        description: 'Most records and pages cached; past it the least recently used go.',
      }),
      maxBytes: setting(z.number().int().min(65_536).max(4_294_967_296).default(67_108_864), {
        description: 'Most bytes (estimated) of records and pages cached; past it the least recently used go.',
      }),
    }).prefault({}),
  }).prefault({}),

  redis: z.strictObject({
    url: setting(z.string().regex(/^rediss?:\/\/./, 'expected a redis:// or rediss:// URL').optional(), {
      env: 'REDIS_URL',
      secret: true,
      description: 'A standalone Redis (`redis://[user:password@]host:port[/db]`, `rediss://` for TLS). Setting it, or `sentinels` or `clusterNodes`, moves shared state to Redis.',
    }),
    sentinels: setting(z.array(hostPort).default([]), {
      env: 'REDIS_SENTINELS',
      description: 'Redis Sentinel addresses as a JSON array of "host:port"; the master is found by `sentinelName`.',
    }),
    sentinelName: setting(z.string().min(1).default('mymaster'), {
      env: 'REDIS_SENTINEL_NAME',
      description: 'The master name the sentinels monitor.',
    }),
    clusterNodes: setting(z.array(hostPort).default([]), {
      env: 'REDIS_CLUSTER_NODES',
      description: 'Redis Cluster seed nodes as a JSON array of "host:port".',
    }),
    username: setting(z.string().min(1).optional(), {
      env: 'REDIS_USERNAME',
      description: 'ACL user for Redis (standalone, the Sentinel-chosen master, or Cluster nodes; the sentinels themselves take `sentinelUsername`).',
    }),
    password: setting(z.string().min(1).optional(), {
      env: 'REDIS_PASSWORD',
      secret: true,
      description: 'Password for Redis, as for `username`; overrides one in the URL.',
    }),
    sentinelUsername: setting(z.string().min(1).optional(), {
      env: 'REDIS_SENTINEL_USERNAME',
      description: 'ACL user for the sentinels themselves (their own `user` lines), when they have one.',
    }),
    sentinelPassword: setting(z.string().min(1).optional(), {
      env: 'REDIS_SENTINEL_PASSWORD',
      secret: true,
      description: 'Password for the sentinels themselves (their own `requirepass`), which is often not the master\'s `password`.',
    }),
    tls: setting(z.boolean().default(false), {
      env: 'REDIS_TLS',
      description: 'TLS to Sentinel and Cluster nodes (a `rediss://` URL turns it on for standalone).',
    }),
    tlsCaFile: setting(z.string().min(1).optional(), {
      env: 'REDIS_TLS_CA_FILE',
      description: 'With TLS: PEM file of the CA(s) that signed the Redis servers\' certificates, trusted instead of the system\'s (relative paths: from the config file, else the working directory).',
    }),
    tlsCertFile: setting(z.string().min(1).optional(), {
      env: 'REDIS_TLS_CERT_FILE',
      description: 'With TLS: PEM client certificate, for servers that require one (`tls-auth-clients yes`); needs `tlsKeyFile`.',
    }),
    tlsKeyFile: setting(z.string().min(1).optional(), {
      env: 'REDIS_TLS_KEY_FILE',
      description: 'With TLS: PEM private key of `tlsCertFile`.',
    }),
    keyPrefix: setting(plainName(64).default('gw'), {
      env: 'REDIS_KEY_PREFIX',
      description: 'First part of every key and channel name, so several gateways can share one Redis.',
    }),
    commandTimeoutMs: setting(z.number().int().min(10).max(60_000).default(500), {
      env: 'REDIS_COMMAND_TIMEOUT_MS',
      description: 'A Redis call not answered by then fails (503 for sign-in and refresh).',
    }),
    connectTimeoutMs: setting(z.number().int().min(100).max(60_000).default(2000), {
      description: 'Longest wait for a TCP connection to Redis before retrying.',
    }),
    breakerFailures: setting(z.number().int().min(1).max(1000).default(3), {
      description: 'Consecutive failed Redis calls that open the circuit breaker: calls then fail at once, without waiting on Redis.',
    }),
    breakerCooldownMs: setting(z.number().int().min(100).max(600_000).default(1000), {
      description: 'How long the breaker stays open before one call tries Redis again; also the `Retry-After` of the 503.',
    }),
    resetCacheTtlMs: setting(z.number().int().min(50).max(60_000).default(1000), {
      description: 'How long an instance trusts its cached copy of an account\'s token resets when no invalidation arrives (resets are also pushed to every instance at once).',
    }),
    keyCacheTtlMs: setting(z.number().int().min(0).max(300_000).default(5000), {
      description: 'With `data.keySource` "redis": how long an instance serves an API key record it read without a change notice (every write of a key record is announced, and drops every instance\'s copies at once); 0 reads Redis at each sign-in and refresh.',
    }),
    keyCacheMaxEntries: setting(z.number().int().min(1).max(1_000_000).default(10_000), {
      description: 'Most API key records an instance keeps (by apiKey and by key id, least recently used dropped first).',
    }),
  }).prefault({}),

  roles: z.strictObject({
    defaultLimit: setting(z.number().int().min(1).default(10), {
      description: '`limit` of GET /api/roles when the caller gives none.',
    }),
    maxLimit: setting(z.number().int().min(1).max(1000).default(100), {
      description: 'Largest `limit` accepted by GET /api/roles; larger gets 400.',
    }),
  }).prefault({}),

  limits: z.strictObject({
    mode: setting(z.enum(['enforce', 'dry-run', 'off']).default('enforce'), {
      env: 'RATE_LIMITS',
      description: '`enforce`: over a limit gets 429; `dry-run`: nothing is refused, what would have been is logged and counted; `off`: nothing is counted.',
    }),
    onStoreFailure: setting(z.enum(STORE_FAILURE_POLICIES).default('memory'), {
      env: 'RATE_LIMIT_ON_STORE_FAILURE',
      description: 'While Redis fails: `memory` counts in this process instead, `open` admits, `closed` refuses with 503. Each limit group can set its own.',
    }),
    storeTimeoutMs: setting(z.number().int().min(5).max(5000).default(100), {
      description: 'A counter call to Redis not answered by then is a store failure (the request goes on under the failure policy, never waiting longer).',
    }),
    memoryMaxEntries: setting(z.number().int().min(1000).max(10_000_000).default(100_000), {
      description: 'Most counters kept in process memory (without Redis, or while it fails); past it the least recently used are dropped.',
    }),
    signIn: z.strictObject({
      perAddress: setting(windowsSchema.default([w(30, 60), w(300, 3600)]), {
        description: 'Sign-in and token-reset attempts per client address, whatever their outcome.',
      }),
      failuresPerKeyAndAddress: setting(windowsSchema.default([w(5, 60), w(10, 900), w(20, 86_400)]), {
        description: 'Failed attempts per API key from one address: longer windows make the lockout grow (5 then a minute, 10 then 15 minutes, 20 then a day). A success clears them.',
      }),
      failuresPerAddress: setting(windowsSchema.default([w(20, 600), w(100, 86_400)]), {
        description: 'Failed attempts per client address, whatever the key (a success gives its attempt back).',
      }),
      failuresPerKey: setting(windowsSchema.default([w(50, 3600)]), {
        description: 'Failed attempts per API key from all addresses; past it the key\'s own sign-ins are refused until the window ends (a success gives its attempt back).',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the sign-in limits; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    // Owner password sign-ins (docs/rate-limits.md, "Owner sign-in"): apart from API keys, so
    // that owners' emails, which are no secret, never lock anyone out of the data plane.
    ownerSignIn: z.strictObject({
      perAddress: setting(windowsSchema.default([w(30, 60), w(300, 3600)]), {
        description: 'Owner sign-in attempts per client address without a device cookie, whatever their outcome.',
      }),
      failuresPerAddress: setting(windowsSchema.default([w(5, 60), w(10, 600), w(20, 3600), w(40, 86_400)]), {
        description: 'Failed owner sign-ins per client address without a device cookie, whatever the email: the delay grows with each window (5 then a minute, 10 then 10 minutes, 20 then an hour, 40 then a day).',
      }),
      failuresPerEmail: setting(windowsSchema.default([w(10, 900), w(100, 86_400)]), {
        description: 'Failed owner sign-ins per email from clients without its device cookie (from all addresses); past it only a device the owner signed in from before can sign in.',
      }),
      failuresPerDevice: setting(windowsSchema.default([w(5, 60), w(10, 900), w(20, 86_400)]), {
        description: 'Failed owner sign-ins presenting one device cookie; a success clears them.',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the owner sign-in limits; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    ownerMail: z.strictObject({
      perAddress: setting(windowsSchema.default([w(10, 600), w(50, 86_400)]), {
        description: 'Password-reset requests and completions, and email verifications, per client address, whatever the email; past it they are answered 429.',
      }),
      perEmail: setting(windowsSchema.default([w(3, 900), w(10, 86_400)]), {
        description: 'Reset mails per email: past it a request is answered as ever (202) and sends nothing, so no one floods a mailbox; a browser with the owner\'s device cookie for the email is not held to it, and sign-in is never counted here.',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the owner mail limits; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    adminToken: z.strictObject({
      failuresPerAddress: setting(windowsSchema.default([w(20, 600), w(100, 86_400)]), {
        description: 'Wrong operator tokens (`Authorization: Bearer` on /owner/v1) per client address; counted apart from every sign-in, so a misconfigured script locks out only operator tokens from its address.',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the operator-token limit; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    refresh: z.strictObject({
      perFamily: setting(windowsSchema.default([w(10, 60)]), {
        description: 'Refresh calls per refresh-token family.',
      }),
      perAddress: setting(windowsSchema.default([w(60, 60)]), {
        description: 'Refresh calls per client address.',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the refresh limits; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    calls: z.strictObject({
      perAccount: setting(windowsSchema.default([w(100, 1), w(3000, 60)]), {
        description: 'Default quota of authenticated calls per account on each route (a burst and a sustained window).',
      }),
      perKey: setting(windowsSchema.default([]), {
        description: 'Default quota of authenticated calls per API key on each route (none by default).',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the quotas of authenticated calls; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    public: z.strictObject({
      perAddress: setting(windowsSchema.default([w(50, 1), w(1500, 60)]), {
        description: 'Default quota of calls per client address on each public route.',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the quotas of public routes; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    owner: z.strictObject({
      perOwner: setting(windowsSchema.default([w(10, 1), w(120, 60)]), {
        description: 'Owner API changes (every operation but reads, sign-in and sign-out) per signed-in owner, whatever the account; an operator\'s admin token is not counted.',
      }),
      perAccount: setting(windowsSchema.default([w(20, 1), w(300, 60)]), {
        description: 'Owner API changes to one account, by all its owners together (only changes to an account the owner is a member of count).',
      }),
      onStoreFailure: setting(storeFailure(), { description: 'Failure policy of the owner API change limits; default `limits.onStoreFailure`.' }),
    }).prefault({}),
    rules: setting(z.array(quotaRuleSchema).max(1000).default([]), {
      env: 'RATE_LIMIT_RULES',
      description: 'Quota overrides as a JSON array of {route?, account?, perAccount?, perKey?, perAddress?, cost?, dryRun?}; the first matching rule wins (see docs/rate-limits.md).',
    }),
  }).prefault({}),

  // Per-key usage counts for the owner API (docs/owner.md, "Usage"): counted in memory, written
  // to the usage store every flushIntervalMs, so a request never waits on a store for them.
  usage: z.strictObject({
    enabled: setting(z.boolean().default(true), {
      env: 'USAGE_ENABLED',
      description: 'Count each key\'s authenticated calls, rate-limited calls and calls per class of status (5-minute buckets kept 25 hours, UTC days kept 32 days) for GET /owner/v1/accounts/{accountId}/usage and the dashboard\'s usage charts; off: nothing is counted and the operation answers an empty window with `enabled: false`.',
    }),
    flushIntervalMs: setting(z.number().int().min(100).max(60_000).default(5000), {
      env: 'USAGE_FLUSH_INTERVAL_MS',
      description: 'How often the counts gathered in memory are added to the usage store (Redis when configured); the usage an owner reads lags by up to this much.',
    }),
  }).prefault({}),

  proxy: z.strictObject({
    trustedProxies: setting(z.array(z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()])).default([]), {
      env: 'TRUSTED_PROXIES',
      description: 'JSON array of addresses or CIDR ranges of proxies in front of the gateway; only from these are incoming X-Forwarded-* / Forwarded kept (extended), from anyone else they are replaced.',
    }),
    clientAddressHeader: setting(z.enum(['x-forwarded-for', 'forwarded']).default('x-forwarded-for'), {
      env: 'CLIENT_ADDRESS_HEADER',
      description: 'Which header a trusted proxy in front names the client in (read only from `trustedProxies`): the client address is the last one in it that is not a trusted proxy.',
    }),
    forwardedHeaders: setting(z.enum(['x-forwarded', 'forwarded', 'both']).default('x-forwarded'), {
      env: 'FORWARDED_HEADERS',
      description: 'Which forwarding headers backends get: `X-Forwarded-For/-Proto/-Host`, RFC 7239 `Forwarded`, or both.',
    }),
    // The same names sent by a client are always removed, whatever the route sends.
    identityHeaders: z.strictObject({
      account: setting(HEADER_NAME.default('X-Account-Id'), { description: 'Header that tells a backend the caller\'s account id.' }),
      key: setting(HEADER_NAME.default('X-Key-Id'), { description: 'Header that tells a backend the caller\'s API key id.' }),
      token: setting(HEADER_NAME.default('X-Token-Id'), { description: 'Header that tells a backend the access token\'s `jti`.' }),
      request: setting(HEADER_NAME.default('X-Request-Id'), { description: 'Header that tells a backend the request id (also sent on public routes).' }),
      assertion: setting(HEADER_NAME.default('X-Gateway-Assertion'), { description: 'Header carrying the signed identity assertion of routes with `assertion: true`.' }),
      clientCertSubject: setting(HEADER_NAME.default('X-Client-Cert-Subject'), { description: 'Header carrying the subject of the client\'s verified TLS certificate, on routes with `clientCertificate` (docs/tls.md, "Client certificates").' }),
      scopes: setting(HEADER_NAME.default('X-Scopes'), { description: 'Header that tells a backend the caller\'s scopes, space-separated, on routes whose `identity` lists `scopes`.' }),
      roles: setting(HEADER_NAME.default('X-Roles'), { description: 'Header that tells a backend the roles a trusted issuer\'s token names (`rolesClaim`), space-separated, on routes whose `identity` lists `roles`.' }),
      clientCertFingerprint: setting(HEADER_NAME.default('X-Client-Cert-Sha256'), { description: 'Header carrying the SHA-256 fingerprint (64 lowercase hex digits) of the client\'s verified TLS certificate, on routes with `clientCertificate`.' }),
      dpopThumbprint: setting(HEADER_NAME.default('X-DPoP-Jkt'), { description: 'Header that tells a backend the JWK thumbprint (RFC 7638, the token\'s `cnf.jkt`) of the key whose DPoP proof came with the call, for DPoP-bound tokens (docs/dpop.md).' }),
    }).prefault({}),
    assertionTtlSeconds: setting(z.number().int().min(5).max(3600).default(60), {
      description: 'Lifetime of the signed identity assertion sent to routes with `assertion: true`.',
    }),
    maxSocketsPerTarget: setting(z.number().int().min(1).max(65_536).default(256), {
      description: 'Keep-alive pool size per backend target, for each of its two pools (requests with a body, and without); requests beyond it wait for a free connection.',
    }),
  }).prefault({}),

  routes: setting(z.array(routeSchema).default([]), {
    env: 'ROUTES',
    description: 'Proxied routes as a JSON array of {prefix, targets, …}; see docs/proxying.md for every field.',
  }),

  workers: setting(z.number().int().min(0).max(256).optional(), {
    env: 'WORKERS',
    description: 'Processes serving the one port (0: one per CPU). More than 1 needs Redis and configured signing keys. Unset: one per CPU this process may use when Redis and signing keys are configured (the state every worker must share), else 1.',
  }),

  // What a reload (SIGHUP, or a watched file) replaces: see docs/reload.md and config/reload.ts.
  reload: z.strictObject({
    watch: setting(z.boolean().default(false), {
      env: 'CONFIG_WATCH',
      description: 'Also reload when the file named by GATEWAY_CONFIG changes (as on SIGHUP: routes, limits, trusted proxies and signing keys; see docs/reload.md).',
    }),
    watchIntervalMs: setting(z.number().int().min(100).max(3_600_000).default(2000), {
      env: 'CONFIG_WATCH_INTERVAL_MS',
      description: 'With `reload.watch`: how often the config file is checked for a change.',
    }),
  }).prefault({}),

  owner: z.strictObject({
    publicOrigin: setting(z.string().regex(/^https?:\/\/[^/?#\s]+$/, 'expected an origin: scheme, host and port only (no path)').refine(isOrigin, 'expected an origin as browsers send it: lowercase, without a default port').optional(), {
      env: 'OWNER_PUBLIC_ORIGIN',
      description: 'The origin owners reach the gateway at (`https://gw.example.com`): owner changes must come from it (CSRF check), its scheme decides the session cookie\'s `Secure`, and invite links point at it. Unset: the request\'s own origin.',
    }),
    adminTokenDigests: setting(z.array(z.string().regex(/^sha256:[0-9a-f]{64}$/, 'expected "sha256:" and 64 lowercase hex digits (see gatewayctl admin-token)')).max(16).default([]), {
      env: 'OWNER_ADMIN_TOKEN_DIGESTS',
      description: 'SHA-256 digests of the operator tokens (`gwadm_…`) that may manage every account, as a JSON array (several, to rotate); empty: no operator access.',
    }),
    sessionIdleSeconds: setting(z.number().int().min(60).max(86_400).default(1800), {
      env: 'OWNER_SESSION_IDLE_SECONDS',
      description: 'An owner session unused this long ends (the owner signs in again).',
    }),
    sessionMaxSeconds: setting(z.number().int().min(300).max(2_592_000).default(43_200), {
      description: 'An owner session ends this long after sign-in, used or not.',
    }),
    bodyLimitBytes: setting(z.number().int().min(1024).max(1_048_576).default(16_384), {
      description: 'Largest request body of the owner API; larger gets 413.',
    }),
    inviteTtlHours: setting(z.number().int().min(1).max(720).default(72), {
      description: 'How long an invite link can be used (once).',
    }),
    auditMaxEventsPerAccount: setting(z.number().int().min(100).max(1_000_000).default(1000), {
      description: 'Audit events kept per account, newest first (every event is also logged as an `audit` line).',
    }),
    settingsTokenCacheTtlMs: setting(z.number().int().min(0).max(300_000).default(60_000), {
      description: 'How long an instance trusts its cached copy of an API settings token (a revoke reaches every instance at once through the reset notices regardless).',
    }),
    deviceCookieSecret: setting(z.string().min(32).optional(), {
      env: 'OWNER_DEVICE_COOKIE_SECRET',
      secret: true,
      description: 'Key (32 characters or more) that signs the device cookie an owner gets at sign-in; set the same on every instance. Unset: a random key per gateway (its workers share one), so a device cookie is known only to the gateway that set it, until it restarts.',
    }),
    deviceCookieDays: setting(z.number().int().min(1).max(400).default(180), {
      description: 'How long a device cookie marks the browser as one the owner signed in from (renewed at each sign-in).',
    }),
    passwordHashConcurrency: setting(z.number().int().min(0).max(64).default(0), {
      env: 'OWNER_PASSWORD_HASH_CONCURRENCY',
      description: 'Argon2 password hashes run at once per process; 0: one fewer than the cores and than libuv\'s thread pool, at least 1.',
    }),
    passwordHashQueue: setting(z.number().int().min(0).max(10_000).default(64), {
      env: 'OWNER_PASSWORD_HASH_QUEUE',
      description: 'Password checks waiting for a hash slot per process; past it one is answered 503 `overloaded` with Retry-After.',
    }),
    passwordHashBudget: setting(z.number().min(0).max(64).default(0), {
      env: 'OWNER_PASSWORD_HASH_BUDGET',
      description: 'Cores\' worth of argon2 hashing (over about a second) that sign-ins without a device cookie for their email may use per process; past it they are answered 503 `overloaded` without hashing; 0: no budget. Sign-ins with a device cookie are never refused by it.',
    }),
    passwordHashNice: setting(z.number().int().min(0).max(19).default(19), {
      env: 'OWNER_PASSWORD_HASH_NICE',
      description: 'Nice value (Linux) for libuv\'s thread pool, where argon2 runs, so that the event loop takes a core from a hash at once; set only once a hash has run; it also lowers the pool\'s file and DNS work when the CPU is contended; 0: unchanged.',
    }),
    secondFactorKey: setting(z.string().min(32).optional(), {
      env: 'OWNER_SECOND_FACTOR_KEY',
      secret: true,
      description: 'Key (32 characters or more) that encrypts owners\' TOTP secrets at rest (AES-256-GCM); set the same on every instance and keep it: a secret sealed under another key makes no code (the owner signs in with a recovery code and enrolls again). Unset: TOTP secrets are stored as they are (never answered after enrollment, never logged).',
    }),
    requireSecondFactor: setting(z.boolean().default(false), {
      env: 'OWNER_REQUIRE_SECOND_FACTOR',
      description: 'Every owner of the deployment must use a second factor (TOTP or a passkey): one without is answered 403 `mfa_enrollment_required` by every owner operation but the enrollment ones. Accounts can require it of their own owners as well (docs/owner.md, "Second factors").',
    }),
    settingsTokenMaxDays: setting(z.number().int().min(1).max(3650).optional(), {
      description: 'Longest lifetime an API settings token may be given; unset: tokens may also never expire.',
    }),
    maxSessionsPerOwner: setting(z.number().int().min(1).max(100).default(10), {
      env: 'OWNER_MAX_SESSIONS_PER_OWNER',
      description: 'Sessions one owner may hold at once; a new sign-in past it ends the owner\'s oldest (audited `owner.session_evict`), so one owner\'s sign-ins never push out another\'s.',
    }),
    // Owners' single sign-on through an OpenID provider (docs/owner.md, "Single sign-on"): on
    // while `issuer` is set.
    sso: z.strictObject({
      issuer: setting(z.url({ protocol: /^https?$/ }).refine(isSsoIssuer, 'expected an https URL (http only on a loopback host, for tests)').optional(), {
        env: 'OWNER_SSO_ISSUER',
        description: 'The OpenID provider\'s issuer URL (its discovery document is at `/.well-known/openid-configuration` under it); set: owners may sign in to the dashboard through it.',
      }),
      clientId: setting(z.string().min(1).max(512).optional(), {
        env: 'OWNER_SSO_CLIENT_ID',
        description: 'The gateway\'s client id at the provider.',
      }),
      clientSecret: setting(z.string().min(1).max(1024).optional(), {
        env: 'OWNER_SSO_CLIENT_SECRET',
        secret: true,
        description: 'The client\'s secret (`client_secret_basic`); unset: a public client, PKCE alone.',
      }),
      redirectUri: setting(z.url({ protocol: /^https?$/ }).optional(), {
        env: 'OWNER_SSO_REDIRECT_URI',
        description: 'The redirect URI registered at the provider; unset: `owner.publicOrigin` (else the request\'s origin) and `/owner/v1/sso/callback`.',
      }),
      scopes: setting(z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,64}$/)).min(1).max(16).default(['openid', 'email']).refine((s) => s.includes('openid'), 'expected "openid" among the scopes'), {
        description: 'Scopes asked for; `openid` and a scope that yields `email` and `email_verified` (`email` at most providers).',
      }),
      displayName: setting(z.string().min(1).max(64).default('single sign-on'), {
        env: 'OWNER_SSO_DISPLAY_NAME',
        description: 'The provider\'s name on the dashboard\'s button ("Sign in with …").',
      }),
      timeoutMs: setting(z.number().int().min(100).max(60_000).default(10_000), {
        description: 'A call to the provider (discovery, token, userinfo) not answered by then fails the sign-in.',
      }),
    }).refine((sso) => sso.issuer === undefined || sso.clientId !== undefined, { message: 'owner.sso.clientId is required with owner.sso.issuer', path: ['clientId'] }).prefault({}),
  }).prefault({}),

  // Mail to owners (docs/mail.md): off while smtpUrl is unset.
  mail: z.strictObject({
    smtpUrl: setting(z.string().regex(/^smtps?:\/\/[^\s]+$/, 'expected smtp://[user:password@]host[:port] (STARTTLS when offered) or smtps://… (TLS from the start)').optional(), {
      env: 'SMTP_URL',
      secret: true,
      description: 'SMTP server mail is sent through: `smtp://user:password@host:587` (STARTTLS when the server offers it; `?requireTLS=true` to insist) or `smtps://…:465` (TLS from the start). Unset: no mail (invites are only returned to the inviter, no reset by mail, no notices).',
    }),
    from: setting(z.string().min(3).max(320).optional(), {
      env: 'MAIL_FROM',
      description: 'The From of every mail (`Gateway <noreply@example.com>`); needed with `mail.smtpUrl`.',
    }),
    productName: setting(z.string().min(1).max(100).default('API gateway'), {
      env: 'MAIL_PRODUCT_NAME',
      description: 'The product\'s name as mails name it (subject lines, greetings).',
    }),
    outboxFile: setting(z.string().min(1).default('data/mail-outbox.json'), {
      env: 'MAIL_OUTBOX_FILE',
      description: 'Without Redis: where mails wait until the SMTP server takes them (mode 0600; relative paths: from the working directory). With Redis they wait there, shared by every instance.',
    }),
    outboxMaxMails: setting(z.number().int().min(10).max(1_000_000).default(10_000), {
      description: 'Mails the outbox holds at most; a change whose mail would not fit is made without it (logged, counted as `dropped`).',
    }),
    maxAttempts: setting(z.number().int().min(1).max(100).default(10), {
      description: 'Sending attempts per mail: each failure waits twice as long as the one before (30 s, 1 min, … up to an hour); after the last, the mail is dropped, logged and audited.',
    }),
  }).prefault({}),

  // Where webhooks may be sent (docs/webhooks.md, "Where a webhook may go"): global https only
  // unless the operator opens more.
  webhooks: z.strictObject({
    allowPrivateNetworks: setting(z.boolean().default(false), {
      env: 'WEBHOOKS_ALLOW_PRIVATE_NETWORKS',
      description: 'Let webhook endpoints reach any address: loopback, private, link-local, unique-local, CGNAT, cloud metadata. Off: only global unicast addresses, checked at creation and against the resolved addresses at each delivery.',
    }),
    allowCidrs: setting(z.array(z.union([z.cidrv4(), z.cidrv6()])).max(64).default([]), {
      env: 'WEBHOOKS_ALLOW_CIDRS',
      list: 'comma',
      description: 'Ranges webhook endpoints may reach though not global (`10.20.0.0/16`, `fd00:1::/64`; comma-separated or a JSON array); everything else private stays refused.',
    }),
    allowHttp: setting(z.boolean().default(false), {
      env: 'WEBHOOKS_ALLOW_HTTP',
      description: 'Accept `http://` endpoint URLs as well as `https://` (signatures still protect the body, nothing protects its secrecy).',
    }),
    timeoutMs: setting(z.number().int().min(100).max(60_000).default(10_000), {
      description: 'A delivery attempt (connect, send, answer) not done by then fails and is retried.',
    }),
    maxAttempts: setting(z.number().int().min(1).max(100).default(10), {
      description: 'Delivery attempts per event and endpoint: each failure waits twice as long as the one before (30 s, 1 min, … up to an hour); after the last, the delivery is given up (counted as `failed`).',
    }),
    queueFile: setting(z.string().min(1).default('data/webhook-queue.json'), {
      env: 'WEBHOOKS_QUEUE_FILE',
      description: 'Without Redis: where webhook deliveries wait (mode 0600; relative paths: from the working directory). With Redis they wait there, shared by every instance.',
    }),
    maxQueued: setting(z.number().int().min(10).max(1_000_000).default(10_000), {
      description: 'Deliveries the queue holds at most; a change whose deliveries would not fit is made without them (logged, counted as `dropped`).',
    }),
  }).prefault({}),

  // Browsers on other origins (docs/api.md, "CORS"). Off while allowedOrigins is empty.
  cors: z.strictObject({
    allowedOrigins: setting(z.array(corsOrigin).max(64).default([]), {
      env: 'CORS_ALLOWED_ORIGINS',
      list: 'comma',
      description: 'Origins whose browser pages may call the gateway (`https://app.example.com`, comma-separated or a JSON array; `"*"` alone: any); empty: CORS off, no answer changes. See docs/api.md, "CORS".',
    }),
    maxAgeSeconds: setting(z.number().int().min(0).max(86_400).default(600), {
      env: 'CORS_MAX_AGE_SECONDS',
      description: 'How long a browser may reuse a preflight answer (`Access-Control-Max-Age`, 0 … 86400; browsers cap it, Chromium at 7200).',
    }),
    allowHeaders: setting(z.array(HEADER_NAME).max(32).default([]), {
      env: 'CORS_ALLOW_HEADERS',
      list: 'comma',
      description: 'Request headers allowed beyond `Authorization`, `Content-Type` and `X-Request-Id` (a proxied backend\'s own, comma-separated; at most 32).',
    }),
    exposeHeaders: setting(z.array(HEADER_NAME).max(32).default([]), {
      env: 'CORS_EXPOSE_HEADERS',
      list: 'comma',
      description: 'Answer headers scripts may read beyond the gateway\'s own (`X-Request-Id`, `Retry-After`, `RateLimit`, `RateLimit-Policy`, `WWW-Authenticate`): a proxied backend\'s, comma-separated; at most 32.',
    }),
  }).prefault({}),

  dashboard: z.strictObject({
    enabled: setting(z.boolean().default(true), {
      env: 'DASHBOARD_ENABLED',
      description: 'Serve the owners\' dashboard (web pages over the owner API) under `dashboard.path`. See docs/dashboard.md.',
    }),
    path: setting(z.string().max(64).regex(DASHBOARD_PATH, 'expected "/" and lower-case segments of a-z 0-9 . _ - (no trailing "/")').default('/dashboard'), {
      env: 'DASHBOARD_PATH',
      description: 'Where the dashboard is served; every path under it is the gateway\'s own (never proxied). Not under /api, /owner or another own path.',
    }),
  }).prefault({}),

  metrics: z.strictObject({
    enabled: setting(z.boolean().default(true), {
      env: 'METRICS_ENABLED',
      description: 'Serve Prometheus metrics at GET /metrics (requests, upstreams, tokens, directory cache, Redis, rate limits, process; docs/operations.md). Keep it from the public internet: set `management.port`.',
    }),
    accountLabelMaxAccounts: setting(z.number().int().min(0).max(10_000).default(0), {
      env: 'METRICS_ACCOUNT_LABEL_MAX_ACCOUNTS',
      description: 'Above 0: count requests per account (`gateway_account_requests_total`) for the first this many accounts a process sees, the rest under `(other)`. 0: no account label anywhere.',
    }),
  }).prefault({}),

  management: z.strictObject({
    port: setting(z.number().int().min(0).max(65535).optional(), {
      env: 'MANAGEMENT_PORT',
      description: 'A second listener for /metrics, /healthz and /readyz only (0 picks a free one); when set, the main port answers those paths 404. Unset: they are served on the main port.',
    }),
    host: setting(z.string().min(1).optional(), {
      env: 'MANAGEMENT_HOST',
      description: 'Address of the management listener; unset: the same as `server.host`.',
    }),
  }).prefault({}),

  tls: z.strictObject({
    certFile: setting(z.string().min(1).optional(), {
      env: 'TLS_CERT_FILE',
      description: 'PEM certificate (the full chain, leaf first) that turns the main listener into HTTPS; with `tls.keyFile`. The default certificate: served when no `tls.certificates` entry names the host asked for (SNI). docs/tls.md.',
    }),
    keyFile: setting(z.string().min(1).optional(), {
      env: 'TLS_KEY_FILE',
      description: 'PEM private key of `tls.certFile`.',
    }),
    minVersion: setting(z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2'), {
      env: 'TLS_MIN_VERSION',
      description: 'Oldest TLS version the main listener accepts.',
    }),
    certificates: setting(z.array(z.strictObject({
      serverNames: z.array(z.string().regex(/^(?:\*\.)?(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/, 'expected a host name, or *.<domain> for one label')).min(1).max(100),
      certFile: z.string().min(1),
      keyFile: z.string().min(1),
    })).max(100).default([]), {
      description: 'More certificates, each served to clients asking (SNI) for one of its `serverNames` (`*.example.com` matches one label). Config file only.',
    }),
    clientCaFile: setting(z.string().min(1).optional(), {
      env: 'TLS_CLIENT_CA_FILE',
      description: 'PEM file of the CA(s) whose client certificates the main listener verifies (mTLS): every handshake asks for one, none is required by the handshake, and routes say what they need (`clientCertificate`). docs/tls.md.',
    }),
    watchIntervalMs: setting(z.number().int().min(0).max(3_600_000).default(2000), {
      env: 'TLS_WATCH_INTERVAL_MS',
      description: 'How often the certificate and key files are checked for a change; a changed, valid set is used for new handshakes (0: only on SIGHUP).',
    }),
    redirectPort: setting(z.number().int().min(0).max(65535).optional(), {
      env: 'HTTP_REDIRECT_PORT',
      description: 'With TLS on: a plain-HTTP listener on this port (0 picks a free one) that answers every request 308 to the same URL over HTTPS, and serves ACME HTTP-01 challenges.',
    }),
    publicHttpsPort: setting(z.number().int().min(1).max(65535).optional(), {
      env: 'TLS_PUBLIC_HTTPS_PORT',
      description: 'The HTTPS port clients reach, for the redirect\'s Location (omitted when 443); unset: the main listener\'s own port.',
    }),
    hstsMaxAgeSeconds: setting(z.number().int().min(0).max(63_072_000).default(31_536_000), {
      env: 'TLS_HSTS_MAX_AGE_SECONDS',
      description: 'With TLS on, every answer says `Strict-Transport-Security: max-age=<this>` (0: no header).',
    }),
    hstsIncludeSubDomains: setting(z.boolean().default(false), {
      env: 'TLS_HSTS_INCLUDE_SUBDOMAINS',
      description: 'Adds `includeSubDomains` to the HSTS header: only if every subdomain is served over HTTPS.',
    }),
  }).prefault({}),

  http2: z.strictObject({
    tls: setting(z.boolean().default(true), {
      env: 'HTTP2_TLS',
      description: 'With TLS on: offer HTTP/2 by ALPN (`h2`, then `http/1.1` for clients without it). false: HTTP/1.1 only. docs/tls.md#http2.',
    }),
    cleartext: setting(z.boolean().default(false), {
      env: 'HTTP2_CLEARTEXT',
      description: 'Without TLS: also speak HTTP/2 with prior knowledge (h2c) on the main listener, for a load balancer that talks HTTP/2 to its backends; HTTP/1.1 is still served on the same port.',
    }),
    maxConcurrentStreams: setting(z.number().int().min(1).max(1000).default(100), {
      env: 'HTTP2_MAX_CONCURRENT_STREAMS',
      description: 'Requests one HTTP/2 connection may have open at once; more are refused (REFUSED_STREAM) for the client to retry.',
    }),
  }).prefault({}),

  // ACME (docs/tls.md, "ACME"): on while acme.directoryUrl is set.
  acme: z.strictObject({
    directoryUrl: setting(z.url({ protocol: /^https?$/ }).optional(), {
      env: 'ACME_DIRECTORY_URL',
      description: 'ACME directory the gateway obtains and renews its certificate from (Let\'s Encrypt: https://acme-v02.api.letsencrypt.org/directory); with `acme.domains`. Validated by HTTP-01 on `tls.redirectPort` when set, else by TLS-ALPN-01 on the main listener. Without `tls.certFile` the main listener is HTTPS with it. docs/tls.md.',
    }),
    email: setting(z.email().optional(), {
      env: 'ACME_EMAIL',
      description: 'Contact address given to the ACME account (expiry notices).',
    }),
    domains: setting(z.array(z.string().regex(/^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/, 'expected a host name (HTTP-01 cannot validate a wildcard)').max(253)).max(100).default([]), {
      env: 'ACME_DOMAINS',
      list: 'comma',
      description: 'Names the ACME certificate covers (comma-separated or a JSON array); the first is its subject. Each must reach the gateway: port 80 to `tls.redirectPort` (HTTP-01), or port 443 to the main listener (TLS-ALPN-01).',
    }),
    eabKid: setting(z.string().min(1).max(1024).optional(), {
      env: 'ACME_EAB_KID',
      description: 'External account binding key id, for CAs that require one (ZeroSSL, Google); with `acme.eabHmacKey`.',
    }),
    eabHmacKey: setting(z.string().regex(/^[A-Za-z0-9_-]+={0,2}$/, 'expected base64url').max(1024).optional(), {
      env: 'ACME_EAB_HMAC_KEY',
      secret: true,
      description: 'External account binding HMAC key (base64url), as the CA gave it; with `acme.eabKid`.',
    }),
    renewBeforeDays: setting(z.number().int().min(1).max(89).default(30), {
      env: 'ACME_RENEW_BEFORE_DAYS',
      description: 'Renews the certificate this many days before it expires; a failed order is retried after 1 minute, then 2, 4, … up to a day.',
    }),
    stateFile: setting(z.string().min(1).default('data/acme.json'), {
      env: 'ACME_STATE_FILE',
      description: 'Without Redis: where the account key and the certificate are kept (mode 0600; relative paths: from the working directory). With Redis they are kept there, shared by every instance.',
    }),
  }).prefault({}),

  readiness: z.strictObject({
    requireRedis: setting(z.boolean().default(false), {
      env: 'READINESS_REQUIRE_REDIS',
      description: 'true: /readyz answers 503 while Redis (or a directory kept in Redis) is down. false: the instance stays ready, `degraded`, since calls with valid tokens go on and every instance shares that Redis. See docs/redis.md, Readiness.',
    }),
  }).prefault({}),

  log: z.strictObject({
    level: setting(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), {
      env: 'LOG_LEVEL',
      description: 'Lowest level written to standard output (JSON lines).',
    }),
  }).prefault({}),

  // OpenTelemetry tracing (docs/tracing.md). Off, and its SDK never loaded, while otlpEndpoint is unset.
  tracing: z.strictObject({
    otlpEndpoint: setting(z.url({ protocol: /^https?$/, normalize: true })
      .refine((u) => !/[?#]/.test(u) && new URL(u).username === '', 'expected scheme://host[:port][/base path], without credentials, query or fragment (send credentials in OTEL_EXPORTER_OTLP_HEADERS)')
      .optional(), {
      env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
      description: 'Base URL of an OTLP/HTTP collector (`http://collector:4318`): spans go to its `/v1/traces` as JSON. Unset: tracing off (an incoming `traceparent` then passes to backends only from `proxy.trustedProxies`). See docs/tracing.md.',
    }),
    serviceName: setting(z.string().min(1).max(128).default('auth-gateway'), {
      env: 'OTEL_SERVICE_NAME',
      description: 'The `service.name` the gateway\'s spans carry.',
    }),
    sampleRatio: setting(z.number().min(0).max(1).default(1), {
      env: 'TRACING_SAMPLE_RATIO',
      description: 'Share of new traces recorded (0 … 1); a trace a trusted peer started keeps that peer\'s decision (parent-based sampling).',
    }),
  }).prefault({}),
}).superRefine((c, ctx) => {
  const t = c.tokens;
  if (t.accessTokenTtlSeconds >= t.refreshTokenTtlSeconds) {
    ctx.addIssue({ code: 'custom', path: ['tokens', 'accessTokenTtlSeconds'], message: 'must be shorter than tokens.refreshTokenTtlSeconds' });
  }
  if (t.refreshTokenTtlSeconds > t.refreshFamilyMaxSeconds) {
    ctx.addIssue({ code: 'custom', path: ['tokens', 'refreshTokenTtlSeconds'], message: 'must not exceed tokens.refreshFamilyMaxSeconds' });
  }
  if (c.roles.defaultLimit > c.roles.maxLimit) {
    ctx.addIssue({ code: 'custom', path: ['roles', 'defaultLimit'], message: 'must not exceed roles.maxLimit' });
  }
  if (!isKnownTimeZone(c.data.timeZone)) {
    ctx.addIssue({ code: 'custom', path: ['data', 'timeZone'], message: 'expected an IANA time zone such as "UTC" or "Europe/Berlin"' });
  }
  refineTls(c, ctx);
  const redisModes = [c.redis.url !== undefined, c.redis.sentinels.length > 0, c.redis.clusterNodes.length > 0].filter(Boolean).length;
  if (redisModes > 1) {
    ctx.addIssue({ code: 'custom', path: ['redis'], message: 'give one of redis.url, redis.sentinels or redis.clusterNodes' });
  }
  if ((c.redis.tlsCertFile === undefined) !== (c.redis.tlsKeyFile === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['redis', c.redis.tlsCertFile === undefined ? 'tlsCertFile' : 'tlsKeyFile'], message: 'give both redis.tlsCertFile and redis.tlsKeyFile, or neither' });
  }
  const redisTls = c.redis.url === undefined ? c.redis.tls : c.redis.url.startsWith('rediss:');
  for (const name of ['tlsCaFile', 'tlsCertFile', 'tlsKeyFile'] as const) {
    if (c.redis[name] !== undefined && !redisTls) {
      ctx.addIssue({ code: 'custom', path: ['redis', name], message: 'needs TLS to Redis: a rediss:// URL, or redis.tls with sentinels or Cluster nodes' });
    }
  }
  if ((c.redis.sentinelUsername !== undefined || c.redis.sentinelPassword !== undefined) && c.redis.sentinels.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['redis', c.redis.sentinelPassword !== undefined ? 'sentinelPassword' : 'sentinelUsername'], message: 'only for sentinels: set redis.sentinels' });
  }
  if (c.directory.store === 'redis' && redisModes === 0) {
    ctx.addIssue({ code: 'custom', path: ['directory', 'store'], message: '"redis" needs Redis: set redis.url (REDIS_URL), redis.sentinels or redis.clusterNodes' });
  }
  if (c.directory.store === 'http') {
    const { signUrl, rolesUrl } = c.directory.http;
    for (const [name, url, placeholders] of [['signUrl', signUrl, ['{accountId}', '{address}']], ['rolesUrl', rolesUrl, ['{accountId}']]] as const) {
      if (url === undefined) {
        ctx.addIssue({ code: 'custom', path: ['directory', 'http', name], message: 'required when directory.store is "http"' });
      } else if (!isUrlTemplate(url, placeholders)) {
        ctx.addIssue({ code: 'custom', path: ['directory', 'http', name], message: `expected an http(s) URL without credentials or fragment, containing ${placeholders.join(' and ')}` });
      }
    }
  }
  if (!isKnownTimeZone(c.directory.timeZone)) {
    ctx.addIssue({ code: 'custom', path: ['directory', 'timeZone'], message: 'expected an IANA time zone such as "UTC" or "Europe/Berlin"' });
  }
  if (c.data.keySource === 'redis' && redisModes === 0) {
    ctx.addIssue({ code: 'custom', path: ['data', 'keySource'], message: '"redis" needs Redis: set redis.url (REDIS_URL), redis.sentinels or redis.clusterNodes' });
  }
  const prefixes = c.routes.map((r) => r.prefix.toLowerCase());
  prefixes.forEach((prefix, i) => {
    // The owner API and its description are the gateway's own, whatever the routes say.
    if (prefix === '/owner' || prefix.startsWith('/owner/') || prefix === '/openapi.json') {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'prefix'], message: `"${c.routes[i]!.prefix}" is the gateway's own (the owner API under /owner, /openapi.json)` });
    }
  });
  if (c.dashboard.enabled) {
    const dashboard = c.dashboard.path;
    if (OWN_FIRST_SEGMENTS.includes(dashboard.split('/')[1]!)) {
      ctx.addIssue({ code: 'custom', path: ['dashboard', 'path'], message: `"${dashboard}" is under one of the gateway's own paths (/${OWN_FIRST_SEGMENTS.join(', /')})` });
    }
    prefixes.forEach((prefix, i) => {
      // A route at or under the dashboard would never be reached: the dashboard's tree is the gateway's own.
      if (prefix === dashboard || prefix.startsWith(`${dashboard}/`)) {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'prefix'], message: `"${c.routes[i]!.prefix}" is under the dashboard (dashboard.path "${dashboard}"): move one of them, or set dashboard.enabled false` });
      }
    });
  }
  prefixes.forEach((prefix, i) => {
    if (prefixes.indexOf(prefix) !== i) ctx.addIssue({ code: 'custom', path: ['routes', i, 'prefix'], message: `duplicate prefix "${c.routes[i]!.prefix}" (prefixes compare without case)` });
  });
  if (c.workers !== undefined && c.workers !== 1 && (redisModes === 0 || c.signing.keys.length === 0)) {
    ctx.addIssue({ code: 'custom', path: ['workers'], message: 'several workers need Redis (shared state) and signing.keys (one key for all of them)' });
  }
  refineIssuers(c, ctx);
  const builtInHeaders = new Set(Object.values(c.proxy.identityHeaders).map((name) => name.toLowerCase()));
  c.routes.forEach((route, i) => {
    for (const name of Object.keys(route.identityHeaders ?? {})) {
      if (builtInHeaders.has(name.toLowerCase())) ctx.addIssue({ code: 'custom', path: ['routes', i, 'identityHeaders', name], message: `"${name}" is one of proxy.identityHeaders, the gateway's own` });
    }
  });
  const routeNames = new Set(['sign', 'roles', 'introspect', 'leaks', ...c.routes.map((r) => r.name ?? r.prefix)]);
  c.limits.rules.forEach((rule, i) => {
    if (rule.route !== undefined && !routeNames.has(rule.route)) {
      ctx.addIssue({ code: 'custom', path: ['limits', 'rules', i, 'route'], message: `no route is named "${rule.route}" (known: ${[...routeNames].join(', ')})` });
    }
  });
  if (c.cors.allowedOrigins.includes('*') && c.cors.allowedOrigins.length > 1) {
    ctx.addIssue({ code: 'custom', path: ['cors', 'allowedOrigins'], message: '"*" allows every origin: give it alone, or list the origins without it' });
  }
  refineMail(c, ctx);
  const kids = c.signing.keys.map((k) => k.kid);
  kids.forEach((kid, i) => {
    if (kids.indexOf(kid) !== i) ctx.addIssue({ code: 'custom', path: ['signing', 'keys', i, 'kid'], message: `duplicate kid "${kid}"` });
  });
  if (c.signing.activeKid !== undefined && !kids.includes(c.signing.activeKid)) {
    ctx.addIssue({ code: 'custom', path: ['signing', 'activeKid'], message: 'must name one of signing.keys' });
  }
});

/** Mail needs a sender and the origin its links point at (never a request's Host, which a client chooses). */
function refineMail(c: Pick<Config, 'mail' | 'owner'>, ctx: z.RefinementCtx): void {
  if (c.mail.smtpUrl === undefined) return;
  if (c.owner.publicOrigin === undefined) ctx.addIssue({ code: 'custom', path: ['owner', 'publicOrigin'], message: 'mail (mail.smtpUrl) needs the origin its links point at: set owner.publicOrigin (OWNER_PUBLIC_ORIGIN)' });
  if (c.mail.from === undefined) ctx.addIssue({ code: 'custom', path: ['mail', 'from'], message: 'mail (mail.smtpUrl) needs a sender: set mail.from (MAIL_FROM)' });
}

/** Each trusted issuer once and none named like the gateway itself; every issuer a route names configured. */
function refineIssuers(c: Pick<Config, 'trustedIssuers' | 'routes' | 'tokens'>, ctx: z.RefinementCtx): void {
  const known = c.trustedIssuers.map((i) => i.issuer);
  known.forEach((issuer, i) => {
    if (known.indexOf(issuer) !== i) ctx.addIssue({ code: 'custom', path: ['trustedIssuers', i, 'issuer'], message: `duplicate issuer "${issuer}"` });
    if (issuer === c.tokens.issuer || issuer === SELF_ISSUER) ctx.addIssue({ code: 'custom', path: ['trustedIssuers', i, 'issuer'], message: `"${issuer}" is the gateway's own issuer (tokens.issuer)` });
  });
  c.routes.forEach((route, i) => {
    route.issuers.forEach((issuer, j) => {
      if (issuer !== SELF_ISSUER && !known.includes(issuer)) {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'issuers', j], message: `route "${route.name ?? route.prefix}" accepts issuer "${issuer}", which is not in trustedIssuers (known: ${['self', ...known].join(', ')})` });
      }
    });
  });
}

/** The TLS settings that only make sense together, and the routes that need client certificates. */
function refineTls(c: Pick<Config, 'tls' | 'routes' | 'acme'>, ctx: z.RefinementCtx): void {
  if ((c.tls.certFile === undefined) !== (c.tls.keyFile === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['tls', c.tls.certFile === undefined ? 'certFile' : 'keyFile'], message: 'give both tls.certFile and tls.keyFile (TLS_CERT_FILE, TLS_KEY_FILE), or neither' });
  }
  if (c.tls.redirectPort !== undefined && !isTlsOn(c)) {
    ctx.addIssue({ code: 'custom', path: ['tls', 'redirectPort'], message: 'redirects to HTTPS: set tls.certFile and tls.keyFile, or acme.directoryUrl' });
  }
  acmeIssues(c, ctx);
  if (c.tls.clientCaFile !== undefined && !isTlsOn(c)) {
    ctx.addIssue({ code: 'custom', path: ['tls', 'clientCaFile'], message: 'client certificates need TLS: set tls.certFile and tls.keyFile, or acme.directoryUrl' });
  }
  c.routes.forEach((route, i) => {
    if (route.clientCertificate !== undefined && c.tls.clientCaFile === undefined) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'clientCertificate'], message: 'needs the CA that client certificates are verified against: set tls.clientCaFile (TLS_CLIENT_CA_FILE)' });
    }
  });
  if (c.tls.certificates.length > 0 && c.tls.certFile === undefined) {
    ctx.addIssue({ code: 'custom', path: ['tls', 'certificates'], message: 'needs the default certificate: set tls.certFile and tls.keyFile' });
  }
}

/** Spelt exactly as a browser's Origin header spells it, so the CSRF check can compare strings. */
function isOrigin(value: string): boolean {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}

/** An SSO issuer: https, or plain http on a loopback host (a provider the tests start; never over a network). */
export function isSsoIssuer(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
  } catch {
    return false;
  }
}

export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** An http(s) URL, once its placeholders are filled, that names every placeholder given. */
function isUrlTemplate(template: string, placeholders: readonly string[]): boolean {
  if (!placeholders.every((p) => template.includes(p))) return false;
  try {
    const url = new URL(template.replaceAll(/\{(accountId|address)\}/g, 'x'));
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '' && url.hash === '';
  } catch {
    return false;
  }
}

function isKnownTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

export type Config = z.infer<typeof configSchema>;

/** True when shared state lives in Redis rather than process memory. */
/** ACME obtains the gateway's certificate (docs/tls.md, "ACME"). */
export function isAcmeOn(config: Pick<Config, 'acme'>): boolean {
  return config.acme.directoryUrl !== undefined;
}

/** The main listener speaks HTTPS: with certificate files, or with ACME. */
export function isTlsOn(config: Pick<Config, 'tls' | 'acme'>): boolean {
  return config.tls.certFile !== undefined || isAcmeOn(config);
}

function acmeIssues(c: Pick<Config, 'tls' | 'acme'>, ctx: z.RefinementCtx): void {
  const { acme } = c;
  if (acme.directoryUrl !== undefined && acme.domains.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['acme', 'domains'], message: 'ACME needs the names to order for: set acme.domains (ACME_DOMAINS)' });
  }
  if (acme.directoryUrl === undefined && (acme.domains.length > 0 || acme.email !== undefined || acme.eabKid !== undefined || acme.eabHmacKey !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['acme', 'directoryUrl'], message: 'the acme settings need the CA\'s directory: set acme.directoryUrl (ACME_DIRECTORY_URL)' });
  }
  if ((acme.eabKid === undefined) !== (acme.eabHmacKey === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['acme', acme.eabKid === undefined ? 'eabKid' : 'eabHmacKey'], message: 'give both acme.eabKid and acme.eabHmacKey (ACME_EAB_KID, ACME_EAB_HMAC_KEY), or neither' });
  }
}

export function usesRedis(config: Pick<Config, 'redis'>): boolean {
  return config.redis.url !== undefined || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
}
export type SigningKeyConfig = z.infer<typeof signingKeySchema>;
export type RouteConfig = z.infer<typeof routeSchema>;
export type RuleConfig = z.infer<typeof ruleSchema>;
export type WindowConfig = z.infer<typeof windowSchema>;
export type QuotaRuleConfig = z.infer<typeof quotaRuleSchema>;
export type StoreFailurePolicy = (typeof STORE_FAILURE_POLICIES)[number];
export type IdentityPart = (typeof IDENTITY_PARTS)[number];

export interface SettingRow {
  path: string;
  type: string;
  default: unknown;
  env: string | undefined;
  secret: boolean;
  /** The environment value may be a comma-separated list (SettingMeta.list). */
  commaList: boolean;
  description: string;
}

/**
 * The leaf settings of the schema, in declaration order: the source of the settings table in
 * docs/configuration.md and of the environment names load.ts reads.
 */
export function describeSettings(): SettingRow[] {
  const rows: SettingRow[] = [];
  walk(configSchema, []);
  return rows;

  function walk(schema: z.ZodType, path: string[]): void {
    const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
    const meta = schema.meta() as SettingMeta | undefined;
    if (meta?.description !== undefined) {
      rows.push({
        path: path.join('.'),
        type: leafType(schema),
        default: def.type === 'default' ? def.defaultValue : undefined,
        env: meta.env,
        secret: meta.secret === true,
        commaList: meta.list === 'comma',
        description: meta.description,
      });
      return;
    }
    if (def.type === 'object') {
      for (const [key, child] of Object.entries((schema as unknown as z.ZodObject).shape)) walk(child as z.ZodType, [...path, key]);
      return;
    }
    const inner = (def.innerType ?? def.in) as z.ZodType | undefined;
    if (inner !== undefined) walk(inner, path);
  }
}

/** The JSON type of a leaf ("number", "string", "boolean", "array", "enum"), through wrappers. */
export function leafType(schema: z.ZodType): string {
  let def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
  while (def.innerType !== undefined) def = (def.innerType as { _zod: { def: typeof def } })._zod.def;
  return def.type;
}

/**
 * How many processes serve the port: `workers` as set (0: one per CPU), or unset, one per CPU
 * (`cores`: os.availableParallelism(), which counts the affinity mask and the cgroup quota) when
 * the state they must share is configured (Redis and signing keys), else one.
 */
export function workerCount(c: Pick<Config, 'workers' | 'redis' | 'signing'>, cores: number): number {
  if (c.workers !== undefined) return c.workers === 0 ? cores : c.workers;
  const shared = (c.redis.url !== undefined || c.redis.sentinels.length > 0 || c.redis.clusterNodes.length > 0) && c.signing.keys.length > 0;
  return shared ? cores : 1;
}
