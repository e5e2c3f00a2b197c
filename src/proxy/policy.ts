/**
 * A route's `allow` rules (docs/policies.md), compiled once per route table and asked once per
 * admitted request or handshake: the first rule whose every selector matches allows it; none
 * matching refuses it (403), or in `allowMode: "report"` lets it through to be logged and counted.
 *
 * Compiled, not interpreted: methods become a set, a rule's path patterns one case-insensitive
 * regular expression (path-to-regexp, the matcher @koa/router uses), sources a node:net
 * BlockList per rule (the ranges read by ipaddr.js once: a request's address is checked in C++,
 * where parsing it with ipaddr.js cost 3 µs, most of 20 rules' cost: bench/policies.ts).
 * Paths are matched as the route table matches them (routes.ts): the normalised path without
 * its query and segment parameters, without case, so `/ADMIN` or `/admin;x=1` cannot slip past
 * a rule meant for `/admin`. A rule that names a caller's selector (scopes, roles, claims,
 * accounts) never matches an anonymous caller (the schema refuses them on a public route).
 *
 * What it refuses to do: read the body, or look anything up. A decision is a pure function of
 * the request line, the client address and the verified token. test/proxy/policies.test.ts.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';
import { pathToRegexp } from 'path-to-regexp';
import type { Identity } from '../auth/bearer.js';
import { NO_RULE, type RuleConfig } from '../config/schema.js';

interface CompiledRule {
  /** The metric label and log name: the rule's `name`, else its index in the list. */
  readonly label: string;
  readonly methods: ReadonlySet<string> | undefined;
  readonly paths: RegExp | undefined;
  readonly sources: BlockList | undefined;
  readonly accounts: ReadonlySet<string> | undefined;
  readonly roles: readonly string[] | undefined;
  readonly claims: readonly (readonly [string, readonly unknown[]])[] | undefined;
  readonly scopes: readonly string[] | undefined;
  readonly anyScopes: readonly string[] | undefined;
}

/** What one request is: the parts of it rules look at. `clientIp`: read only when a rule names sources. */
export interface PolicyRequest {
  method: string;
  /** The normalised request target (path and query). */
  url: string;
  identity: Identity | undefined;
  clientIp: () => string | undefined;
}

export interface PolicyDecision {
  /** True when a rule matched. */
  allowed: boolean;
  /** The matching rule's label, or NO_RULE. */
  rule: string;
  /** When no rule matched: the scopes the first rule that failed only on scopes wanted (space-separated). */
  missingScopes?: string;
}

export interface Policy {
  /** `allowMode: "report"`: a refusal is logged and counted, and the request goes on. */
  readonly report: boolean;
  decide(request: PolicyRequest): PolicyDecision;
}

/** The compiled rules of one route, or undefined when it has none (every caller it admits passes). */
export function compilePolicy(rules: readonly RuleConfig[] | undefined, mode: 'enforce' | 'report'): Policy | undefined {
  if (rules === undefined) return undefined;
  const compiled = rules.map(compileRule);
  const needsPath = compiled.some((rule) => rule.paths !== undefined);
  return {
    report: mode === 'report',
    decide(request) {
      const path = needsPath ? pathKey(request.url) : '';
      let ip: string | undefined;
      let family: 'ipv4' | 'ipv6' | null | undefined;
      let missingScopes: string | undefined;
      for (const rule of compiled) {
        if (rule.methods !== undefined && !rule.methods.has(request.method)) continue;
        if (rule.paths !== undefined && !rule.paths.test(path)) continue;
        if (rule.sources !== undefined) {
          if (family === undefined) {
            ip = request.clientIp();
            family = ip === undefined ? null : isIPv4(ip) ? 'ipv4' : isIPv6(ip) ? 'ipv6' : null;
          }
          if (family === null || !rule.sources.check(ip!, family)) continue;
        }
        if (!matchesCaller(rule, request.identity)) continue;
        const missing = missingScopesOf(rule, request.identity);
        if (missing === undefined) return { allowed: true, rule: rule.label };
        missingScopes ??= missing;
      }
      return missingScopes === undefined ? { allowed: false, rule: NO_RULE } : { allowed: false, rule: NO_RULE, missingScopes };
    },
  };
}

