/**
 * The trusted-issuer settings as the gateway loads them: every configuration docs/identity-providers.md
 * shows loads (so the page cannot drift into configs that fail), and the mistakes an operator
 * can make are start-up errors that say where.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.js';

const page = readFileSync(new URL('../../docs/identity-providers.md', import.meta.url), 'utf8');

function problemsOf(overrides: Record<string, unknown>, env: Record<string, string> = {}): readonly string[] {
  try {
    loadConfig({ env, overrides });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

test('every configuration docs/identity-providers.md shows loads, with the claims its table names', () => {
  const blocks = [...page.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as { trustedIssuers: Record<string, unknown>[] });
  assert.equal(blocks.length, 6, 'the opening example and one per provider');
  const loaded = blocks.map((block) => loadConfig({ env: {}, overrides: block }));
  const byHost = new Map(loaded.map((config) => [new URL(config.trustedIssuers[0]!.issuer).host, config.trustedIssuers[0]!]));
  assert.equal(byHost.get('keycloak.example.com')?.rolesClaim, 'realm_access.roles');
  assert.equal(byHost.get('example.okta.com')?.scopeClaim, 'scp');
  assert.equal(byHost.get('login.microsoftonline.com')?.accountClaim, 'oid');
  assert.equal(byHost.get('cognito-idp.eu-west-1.amazonaws.com')?.audienceClaim, 'client_id');
  assert.equal(byHost.get('example-tenant.eu.auth0.com')?.issuer.endsWith('/'), true);
  for (const config of loaded) assert.ok(config.routes.every((r) => r.issuers.every((i) => i === 'self' || config.trustedIssuers.some((t) => t.issuer === i))));

  const sh = /export TRUSTED_ISSUERS='(.*)'\nexport ROUTES='(.*)'/.exec(page);
  assert.ok(sh !== null, 'the environment example');
  const fromEnv = loadConfig({ env: { TRUSTED_ISSUERS: sh[1]!, ROUTES: sh[2]! } });
  assert.equal(fromEnv.trustedIssuers[0]!.audience, 'orders-api');
  assert.deepEqual(fromEnv.routes[0]!.issuers, ['self', 'https://keycloak.example.com/realms/shop']);
});

test('defaults: routes accept the gateway\'s own tokens only, and send the four identity headers', () => {
  const config = loadConfig({ env: {}, overrides: { routes: [{ prefix: '/a', targets: ['http://127.0.0.1:1'] }], trustedIssuers: [{ issuer: 'https://idp.example', audience: 'a' }] } });
  assert.deepEqual(config.routes[0]!.issuers, ['self']);
  assert.deepEqual(config.routes[0]!.identity, ['account', 'key', 'token', 'request']);
  assert.deepEqual(config.trustedIssuers[0]!.algorithms, ['RS256', 'PS256', 'ES256', 'EdDSA']);
  assert.equal(config.trustedIssuers[0]!.accountClaim, 'sub');
});

test('a route naming an issuer that is not trusted is a configuration error naming the route', () => {
  const problems = problemsOf({ routes: [{ name: 'partners', prefix: '/p', targets: ['http://127.0.0.1:1'], issuers: ['self', 'https://idp.example'] }] });
  assert.equal(problems.length, 1, problems.join('\n'));
  assert.match(problems[0]!, /^routes\.0\.issuers\.1: route "partners" accepts issuer "https:\/\/idp\.example", which is not in trustedIssuers/);
});

test('what a trusted issuer may not be: symmetric or no algorithm, the gateway\'s own issuer, twice, a URL with credentials', () => {
  const base = { issuer: 'https://idp.example', audience: 'a' };
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, algorithms: ['HS256'] }] }).some((p) => p.startsWith('trustedIssuers.0.algorithms.0')));
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, algorithms: ['none'] }] }).some((p) => p.startsWith('trustedIssuers.0.algorithms.0')));
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, algorithms: [] }] }).some((p) => p.startsWith('trustedIssuers.0.algorithms')));
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, issuer: 'https://gw.example' }], tokens: { issuer: 'https://gw.example' } }).some((p) => p.startsWith('trustedIssuers.0.issuer') && p.includes('own issuer')));
  assert.ok(problemsOf({ trustedIssuers: [base, base] }).some((p) => p.startsWith('trustedIssuers.1.issuer') && p.includes('duplicate')));
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, issuer: 'https://user:pw@idp.example' }] }).some((p) => p.startsWith('trustedIssuers.0.issuer')));
  assert.ok(problemsOf({ trustedIssuers: [{ ...base, unknownField: 1 }] }).length > 0, 'unknown keys are errors');
  assert.ok(problemsOf({}, { TRUSTED_ISSUERS: 'not json' }).some((p) => p.includes('TRUSTED_ISSUERS')));
  assert.ok(problemsOf({ routes: [{ prefix: '/a', targets: ['http://127.0.0.1:1'], issuers: ['self', 'self'] }] }).some((p) => p.startsWith('routes.0.issuers')));
  const publicRoute = problemsOf({ trustedIssuers: [base], routes: [{ prefix: '/a', targets: ['http://127.0.0.1:1'], auth: 'public', issuers: ['https://idp.example'] }] });
  assert.ok(publicRoute.some((p) => p.startsWith('routes.0.issuers') && p.includes('public route')), publicRoute.join('\n'));
});
