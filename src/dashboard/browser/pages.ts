/**
 * The dashboard's pages: one table, read by the browser's router (which page to draw) and by
 * the gateway (src/dashboard/serve.ts: which paths answer the page and which are a 404). It
 * imports nothing and touches no DOM, so both compilations take it as it is.
 *
 * Paths are relative to `dashboard.path`, without a leading "/". A `:name` segment is a
 * parameter, matched against PARAMS: the ids of the owner API, so that a path the table
 * accepts is one the owner API could answer for.
 */
export const PAGES = {
  home: '',
  signIn: 'sign-in',
  password: 'password',
  sessions: 'sessions',
  invite: 'invite',
  forgotPassword: 'forgot-password',
  resetPassword: 'reset-password',
  verifyEmail: 'verify-email',
  security: 'security',
  passkeys: 'security/passkeys',
  accounts: 'accounts',
  account: 'accounts/:account',
  roles: 'accounts/:account/roles',
  newRole: 'accounts/:account/roles/new',
  role: 'accounts/:account/roles/:role',
  keys: 'accounts/:account/keys',
  key: 'accounts/:account/keys/:key',
  settingsTokens: 'accounts/:account/settings-tokens',
  webhooks: 'accounts/:account/webhooks',
  signRecords: 'accounts/:account/sign-records',
  activity: 'accounts/:account/activity',
} as const;

export type PageName = keyof typeof PAGES;

/** What each parameter may be: account and key ids as the owner API spells them, role ids as whole numbers. */
const PARAMS: Record<string, RegExp> = {
  account: /^(?!\.\.?$)[A-Za-z0-9._:@-]{1,128}$/,
  key: /^(?!\.\.?$)[A-Za-z0-9._:@-]{1,128}$/,
  role: /^(?:0|[1-9][0-9]{0,15})$/,
};

export interface PageMatch {
  name: PageName;
  params: Record<string, string>;
}

const TABLE = (Object.entries(PAGES) as [PageName, string][]).map(([name, path]) => ({ name, segments: path === '' ? [] : path.split('/') }));

/** The page a path (relative to the dashboard, no leading "/", one trailing "/" allowed) names, or undefined. */
export function matchPage(path: string): PageMatch | undefined {
  const segments = path === '' ? [] : path.replace(/\/$/, '').split('/');
  for (const { name, segments: pattern } of TABLE) {
    if (pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    const fits = pattern.every((part, i) => {
      const segment = decodeSegment(segments[i]!);
      if (segment === undefined) return false;
      if (!part.startsWith(':')) return part === segment;
      const rule = PARAMS[part.slice(1)];
      if (rule === undefined || !rule.test(segment)) return false;
      params[part.slice(1)] = segment;
      return true;
    });
    // A literal wins over a parameter: "roles/new" is the new-role page, not role "new".
    if (fits) return { name, params };
  }
  return undefined;
}

/** A path segment as its percent-escapes spell it (pagePath escapes "@" and ":"), or undefined when they are malformed. */
function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The path of a page with its parameters filled in, relative to the dashboard (no leading "/"). */
export function pagePath(name: PageName, params: Record<string, string> = {}): string {
  return PAGES[name].split('/').map((part) => (part.startsWith(':') ? encodeURIComponent(params[part.slice(1)] ?? '') : part)).join('/');
}
