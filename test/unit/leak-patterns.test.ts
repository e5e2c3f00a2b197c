/**
 * What docs/tokens.md tells operators to register with secret scanners, and docs/leaks.md's
 * report and answer, held to what the gateway makes and reads: each pattern finds the secret of
 * its kind (as minted, for the default family and another), in text as a scanner sees it, and
 * no other kind; the examples are in the shapes the endpoint reads and answers.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { mintRefreshToken } from '../../src/auth/refresh.js';
import { randomBase62 } from '../../src/domain/random.js';
import { mintSettingsToken } from '../../src/domain/settings-token.js';
import { tokenPrefix } from '../../src/domain/token-prefix.js';
import { leakVerdict, reportedToken } from '../../src/http/routes/leaks.js';

const tokensPage = readFileSync(new URL('../../docs/tokens.md', import.meta.url), 'utf8');
const leaksPage = readFileSync(new URL('../../docs/leaks.md', import.meta.url), 'utf8');

/** The table's rows: type → regular expression (as written for the default family). */
function patterns(): Map<string, RegExp> {
  const rows = [...tokensPage.matchAll(/^\| `(gateway_[a-z_]+)` \| .+ \| `(.+)` \|$/gm)];
  return new Map(rows.map((m) => [m[1]!, new RegExp(m[2]!)]));
}

test('each documented pattern finds its kind of secret, for the default family and when written for another, and no other kind', () => {
  const table = patterns();
  assert.deepEqual([...table.keys()], ['gateway_api_secret', 'gateway_settings_token', 'gateway_refresh_token']);
  for (const family of ['gw', 'acme']) {
    const made: Record<string, string> = {
      gateway_api_secret: `${tokenPrefix(family, 'apiSecret')}${randomBase62(43)}`,
      gateway_settings_token: mintSettingsToken(family),
      gateway_refresh_token: mintRefreshToken('acct_1', 'key_1', 'fam').token,
    };
    for (const [type, pattern] of table) {
      const forFamily = new RegExp(pattern.source.replace('gw', family));
      for (const [kind, secret] of Object.entries(made)) {
        const inText = `API_SECRET="${secret}"\n`;
        assert.equal(forFamily.test(inText), kind === type, `${type} (${family}) on a ${kind}: ${secret}`);
      }
    }
  }
  // An account id starting with a digit makes the handle start "WyI" rather than "WyJ".
  assert.ok(table.get('gateway_refresh_token')!.test(mintRefreshToken('1acct', 'key_1', 'fam').token));
});

test('docs/leaks.md\'s report and answer are in the shapes the endpoint reads and answers', () => {
  const blocks = [...leaksPage.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const report = JSON.parse(blocks.find((b) => b.includes('"source"'))!) as unknown[];
  for (const item of report) assert.ok(reportedToken.safeParse(item).success, JSON.stringify(item));
  const answer = JSON.parse(blocks.find((b) => b.includes('token_raw'))!) as unknown[];
  for (const item of answer) assert.ok(leakVerdict.safeParse(item).success, JSON.stringify(item));
});
