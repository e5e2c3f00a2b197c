import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { call, DEMO, signIn, startGateway, type JsonResponse } from '../helpers/gateway.js';

interface DataRole { id: number; slug: string; name: string; description: string; public: boolean }

/** The roles of the demo data file, in the listing representation the gateway must answer. */
const demo = JSON.parse(readFileSync(new URL('../../config/demo-data.json', import.meta.url), 'utf8')) as {
  accounts: { id: string; roles: DataRole[] }[];
};
function listedRoles(accountId: string) {
  const account = demo.accounts.find((a) => a.id === accountId)!;
  return account.roles
    .map((r) => ({ id: r.id, slug: r.slug, name: r.name, description: r.description, public: r.public ? 1 : 0 }))
    .sort((a, b) => a.id - b.id);
}
const ALICE_ROLES = listedRoles(DEMO.alice.accountId);
const BOB_ROLES = listedRoles(DEMO.bob.accountId);

/** Checks the envelope and the exact listing representation; returns the message. */
function assertListing(res: JsonResponse, label = ''): { pages: string; total: number; items: any[] } {
  assert.equal(res.status, 200, `${label} ${JSON.stringify(res.body)}`);
  assert.match(res.headers.get('content-type')!, /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.equal(res.body.success, true);
  const message = res.body.message;
  assert.deepEqual(Object.keys(message).sort(), ['items', 'pages', 'total']);
  assert.equal(typeof message.pages, 'string', 'pages is a string');
  assert.match(message.pages, /^(0|[1-9][0-9]*)$/);
  assert.ok(Number.isInteger(message.total), 'total is a JSON integer');
  assert.ok(Array.isArray(message.items));
  for (const item of message.items) {
    assert.deepEqual(Object.keys(item).sort(), ['description', 'id', 'name', 'public', 'slug']);
    assert.ok(Number.isInteger(item.id), 'id is a JSON number');
    assert.equal(typeof item.slug, 'string');
    assert.equal(typeof item.name, 'string');
    assert.equal(typeof item.description, 'string');
    assert.ok(item.public === 0 || item.public === 1, 'public is the number 0 or 1');
  }
  return message;
}

function assertInvalidRequest(res: JsonResponse, label: string): void {
  assert.equal(res.status, 400, `${label}: ${JSON.stringify(res.body)}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, label);
  assert.equal(res.body.success, false, label);
  assert.equal(res.body.message.code, 'invalid_request', label);
}

test('GET /api/roles', async (t) => {
  const gw = await startGateway(t);
  const alice = await signIn(gw, DEMO.alice);
  const bob = await signIn(gw, DEMO.bob);
  const roles = (query = '', token = alice.accessToken) => call(`${gw.url}/api/roles${query === '' ? '' : `?${query}`}`, { token });

  await t.test('the demo data holds what these tests rely on', () => {
    assert.equal(ALICE_ROLES.length, 12);
    assert.equal(BOB_ROLES.length, 2);
  });

  await t.test('page 1 by default, 10 roles by id, in the listing representation', async () => {
    const message = assertListing(await roles());
    assert.equal(message.pages, '2');
    assert.equal(message.total, 12);
    assert.deepEqual(message.items, ALICE_ROLES.slice(0, 10));
    assert.deepEqual(message.items.map((r) => r.id), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // public comes from the data file's booleans: Viewer is public, Administrator is not.
    assert.equal(message.items.find((r) => r.slug === 'viewer')?.public, 1);
    assert.equal(message.items.find((r) => r.slug === 'admin')?.public, 0);
    assert.deepEqual(assertListing(await roles('page=1')), message);
    assert.deepEqual(assertListing(await roles('page=1&limit=10')), message);
  });

  await t.test('page 2 holds the last two roles', async () => {
    const message = assertListing(await roles('page=2'));
    assert.equal(message.pages, '2');
    assert.equal(message.total, 12);
    assert.deepEqual(message.items, ALICE_ROLES.slice(10));
    assert.deepEqual(message.items.map((r) => r.id), [11, 12]);
  });

  await t.test('limit=5 gives three pages', async () => {
    const pages = [1, 2, 3].map((page) => roles(`page=${page}&limit=5`));
    const [one, two, three] = (await Promise.all(pages)).map((res) => assertListing(res));
    for (const message of [one!, two!, three!]) {
      assert.equal(message.pages, '3');
      assert.equal(message.total, 12);
    }
    assert.deepEqual(one!.items, ALICE_ROLES.slice(0, 5));
    assert.deepEqual(two!.items, ALICE_ROLES.slice(5, 10));
    assert.deepEqual(three!.items, ALICE_ROLES.slice(10));
  });

  await t.test('a page past the end is empty, with the same total and pages', async () => {
    for (const query of ['page=3', 'page=4&limit=5', 'page=1000000', 'page=2&limit=100']) {
      const message = assertListing(await roles(query), query);
      assert.deepEqual(message.items, [], query);
      assert.equal(message.total, 12, query);
    }
    assert.equal(assertListing(await roles('page=3')).pages, '2');
  });

  await t.test('limit=100, the maximum, is accepted', async () => {
    const message = assertListing(await roles('limit=100'));
    assert.equal(message.pages, '1');
    assert.equal(message.total, 12);
    assert.deepEqual(message.items, ALICE_ROLES);
  });

  await t.test('name searches role names as a case-insensitive substring', async () => {
    const managers = ALICE_ROLES.filter((r) => r.name === 'Billing Manager' || r.name === 'Release Manager');
    for (const name of ['MAN', 'man', 'Manager', 'mAnAgEr']) {
      const message = assertListing(await roles(`name=${name}`), name);
      assert.deepEqual(message.items, managers, name);
      assert.equal(message.total, 2, name);
      assert.equal(message.pages, '1', name);
    }
    const admins = assertListing(await roles('name=ADMIN'));
    assert.deepEqual(admins.items.map((r) => r.name), ['Administrator']);
    // An encoded space is a character like any other: the names of two or more words.
    const spaced = assertListing(await roles('name=%20&limit=100'));
    assert.deepEqual(spaced.items, ALICE_ROLES.filter((r) => r.name.includes(' ')));
    assert.equal(spaced.total, 6);
  });

  await t.test('the search is applied before paging: total and pages count the matches', async () => {
    const withA = ALICE_ROLES.filter((r) => r.name.toLowerCase().includes('a'));
    assert.ok(withA.length > 3 && withA.length < 12);
    const pages = String(Math.ceil(withA.length / 3));
    const first = assertListing(await roles('name=A&limit=3'));
    assert.equal(first.total, withA.length);
    assert.equal(first.pages, pages);
    assert.deepEqual(first.items, withA.slice(0, 3));
    const last = assertListing(await roles(`name=a&limit=3&page=${pages}`));
    assert.deepEqual(last.items, withA.slice((Number(pages) - 1) * 3));
    assert.equal(last.total, withA.length);
  });

  await t.test('a search with no match is an empty listing', async () => {
    const message = assertListing(await roles('name=zzz'));
    assert.deepEqual(message.items, []);
    assert.equal(message.total, 0);
    assert.equal(message.pages, '0');
  });

  await t.test('an empty name lists every role', async () => {
    const message = assertListing(await roles('name='));
    assert.equal(message.total, 12);
    assert.equal(message.pages, '2');
    assert.deepEqual(message.items, ALICE_ROLES.slice(0, 10));
  });

  await t.test('name may be 100 characters, not 101', async () => {
    const hundred = assertListing(await roles(`name=${'a'.repeat(100)}`));
    assert.equal(hundred.total, 0);
    assertInvalidRequest(await roles(`name=${'a'.repeat(101)}`), '101 characters');
    assertInvalidRequest(await roles(`name=${'a'.repeat(1000)}`), '1000 characters');
  });

  await t.test('bob sees only his two roles', async () => {
    const message = assertListing(await roles('', bob.accessToken));
    assert.equal(message.total, 2);
    assert.equal(message.pages, '1');
    assert.deepEqual(message.items, BOB_ROLES);
    assert.deepEqual(message.items.map((r) => r.id), [101, 102]);
    // Alice's role names are not searchable from bob's account.
    const billing = assertListing(await roles('name=Billing', bob.accessToken));
    assert.equal(billing.total, 0);
    const admins = assertListing(await roles('name=admin', bob.accessToken));
    assert.deepEqual(admins.items.map((r) => r.id), [101]);
  });

  await t.test('invalid page, limit or name is 400 invalid_request', async () => {
    const queries = [
      'page=0', 'page=-1', 'page=1.5', 'page=abc', 'page=', 'page=1e3', 'page=0x10', 'page=%201', 'page=1%20', 'page=+1',
      'page=1000001', 'page=99999999999', 'page=1&page=2', 'page=1&page=1',
      'limit=0', 'limit=-5', 'limit=101', 'limit=1000000', 'limit=', 'limit=ten', 'limit=10.0', 'limit=10&limit=20',
      'name=a&name=b', 'name=&name=',
    ];
    for (const query of queries) assertInvalidRequest(await roles(query), query);
  });

  await t.test('a gateway with defaultLimit 3 and maxLimit 5 applies them', async (t) => {
    const small = await startGateway(t, { overrides: { roles: { defaultLimit: 3, maxLimit: 5 } } });
    const token = (await signIn(small, DEMO.alice)).accessToken;
    const at = (query: string) => call(`${small.url}/api/roles${query}`, { token });
    const byDefault = assertListing(await at(''));
    assert.equal(byDefault.pages, '4');
    assert.equal(byDefault.total, 12);
    assert.deepEqual(byDefault.items, ALICE_ROLES.slice(0, 3));
    const atMax = assertListing(await at('?limit=5&page=3'));
    assert.equal(atMax.pages, '3');
    assert.deepEqual(atMax.items, ALICE_ROLES.slice(10));
    for (const query of ['?limit=6', '?limit=10', '?limit=100']) assertInvalidRequest(await at(query), query);
  });

  await t.test('only GET (and HEAD) is served: POST is 405 with Allow', async () => {
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await call(`${gw.url}/api/roles`, { method, token: alice.accessToken });
      assert.equal(res.status, 405, method);
      assert.equal(res.body.success, false);
      assert.equal(res.body.message.code, 'method_not_allowed');
      const allowed = res.headers.get('allow')!.split(',').map((m) => m.trim());
      assert.ok(allowed.includes('GET'), `Allow: ${allowed.join(', ')}`);
      assert.ok(!allowed.includes(method), `Allow does not list ${method}`);
    }
  });
});