function compileRule(rule: RuleConfig, index: number): CompiledRule {
  const methods = rule.methods === undefined ? undefined : new Set<string>(rule.methods);
  // A HEAD is a GET without the body (RFC 9110 §9.3.2): a rule that lets GET through lets HEAD.
  if (methods?.has('GET') === true) methods.add('HEAD');
  return {
    label: rule.name ?? String(index),
    methods,
    paths: rule.paths === undefined ? undefined : pathToRegexp(rule.paths, { sensitive: false, end: true, trailing: true }).regexp,
    sources: rule.sources === undefined ? undefined : blockListOf(rule.sources),
    accounts: rule.accounts === undefined ? undefined : new Set(rule.accounts),
    roles: rule.roles,
    claims: rule.claims === undefined ? undefined : Object.entries(rule.claims).map(([name, value]) => [name, Array.isArray(value) ? value : [value]] as const),
    scopes: rule.scopes,
    anyScopes: rule.anyScopes,
  };
}

/** The selectors about who calls, but scopes (missingScopesOf). */
function matchesCaller(rule: CompiledRule, identity: Identity | undefined): boolean {
  if (rule.accounts === undefined && rule.roles === undefined && rule.claims === undefined && rule.scopes === undefined && rule.anyScopes === undefined) return true;
  if (identity === undefined) return false;
  if (rule.accounts !== undefined && !rule.accounts.has(identity.accountId)) return false;
  if (rule.roles !== undefined) {
    // A trusted issuer's roles come from its `rolesClaim`; the gateway's own tokens carry `roles`.
    const held = identity.roles ?? rolesOf(identity.claims);
    if (!rule.roles.some((role) => held.includes(role))) return false;
  }
  if (rule.claims !== undefined) {
    for (const [name, wanted] of rule.claims) {
      if (!claimMatches(identity.claims?.[name], wanted)) return false;
    }
  }
  return true;
}

/** The scopes the caller lacks for this rule (space-separated), or undefined when it has them. */
function missingScopesOf(rule: CompiledRule, identity: Identity | undefined): string | undefined {
  const held = identity?.scopes ?? [];
  if (rule.scopes !== undefined) {
    const missing = rule.scopes.filter((scope) => !held.includes(scope));
    if (missing.length > 0) return missing.join(' ');
  }
  if (rule.anyScopes !== undefined && !rule.anyScopes.some((scope) => held.includes(scope))) return rule.anyScopes.join(' ');
  return undefined;
}

/** The token's `roles` claim: a list of strings, or one space-separated string. */
function rolesOf(claims: Readonly<Record<string, unknown>> | undefined): readonly unknown[] {
  const roles = claims?.roles;
  if (Array.isArray(roles)) return roles;
  return typeof roles === 'string' ? roles.split(' ') : [];
}

/** A claim matches when it equals one of the values, or, being a list, holds one of them. */
function claimMatches(value: unknown, wanted: readonly unknown[]): boolean {
  if (Array.isArray(value)) return value.some((item) => wanted.includes(item));
  return value !== undefined && wanted.includes(value);
}

/** The path as routes.ts matches it: no query, no segment parameters. */
function pathKey(url: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  return path.includes(';') ? path.replace(/;[^/]*/g, '') : path;
}

/**
 * The rule's sources as a BlockList. An IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`) is
 * added as the IPv4 range it is, since the client address is compared unmapped
 * (http/client-address.ts createClientIp).
 */
function blockListOf(sources: readonly string[]): BlockList {
  const list = new BlockList();
  for (const source of sources) {
    const [address, bits] = source.includes('/') ? ipaddr.parseCIDR(source) : (() => {
      const parsed = ipaddr.parse(source);
      return [parsed, parsed.kind() === 'ipv4' ? 32 : 128] as const;
    })();
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      list.addSubnet((address as ipaddr.IPv6).toIPv4Address().toString(), bits - 96, 'ipv4');
    } else {
      list.addSubnet(address.toString(), bits, address.kind());
    }
  }
  return list;
}
