/**
 * The token endpoint's errors (errors/oauth.ts) and their one renderer (errors/boundary.ts):
 * each error of the gateway's family in RFC 6749 §5.2's words and statuses, the body
 * `{error, error_description}` instead of the envelope, the Basic challenge only where the
 * client tried the Authorization header, and nothing internal shown on a 5xx.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorAnswer } from '../../src/errors/boundary.js';
import { ClientCertificateRequired, InvalidCredentials, InvalidGrant, InvalidRequest, PayloadTooLarge, StoreUnavailable, TooManyRequests, UnsupportedMediaType } from '../../src/errors/errors.js';
import { InvalidClient, InvalidScope, toOAuthError, UnsupportedGrantType } from '../../src/errors/oauth.js';

test('every error the token endpoint meets becomes RFC 6749\'s error with its status', () => {
  const cases: [unknown, number, string][] = [
    [new InvalidCredentials(), 401, 'invalid_client'],
    [new ClientCertificateRequired(), 401, 'invalid_client'],
    [new InvalidGrant(), 400, 'invalid_grant'],
    [new InvalidScope(), 400, 'invalid_scope'],
    [new UnsupportedGrantType('password'), 400, 'unsupported_grant_type'],
    [new InvalidRequest('The form field "scope" is repeated.'), 400, 'invalid_request'],
    [new PayloadTooLarge(4096), 400, 'invalid_request'],
    [new UnsupportedMediaType('Content-Type must be application/x-www-form-urlencoded.'), 400, 'invalid_request'],
    [new TooManyRequests(7, { RateLimit: 'x' }), 429, 'slow_down'],
    [new StoreUnavailable(new Error('down')), 503, 'temporarily_unavailable'],
    [new Error('a bug'), 500, 'server_error'],
  ];
  for (const [thrown, status, error] of cases) {
    const answer = errorAnswer(toOAuthError(thrown, false), 'req-1', true);
    assert.equal(answer.status, status, error);
    assert.equal((answer.body as { error: string }).error, error);
    assert.equal('success' in answer.body, false, 'not the envelope');
    assert.equal(answer.headers['Cache-Control'], 'no-store');
  }
});

test('the answer keeps Retry-After, shows no internals on a 5xx and no characters RFC 6749 forbids in error_description', () => {
  const limited = errorAnswer(toOAuthError(new TooManyRequests(7, {}), false), 'req-1', true);
  assert.equal(limited.headers['Retry-After'], '7');
  const down = errorAnswer(toOAuthError(new StoreUnavailable(new Error('redis at 10.0.0.5 refused')), false), 'req-1', true);
  assert.equal(down.headers['Retry-After'], '1');
  const bug = errorAnswer(toOAuthError(new Error('secret internals'), false), 'req-1', true);
  assert.doesNotMatch(JSON.stringify(bug.body), /internals/);
  assert.match((bug.body as { error_description: string }).error_description, /request id req-1/, 'the request id to quote to the operator');
  const quoted = errorAnswer(toOAuthError(new InvalidRequest('The form field "scope" is repeated \\ twice.'), false), 'req-1', true);
  assert.equal((quoted.body as { error_description: string }).error_description, 'The form field scope is repeated  twice.');
});

test('invalid_client answers a Basic challenge only when the client tried the Authorization header', () => {
  const byHeader = errorAnswer(toOAuthError(new InvalidCredentials(), true), undefined, true);
  assert.equal(byHeader.headers['WWW-Authenticate'], 'Basic realm="gateway", charset="UTF-8"');
  const byBody = errorAnswer(toOAuthError(new InvalidCredentials(), false), undefined, true);
  assert.equal(byBody.headers['WWW-Authenticate'], undefined);
  assert.equal(errorAnswer(toOAuthError(new InvalidClient('x', false), true), undefined, true).headers['WWW-Authenticate'], 'Basic realm="gateway", charset="UTF-8"');
  assert.equal(errorAnswer(toOAuthError(new InvalidGrant(), true), undefined, true).headers['WWW-Authenticate'], undefined, 'no challenge but for invalid_client');
});
