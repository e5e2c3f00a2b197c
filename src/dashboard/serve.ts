/**
 * The owners' dashboard, served by the gateway under `dashboard.path`: one HTML page (the
 * same for every page of PAGES; the browser's router draws it) and its script and style
 * sheet, read from public/ once at start. The pages hold no data and make no change of their
 * own: the script calls the owner API (/owner/v1) like any client, with the owner's session
 * cookie and CSRF token or the operator's admin token, so the owner API stays the one source
 * of truth and the one place rules are checked (docs/dashboard.md).
 *
 * The script is compiled from browser/ by `npm run build:dashboard` into dist/ (never into src/,
 * never checked in); `npm start`, `npm test` and `npm run build` compile it first. A gateway
 * started without it refuses to start while the dashboard is on, rather than serve a page that
 * cannot run.
 *
 * Every answer of the tree carries a strict Content-Security-Policy: scripts and styles from
 * the gateway's own origin only (no inline script or style, no eval), no framing, fetches to
 * the same origin only, and Trusted Types enforced, so a string can never become markup or
 * script in the page (the script builds the DOM with textContent, never innerHTML).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import { NotFound } from '../errors/errors.js';
import { matchPage } from './browser/pages.js';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  // For browsers without frame-ancestors.
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Page URLs name accounts and keys: nothing of them leaves with a link.
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** The page and its style sheet: beside this module (`npm run build` copies them into dist/). */
const PUBLIC = fileURLToPath(new URL('./public/', import.meta.url));
/**
 * The page's script, compiled by `npm run build:dashboard` into dist/dashboard/public/js/: the
 * same folder whether this module runs from src/dashboard/ (tsx: `npm start`, the tests) or
 * from dist/dashboard/ (`node dist/main.js`, the image), where it is also public/js/.
 */
const SCRIPTS = fileURLToPath(new URL('../../dist/dashboard/public/js/', import.meta.url));

/**
 * @simplewebauthn/browser's ESM build (the passkey pages' ceremonies), served as it is installed
 * at `assets/js/vendor/simplewebauthn-browser/`, where the compiled script loads it by a URL
 * relative to itself (browser/webauthn.ts): no bundler, no import map.
 */
const WEBAUTHN_BROWSER = dirname(fileURLToPath(import.meta.resolve('@simplewebauthn/browser')));

/** The dashboard is on but its script was never compiled (a fresh clone run without npm). */
export class DashboardNotBuilt extends Error {
  constructor(dir: string) {
    super(`the dashboard's script is not built (no ${join(dir, 'main.js')}): run \`npm run build:dashboard\` `
      + '(`npm start`, `npm test` and `npm run build` run it), or set DASHBOARD_ENABLED=false');
    this.name = 'DashboardNotBuilt';
  }
}

/**
 * Serves the dashboard's tree: its pages and assets; every other path under it is the 404
 * envelope. The security headers are dashboardHeaders' (below), for every answer alike.
 */
export function registerDashboard(router: Router, { path }: { path: string }): void {
  const { shell, assets } = loadPublic(path, PUBLIC, SCRIPTS, WEBAUTHN_BROWSER);

  const servePage = async function serveDashboardPage(ctx: Context): Promise<void> {
    const rest = ctx.path.slice(path.length).replace(/^\//, '');
    if (matchPage(rest) === undefined) throw new NotFound();
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = shell;
  };
  const serveAsset = async function serveDashboardAsset(ctx: Context): Promise<void> {
    const asset = assets.get(ctx.path.slice(`${path}/assets/`.length));
    if (asset === undefined) throw new NotFound();
    // Revalidated on every use (a cheap 304), so an upgraded gateway never runs a stale script.
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('ETag', asset.etag);
    if (ctx.get('If-None-Match').split(',').some((tag) => tag.trim() === asset.etag)) {
      ctx.status = 304;
      return;
    }
    ctx.type = asset.type;
    ctx.body = asset.body;
  };

  router.get(`${path}/assets/{*file}`, serveAsset);
  router.get(path, servePage);
  router.get(`${path}/{*rest}`, servePage);
}

/**
 * The security headers on every answer under the tree, errors included (a 404 for a mistyped
 * page, a 405, a 400 for a malformed path): set after the error boundary wrote its answer
 * (app.ts puts this outside it), since the boundary drops what a route set before it failed.
 * An error answer is the JSON envelope, but it must not be framed or sniffed as a page either.
 */
export function dashboardHeaders({ path }: { path: string }) {
  return async function setDashboardHeaders(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } finally {
      // The path as received (not yet normalised): in any case, since the router matches without it.
      const received = ctx.path.toLowerCase();
      if ((received === path || received.startsWith(`${path}/`)) && !ctx.headerSent) ctx.set(SECURITY_HEADERS);
    }
  };
}

