/**
 * POST /api/leaks/github: GitHub's secret-scanning partner endpoint (docs/leaks.md). GitHub
 * posts a JSON array of `{token, type, url, source}`, signed over the raw body with one of the
 * keys it publishes (auth/leak-report-keys.ts); the answer is GitHub's array of
 * `{token_raw, token_type, label}`, not the envelope, since GitHub reads that.
 *
 * The steps, in this order, so a stranger's report costs little and ends nothing:
 *   1. counted per address before any work (the public-route quota, route name `leaks`): the
 *      endpoint is open to anyone until the signature checks;
 *   2. both signature headers present and bounded, else 401;
 *   3. the body read as bytes, bounded by `leaks.maxBodyBytes` (413 above);
 *   4. the signature checked over those bytes: an unknown key id, a bad signature: 401, and the
 *      body is not even parsed; the keys unreachable: 503;
 *   5. only then the JSON parsed and checked (400 for anything malformed: not an array, too many
 *      tokens, a field too long), and each token judged (owner/leaks.ts).
 */
import type { Context } from 'koa';
import { z } from 'zod';
import type { LeakReportKeys } from '../../auth/leak-report-keys.js';
import type { Config } from '../../config/schema.js';
import { InvalidRequest, InvalidSignature, StoreUnavailable, UnsupportedMediaType } from '../../errors/errors.js';
import type { RateLimits } from '../../limits/rate-limits.js';
import type { LeakService } from '../../owner/leaks.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { readRawBytes, validateFields } from '../body.js';

export const LEAKS_PATH = '/api/leaks/github';
export const KEY_ID_HEADER = 'github-public-key-identifier';
export const SIGNATURE_HEADER = 'github-public-key-signature';

/** A P-256 DER signature is at most 72 bytes (96 in base64); room for whitespace and padding. */
const MAX_SIGNATURE_LENGTH = 256;
const MAX_KEY_ID_LENGTH = 256;

/** One reported token: GitHub's fields, bounded; fields GitHub may add later are dropped. */
export const reportedToken = z.object({
  token: z.string().min(1).max(4096),
  type: z.string().min(1).max(128),
  url: z.string().max(2048).optional(),
  source: z.string().max(128).optional(),
});

export const leakVerdict = z.strictObject({
  token_raw: z.string(),
  token_type: z.string(),
  label: z.enum(['true_positive', 'false_positive']),
});

export interface LeakRouteDeps {
  keys: LeakReportKeys;
  leaks: LeakService;
  limits: RateLimits;
  clientAddress: (req: Context['req']) => string;
  settings: Pick<Config['leaks'], 'maxBodyBytes' | 'maxTokens'>;
  metrics: Pick<Metrics, 'leakReports'>;
}

export function receiveLeakReport({ keys, leaks, limits, clientAddress, settings, metrics }: LeakRouteDeps) {
  const report = z.array(reportedToken).min(1).max(settings.maxTokens);
  const refuse = (result: string, err: Error): never => {
    metrics.leakReports.labels(result).inc();
    throw err;
  };
  return async function receiveLeakReport(ctx: Context): Promise<void> {
    const headers = await limits.route({ name: 'leaks', auth: 'public' }, undefined, ctx.req);
    if (headers !== undefined) ctx.set(headers);
    const keyId = ctx.get(KEY_ID_HEADER);
    const signature = ctx.get(SIGNATURE_HEADER);
    if (keyId === '' || signature === '' || keyId.length > MAX_KEY_ID_LENGTH || signature.length > MAX_SIGNATURE_LENGTH) {
      refuse('bad_signature', new InvalidSignature('A report needs the Github-Public-Key-Identifier and Github-Public-Key-Signature headers.'));
    }
    if (!ctx.request.is('json')) refuse('malformed', new UnsupportedMediaType('Content-Type must be application/json.'));
    const body = await readRawBytes(ctx, settings.maxBodyBytes);
    const checked = await keys.verify(keyId, signature, body);
    if (checked === 'keys_unavailable') refuse(checked, new StoreUnavailable(undefined, 60));
    if (checked === 'unknown_key') refuse(checked, new InvalidSignature('The report is signed by a key the reporter does not publish.'));
    if (checked === 'bad_signature') refuse(checked, new InvalidSignature('The report\'s signature does not verify.'));
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      refuse('malformed', new InvalidRequest('The report is not valid JSON.'));
    }
    const reported = (() => {
      try {
        return validateFields(report, parsed, 'report');
      } catch (err) {
        return refuse('malformed', err as Error);
      }
    })();
    const verdicts = await leaks.report(reported, { ip: clientAddress(ctx.req), requestId: String(ctx.state.requestId ?? '') });
    for (const { label } of verdicts) metrics.leakReports.labels(label).inc();
    ctx.body = verdicts;
  };
}
