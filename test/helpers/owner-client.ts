/**
 * The client package's OwnerClient against a test gateway, through a fetch that records every
 * exchange and holds every answer to the gateway's own /openapi.json (helpers/openapi.ts). A
 * mismatch is kept as a problem rather than thrown, since a throw inside fetch would reach the
 * test as the client's NetworkError; `assertConforming()` fails the test on any.
 */
import assert from 'node:assert/strict';
import { OwnerClient } from '../../packages/client/src/owner/index.js';
import type { OwnerClientOptions } from '../../packages/client/src/owner/index.js';
import { conformance, type Conformance } from './openapi.js';
import { ADMIN_TOKEN } from './owner.js';
import type { TestGateway } from './gateway.js';

export interface Exchange {
  method: string;
  path: string;
  /** The request's headers, lowercase names. */
  headers: Record<string, string>;
  status: number;
  /** The documented operation answered, `POST /owner/v1/session`. */
  key: string | undefined;
  /** The error envelope's code, on a refusal. */
  code: string | undefined;
}

export interface CheckedClients {
  conformance: Conformance;
  exchanges: Exchange[];
  problems: string[];
  fetch: typeof fetch;
  operator(options?: Partial<OwnerClientOptions>): OwnerClient;
  owner(email: string, password: string, options?: Partial<OwnerClientOptions>): OwnerClient;
  /** The sign-ins (`POST /owner/v1/session`) sent so far. */
  signIns(): Exchange[];
  /** Every answer so far matched the document, and there was at least one. */
  assertConforming(): void;
}

/** `tamper` may change a request's headers before it is sent (tests of the client's own safeguards). */
export async function checkedClients(gw: TestGateway, { tamper }: { tamper?: (headers: Headers) => void } = {}): Promise<CheckedClients> {
  const doc = await conformance(gw.url);
  const exchanges: Exchange[] = [];
  const problems: string[] = [];
  const recording: typeof fetch = async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init.method ?? 'GET').toUpperCase();
    const headers = new Headers(init.headers);
    tamper?.(headers);
    const res = await fetch(url, { ...init, headers });
    const text = await res.clone().text();
    let key: string | undefined;
    let code: string | undefined;
    try {
      const checked = doc.check(method, url, res.status, res.headers.get('content-type'), text);
      key = checked.key;
      if (checked.body?.success === false) code = checked.body.message.code;
    } catch (err) {
      problems.push((err as Error).message);
    }
    exchanges.push({ method, path: url.pathname, headers: Object.fromEntries(headers), status: res.status, key, code });
    return res;
  };
  return {
    conformance: doc,
    exchanges,
    problems,
    fetch: recording,
    operator: (options = {}) => new OwnerClient({ baseUrl: gw.url, fetch: recording, ...options, adminToken: ADMIN_TOKEN } as OwnerClientOptions),
    owner: (email, password, options = {}) => new OwnerClient({ baseUrl: gw.url, fetch: recording, ...options, email, password } as OwnerClientOptions),
    signIns: () => exchanges.filter((e) => e.method === 'POST' && e.path === '/owner/v1/session'),
    assertConforming() {
      assert.deepEqual(problems, [], 'every answer matches the OpenAPI document');
      assert.ok(exchanges.length > 0, 'the clients called the gateway');
    },
  };
}
