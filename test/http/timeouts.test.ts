import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRawResponse, rawRequest, startGateway } from '../helpers/gateway.js';

test('a request that does not finish arriving in time gets 408 in the envelope and is closed', async (t) => {
  const gw = await startGateway(t, { overrides: { server: { requestTimeoutMs: 1000 } } });
  const cases = [
    'GET /healthz HTTP/1.1\r\nHost: x\r\n', // headers never end
    'POST /api/signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"apiKey":', // body never ends
  ];
  const answers = await Promise.all(cases.map((payload) => rawRequest(gw.url, payload, 8000)));
  for (const raw of answers) {
    const res = parseRawResponse(raw);
    assert.equal(res.status, 408, raw);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message.code, 'request_timeout');
  }
});
