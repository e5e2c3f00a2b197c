/**
 * A real OpenID provider (oidc-provider) on 127.0.0.1 for owners' single sign-on: one
 * confidential client for the authorization-code flow (PKCE required), users given by the test
 * (`users`: sub → email and email_verified), and a test interaction instead of a login page:
 * the provider's interaction URL logs in whichever user `loginAs` named, and grants are loaded
 * without a consent prompt (a first-party client's setting). The email claims come from the
 * UserInfo endpoint (oidc-provider puts only `sub` in an ID token issued with an access token),
 * so the gateway's UserInfo path is exercised too.
 *
 * The redirect URI is known only once the gateway listens, and the gateway needs the issuer to
 * start: the server listens first (`issuer`), and `register(redirectUri)` builds the provider.
 * `drive` follows a sign-in from the gateway's /owner/v1/sso/start through the provider back to
 * the callback with fetch and a cookie jar per origin, as a browser would. Closed in t.after.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TestContext } from 'node:test';
import Provider from 'oidc-provider';

export const SSO_CLIENT_ID = 'gateway-dashboard';
export const SSO_CLIENT_SECRET = 'gateway-dashboard-secret-for-tests-only-0123456789';

export interface SsoUser {
  email: string;
  email_verified: boolean;
}

interface InteractionProvider {
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ prompt: { name: string } }>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: Record<string, unknown>): Promise<void>;
}

export interface LoginProvider {
  issuer: string;
  /** Builds the provider for a client that redirects to `redirectUri`. */
  register(redirectUri: string): void;
  /** The user the next login interaction signs in (a key of `users`). */
  loginAs(sub: string): void;
  /** Token endpoint calls answered so far (a refused callback makes none). */
  readonly tokenRequests: number;
}

export async function startLoginProvider(t: TestContext, users: Record<string, SsoUser>): Promise<LoginProvider> {
  let provider: (Provider & InteractionProvider) | undefined;
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  let next: string | undefined;
  let tokenRequests = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/token') === true) tokenRequests++;
    if (provider !== undefined && req.url?.startsWith('/interaction/') === true) {
      void interact(provider, req, res);
      return;
    }
    if (handle === undefined) {
      res.writeHead(503).end();
      return;
    }
    handle(req, res);
  });
  async function interact(p: InteractionProvider, req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const details = await p.interactionDetails(req, res);
      if (details.prompt.name !== 'login' || next === undefined) throw new Error(`unexpected interaction: ${details.prompt.name}`);
      await p.interactionFinished(req, res, { login: { accountId: next } }, { mergeWithLastSubmission: false });
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
    }
  }
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.after(() => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  }));

  return {
    issuer,
    get tokenRequests() {
      return tokenRequests;
    },
    loginAs(sub) {
      next = sub;
    },
    register(redirectUri) {
      provider = new Provider(issuer, {
        clients: [{
          client_id: SSO_CLIENT_ID, client_secret: SSO_CLIENT_SECRET, grant_types: ['authorization_code'], response_types: ['code'],
          redirect_uris: [redirectUri], token_endpoint_auth_method: 'client_secret_basic',
        }],
        claims: { openid: ['sub'], email: ['email', 'email_verified'] },
        findAccount: (_ctx: unknown, sub: string) => (users[sub] === undefined ? undefined : { accountId: sub, claims: () => ({ sub, ...users[sub] }) }),
        features: { devInteractions: { enabled: false } },
        pkce: { required: () => true },
        // A first-party client: every scope asked for is granted without a consent prompt.
        async loadExistingGrant(ctx: { oidc: { client: { clientId: string }; session: { accountId: string }; provider: { Grant: new (init: Record<string, string>) => { addOIDCScope(s: string): void; save(): Promise<string> } } } }) {
          const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
          grant.addOIDCScope('openid email');
          await grant.save();
          return grant;
        },
      }) as Provider & InteractionProvider;
      handle = provider.callback();
    },
  };
}

/** Cookies by origin, as a browser keeps them (names and values only: enough for these flows). */
export class CookieJar {
  readonly #byOrigin = new Map<string, Map<string, string>>();

  header(url: URL): string {
    return [...(this.#byOrigin.get(url.origin) ?? new Map<string, string>())].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  take(url: URL, res: Response): void {
    let cookies = this.#byOrigin.get(url.origin);
    if (cookies === undefined) this.#byOrigin.set(url.origin, (cookies = new Map()));
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1).trim();
      if (value === '' || /expires=thu, 01 jan 1970/i.test(line)) cookies.delete(name);
      else cookies.set(name, value);
    }
  }

  get(url: URL, name: string): string | undefined {
    return this.#byOrigin.get(url.origin)?.get(name);
  }
}

export interface DriveResult {
  /** The gateway's answer to the callback. */
  callback: Response;
  location: string | null;
  jar: CookieJar;
}

/**
 * Follows a sign-in from `start` (a gateway URL) as a browser: every redirect, with the jar's
 * cookies, until the gateway's callback has answered. `beforeCallback` may change the callback
 * URL (a forged state) before it is requested.
 */
export async function drive(start: string, { jar = new CookieJar(), beforeCallback = (u: URL) => u, callbackPath = '/owner/v1/sso/callback' }: { jar?: CookieJar; beforeCallback?: (url: URL) => URL; callbackPath?: string } = {}): Promise<DriveResult> {
  let url = new URL(start);
  for (let hop = 0; hop < 12; hop++) {
    const isCallback = url.pathname === callbackPath;
    if (isCallback) url = beforeCallback(url);
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header(url), 'user-agent': 'sso-test-browser' } });
    jar.take(url, res);
    const location = res.headers.get('location');
    if (isCallback) return { callback: res, location, jar };
    if (location === null || res.status < 300 || res.status >= 400) {
      throw new Error(`the sign-in stopped at ${url.href}: ${res.status} ${await res.text()}`);
    }
    await res.arrayBuffer();
    url = new URL(location, url);
  }
  throw new Error('too many redirects');
}
