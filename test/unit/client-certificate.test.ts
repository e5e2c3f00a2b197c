/**
 * The subject a backend gets in X-Client-Cert-Subject (src/auth/client-certificate.ts): RFC 4514
 * order and escapes, then everything outside printable ASCII percent-encoded, so any
 * certificate's subject is a valid header value that decodes without loss. The end-to-end
 * path, with real certificates, is test/tls/mtls.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatSubject } from '../../src/auth/client-certificate.js';

test('most specific first, repeated attributes once per value, RFC 4514 escapes', () => {
  assert.equal(formatSubject({ C: 'DE', O: 'Example, Inc.', OU: ['a', 'b'], CN: 'client' } as never), 'CN=client,OU=b,OU=a,O=Example\\, Inc.,C=DE');
  assert.equal(formatSubject({ CN: '#lead' } as never), 'CN=\\#lead');
  assert.equal(formatSubject({ CN: ' pad ' } as never), 'CN=\\ pad\\ ');
  assert.equal(formatSubject({ CN: 'a+b=c;d<e>f"g\\h' } as never), 'CN=a\\+b\\=c\\;d\\<e\\>f\\"g\\\\h');
  assert.equal(formatSubject(undefined), '');
});

test('non-ASCII, control characters, line breaks and "%" are percent-encoded as UTF-8: the value is printable ASCII and decodes back', () => {
  const hostile = 'Zoë\r\nX-Injected: 1\u0000%41\ud800😀';
  const formatted = formatSubject({ CN: hostile } as never);
  assert.match(formatted, /^[\x20-\x7e]*$/);
  assert.equal(formatted, 'CN=Zo%C3%AB%0D%0AX-Injected: 1%00%2541%EF%BF%BD%F0%9F%98%80');
  assert.equal(decodeURIComponent(formatted.slice(3)), hostile.replace('\ud800', '\ufffd'));
});
