/**
 * A real OpenID provider (oidc-provider) on 127.0.0.1 with an ephemeral port, for the
 * trusted-issuer tests: one confidential client that gets JWT access tokens (RFC 9068) by the
 * client-credentials grant, for the resource (audience) it names. Its signing keys can be
 * rotated while it runs (`rotate`): a provider's key set is fixed when it is built, so a new
 * provider with the new key first and the old one still published takes over the same issuer
 * URL, as a restart with a new configuration would. `stop` takes the issuer down (its port
 * refuses connections). Closed in t.after.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider from 'oidc-provider';

export const CLIENT_ID = 'orders-service';
const CLIENT_SECRET = 'orders-service-secret-for-tests-only-0123456789';
/** The account and roles every token names, in the claims the gateway is told to read. */
export const EXTRA_CLAIMS = { account: 'acct_ext_orders', roles: ['reader', 'auditor'] };

export interface TestProvider {
  issuer: string;
  /** The kid that signs new tokens. */
  readonly signingKid: string;
  /** The public keys published now. */
  readonly publicKeys: JWK[];
  /** Requests the provider's JWKS endpoint got. */
  readonly jwksRequests: number;
  /** An access token by client credentials, for `resource` (its `aud`), with `scope`. */
  token(options?: { resource?: string; scope?: string }): Promise<string>;
  /** A new signing key, signing from now on, published beside the old ones; `retire`: the old ones are no longer published. */
  rotate(options?: { retire?: boolean }): Promise<void>;
  /** Takes the issuer down: its port stops answering. */
  stop(): Promise<void>;
}

interface KeyPair {
  kid: string;
  privateJwk: JWK;
  publicJwk: JWK;
}

async function newKey(n: number): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = `test-key-${n}`;
  return { kid, privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' }, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

function buildProvider(issuer: string, keys: KeyPair[], audience: string, accessTokenTtlSeconds: number): Provider {
  const signingKid = keys[0]!.kid;
  return new Provider(issuer, {
    clients: [{
      client_id: CLIENT_ID, client_secret: CLIENT_SECRET, grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_post', id_token_signed_response_alg: 'ES256',
    }],
    jwks: { keys: keys.map((k) => k.privateJwk) },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => audience,
        useGrantedResource: () => true,
        // Any resource asked for gets a JWT access token with it as `aud` (the wrong-audience case asks for another).
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({
          scope: 'orders:read orders:write', audience: resource, accessTokenTTL: accessTokenTtlSeconds,
          accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256', kid: signingKid } },
        }),
      },
    },
    extraTokenClaims: () => EXTRA_CLAIMS,
  });
}

export async function startProvider(t: TestContext, { audience, accessTokenTtlSeconds = 600 }: { audience: string; accessTokenTtlSeconds?: number }): Promise<TestProvider> {
  const keys = [await newKey(1)];
  let jwksRequests = 0;
  let handle: (req: IncomingMessage, res: ServerResponse) => void = () => {};
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/jwks') === true) jwksRequests++;
    handle(req, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  handle = buildProvider(issuer, keys, audience, accessTokenTtlSeconds).callback();
  let stopped = false;
  const stop = () => new Promise<void>((resolve) => {
    if (stopped) return resolve();
    stopped = true;
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  });
  t.after(stop);

  return {
    issuer,
    get signingKid() {
      return keys[0]!.kid;
    },
    get publicKeys() {
      return keys.map((k) => k.publicJwk);
    },
    get jwksRequests() {
      return jwksRequests;
    },
    async token({ resource = audience, scope = 'orders:read' } = {}) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scope, resource }),
      });
      const body = await res.json() as { access_token?: string };
      if (res.status !== 200 || body.access_token === undefined) throw new Error(`the provider gave no token: ${res.status} ${JSON.stringify(body)}`);
      return body.access_token;
    },
    async rotate({ retire = false } = {}) {
      const key = await newKey(keys.length + 1);
      if (retire) keys.length = 0;
      keys.unshift(key);
      handle = buildProvider(issuer, keys, audience, accessTokenTtlSeconds).callback();
    },
    stop,
  };
}
