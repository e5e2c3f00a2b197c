/**
 * The family prefix of the secrets the gateway hands out (`tokens.prefix`, `TOKEN_PREFIX`,
 * default `gw`): an API key is `<family>k_…`, its secret `<family>sk_…`, an API settings token
 * `<family>st_…`, so a deployment's secrets are told apart from another's by secret scanners
 * (docs/tokens.md, "Patterns for secret scanners"). A leaf.
 *
 * Changing the family changes what is minted only. What was minted before keeps working whatever
 * its family: a secret is checked whole, by its digest (the family is part of what is hashed),
 * so accepting any family's shape lets no made-up token in, and no stored secret need change.
 * The families a deployment has used (`tokens.previousPrefixes`) are what a leak report is
 * matched against (owner/leaks.ts) and what docs/tokens.md's patterns are registered for.
 */

/** The default family, and the one every deployment used before the setting existed. */
export const DEFAULT_TOKEN_FAMILY = 'gw';

/** A family: a lowercase letter, then up to 15 lowercase letters or digits. */
export const TOKEN_FAMILY_PATTERN = /^[a-z][a-z0-9]{0,15}$/;

/** The kinds of secret that carry the family, and their marks after it. */
export const TOKEN_KIND_MARKS = { apiKey: 'k_', apiSecret: 'sk_', settingsToken: 'st_' } as const;

/** `<family><mark>`, e.g. `acmesk_`. */
export function tokenPrefix(family: string, kind: keyof typeof TOKEN_KIND_MARKS): string {
  return `${family}${TOKEN_KIND_MARKS[kind]}`;
}

/** The family of `token` of this kind (`acme` of `acmesk_…`), if it has one of that shape. */
export function familyOf(token: string, kind: keyof typeof TOKEN_KIND_MARKS): string | undefined {
  const at = token.indexOf(TOKEN_KIND_MARKS[kind]);
  if (at < 1 || at > 16) return undefined;
  const family = token.slice(0, at);
  return TOKEN_FAMILY_PATTERN.test(family) ? family : undefined;
}