/** Where the owner API's invite links point (http/routes/owner/accounts.ts writes them). */
export const OWNER_INVITE_PATH = '/owner/invite';

/** Where mailed links point (owner/mail-templates.ts writes them), and the dashboard page each sends the browser to. */
export const OWNER_LINK_PAGES: Readonly<Record<string, string>> = {
  [OWNER_INVITE_PATH]: 'invite',
  '/owner/reset-password': 'reset-password',
  '/owner/verify-email': 'verify-email',
};

/**
 * The invite link the owner API hands out is `<origin>/owner/invite#gwinv_…` (docs/owner.md,
 * "Invites"), and mailed links are alike (`/owner/reset-password#gwrst_…`,
 * `/owner/verify-email#gwver_…`): with the dashboard on, each path sends the browser to the
 * dashboard's page for it. The token is in the fragment, which never reaches the gateway and
 * which browsers keep across a redirect whose Location has none (RFC 9110 §10.2.2). Registered
 * before the owner API's catch-all for /owner (http/owner/register.ts), which would otherwise
 * answer it with a 404.
 */
export function registerInviteRedirect(router: Router, { path }: { path: string }): void {
  for (const [from, page] of Object.entries(OWNER_LINK_PAGES)) {
    router.get(from, async function redirectOwnerLink(ctx: Context): Promise<void> {
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.status = 303;
      ctx.set('Location', `${path}/${page}`);
      ctx.body = '';
    });
  }
}

/**
 * The page (with the dashboard's path written in) and every asset under public/, by path
 * relative to it, with the compiled script under `js/` (and, given `webauthn`, that package's
 * build under `js/vendor/simplewebauthn-browser/`): regular files of the types in TYPES
 * only. A symlink is not followed, so a link left in public/ (or put there) cannot serve a file
 * from elsewhere on the machine. (From dist/, `scripts` is public/js/ itself: read twice, the
 * same files.)
 */
export function loadPublic(path: string, dir = PUBLIC, scripts = SCRIPTS, webauthn?: string): { shell: Buffer; assets: Map<string, Asset> } {
  if (!existsSync(join(scripts, 'main.js'))) throw new DashboardNotBuilt(scripts);
  // The path is lower-case a-z 0-9 . _ - and "/" (config/schema.ts): nothing to escape in HTML.
  const shell = Buffer.from(readFileSync(join(dir, 'index.html'), 'utf8').replaceAll('{{BASE}}', path));
  const assets = new Map<string, Asset>();
  const add = (root: string, prefix: string) => {
    for (const file of listFiles(root)) {
      const type = TYPES[extname(file)];
      if (type === undefined) continue;
      const body = readFileSync(file);
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
      assets.set(prefix + relative(root, file).split(sep).join('/'), { body, type, etag });
    }
  };
  add(dir, '');
  add(scripts, 'js/');
  if (webauthn !== undefined) add(webauthn, 'js/vendor/simplewebauthn-browser/');
  return { shell, assets };
}

function listFiles(dir: string): string[] {
  // Dirents describe the entry itself (lstat): a symlink is neither a file nor a directory here.
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return listFiles(path);
    return entry.isFile() ? [path] : [];
  });
}
