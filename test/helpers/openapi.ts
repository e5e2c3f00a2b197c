/**
 * OpenAPI conformance for tests: `conformance(baseUrl)` reads the gateway's own /openapi.json
 * and returns a fetch wrapper that holds every answer to it. The answer's status must be one
 * the matched operation documents, and its body must be valid, with Ajv (JSON Schema 2020-12,
 * the dialect of OpenAPI 3.1), against that status's schema; an object with a field the
 * schema does not name fails too. Every (operation, status) pair met is recorded, so a walk
 * can prove it met each documented one.
 */
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import type { JsonResponse } from './gateway.js';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
  components?: Record<string, unknown>;
};

export interface OperationObject {
  operationId?: string;
  security?: Record<string, string[]>[];
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  requestBody?: unknown;
  parameters?: { in: string; name: string; required?: boolean; schema?: Record<string, unknown> }[];
}

export const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** One documented operation: `GET /owner/v1/accounts/{accountId}`. */
export interface DocumentedOperation {
  key: string;
  method: string;
  path: string;
  operation: OperationObject;
  statuses: number[];
}

export interface Conformance {
  document: OpenApiDocument;
  operations: DocumentedOperation[];
  /** fetch(base + path) with the answer checked against the document; the JSON body parsed. */
  fetch(path: string, init?: RequestInit & { token?: string; json?: unknown }): Promise<JsonResponse>;
  /**
   * Holds one answer received some other way (a client under test with its own fetch) to the
   * document, as `fetch` does: the operation matched by method and path, its status, its body.
   * Returns the operation's key and the parsed body.
   */
  check(method: string, url: URL, status: number, contentType: string | null, text: string): { key: string; body: any };
  /** `${operation key} ${status}` of every answer checked so far. */
  seen: Set<string>;
  /** The documented (operation, status) pairs not met yet, leaving out `exempt` statuses. */
  unmet(exempt?: (op: DocumentedOperation, status: number) => boolean): string[];
}

export async function loadDocument(baseUrl: string): Promise<OpenApiDocument> {
  const res = await fetch(`${baseUrl}/openapi.json`);
  assert.equal(res.status, 200, 'GET /openapi.json answers');
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  return await res.json() as OpenApiDocument;
}

export function documentedOperations(document: OpenApiDocument): DocumentedOperation[] {
  const out: DocumentedOperation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      const operation = item[method];
      if (operation === undefined) continue;
      out.push({ key: `${method.toUpperCase()} ${path}`, method, path, operation, statuses: Object.keys(operation.responses).map(Number) });
    }
  }
  return out;
}

/** The same schema with `additionalProperties: false` on every object that names its properties and says nothing else. */
function closeObjects(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(closeObjects);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = closeObjects(v);
  if (out.properties !== undefined && typeof out.properties === 'object' && out.additionalProperties === undefined
    && out.patternProperties === undefined && out.unevaluatedProperties === undefined) out.additionalProperties = false;
  return out;
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

export async function conformance(baseUrl: string): Promise<Conformance> {
  const document = await loadDocument(baseUrl);
  const operations = documentedOperations(document);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // zod writes these beside the `pattern` that checks them: nothing more to check.
  for (const format of ['starts_with', 'ends_with', 'includes']) ajv.addFormat(format, true);
  ajv.addSchema({ $id: 'https://gateway.test/openapi.json', components: closeObjects(document.components ?? {}), paths: closeObjects(document.paths) });
  const validators = new Map<string, ValidateFunction>();
  const validatorFor = (op: DocumentedOperation, status: number): ValidateFunction | undefined => {
    const content = op.operation.responses[String(status)]?.content?.['application/json'];
    if (content === undefined) return undefined;
    const key = `${op.key} ${status}`;
    let validate = validators.get(key);
    if (validate === undefined) {
      const pointer = ['paths', op.path, op.method, 'responses', String(status), 'content', 'application/json', 'schema'].map(escapePointer).join('/');
      validate = ajv.compile({ $ref: `https://gateway.test/openapi.json#/${pointer}` });
      validators.set(key, validate);
    }
    return validate;
  };

  // Literal paths before templates, so /owner/v1/invites/accept is not read as /owner/v1/invites/{id}.
  const matchers = operations.map((op) => ({
    op,
    params: (op.path.match(/\{/g) ?? []).length,
    pattern: new RegExp(`^${op.path.replaceAll(/[.*+?^$()|[\]\\]/g, '\\$&').replaceAll(/\{[^}]+\}/g, '[^/]+')}$`),
  })).sort((a, b) => a.params - b.params);
  const match = (method: string, pathname: string) => matchers.find((m) => m.op.method === method && m.pattern.test(pathname))?.op;

  const seen = new Set<string>();
  const check = (method: string, url: URL, status: number, contentType: string | null, text: string): { key: string; body: any } => {
    const op = match(method.toLowerCase(), url.pathname);
    assert.ok(op !== undefined, `${method.toUpperCase()} ${url.pathname} is not in the OpenAPI document`);
    const where = `${op.key} answered ${status} ${text.slice(0, 500)}`;
    assert.ok(op.statuses.includes(status), `undocumented status: ${where} (documented: ${op.statuses.join(', ')})`);
    // A redirect documented without content (single sign-on's navigations): its Location is the answer.
    if (status >= 300 && status < 400 && op.operation.responses[String(status)]?.content === undefined) {
      seen.add(`${op.key} ${status}`);
      return { key: op.key, body: undefined };
    }
    assert.match(contentType ?? '', /^application\/json/, where);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      assert.fail(`not JSON: ${where}`);
    }
    const validate = validatorFor(op, status);
    assert.ok(validate !== undefined, `no JSON schema documented for ${op.key} ${status}`);
    assert.ok(validate(parsed), `the body does not match the document: ${where}\n${JSON.stringify(validate.errors, null, 1)}`);
    seen.add(`${op.key} ${status}`);
    return { key: op.key, body: parsed };
  };
  return {
    document,
    operations,
    seen,
    async fetch(path, init = {}) {
      const { token, json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (token !== undefined) headers.set('authorization', `Bearer ${token}`);
      let body = rest.body;
      if (json !== undefined) {
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
        body = JSON.stringify(json);
      }
      const method = (rest.method ?? 'GET').toLowerCase();
      const url = new URL(path, baseUrl);
      assert.ok(match(method, url.pathname) !== undefined, `${method.toUpperCase()} ${url.pathname} is not in the OpenAPI document`);
      const res = await fetch(url, { ...rest, headers, body });
      const text = await res.text();
      const { body: parsed } = check(method, url, res.status, res.headers.get('content-type'), text);
      return { status: res.status, headers: res.headers, body: parsed };
    },
    check,
    unmet(exempt = () => false) {
      return operations.flatMap((op) => op.statuses.filter((s) => !exempt(op, s) && !seen.has(`${op.key} ${s}`)).map((s) => `${op.key} ${s}`));
    },
  };
}
