/**
 * The Fastify peer of bench/proxy.ts: what a Fastify user would write for the same job, with
 * the plugins' defaults (no logger, @fastify/http-proxy over undici's keep-alive pool) and
 * the gateway's verification rules spelt in fast-jwt's options. With HS256_SECRET (base64url)
 * it takes HS256 tokens with the same claims (issue 32's Fastify peer), with PUBLIC_KEY EdDSA ones.
 *
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> PUBLIC_KEY="<SPKI PEM>" node bench/servers/fastify.ts
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> HS256_SECRET=<base64url> node bench/servers/fastify.ts
 */
import fastifyHttpProxy from '@fastify/http-proxy';
import fastifyJwt from '@fastify/jwt';
import Fastify from 'fastify';

const port = Number(process.env.PORT);
const backend = process.env.BACKEND;
const publicKey = process.env.PUBLIC_KEY;
const hsSecret = process.env.HS256_SECRET;
if (!Number.isInteger(port) || port <= 0 || backend === undefined || (publicKey === undefined) === (hsSecret === undefined)) {
  throw new Error('PORT, BACKEND and one of PUBLIC_KEY and HS256_SECRET must be set');
}

const app = Fastify();
await app.register(fastifyJwt, {
  secret: hsSecret === undefined ? { public: publicKey! } : Buffer.from(hsSecret, 'base64url'),
  verify: {
    algorithms: [hsSecret === undefined ? 'EdDSA' : 'HS256'],
    allowedIss: 'auth-gateway',
    allowedAud: 'auth-gateway',
    checkTyp: 'at+jwt',
    clockTolerance: 5_000,
    maxAge: 900_000,
    requiredClaims: ['sub', 'client_id', 'jti', 'iat', 'iat_ms', 'exp'],
  },
});
await app.register(fastifyHttpProxy, {
  upstream: backend,
  prefix: '/bench',
  // The backend sees the path the client sent, as behind the gateway.
  rewritePrefix: '/bench',
  preHandler: async (request) => {
    await request.jwtVerify();
  },
});
await app.listen({ port, host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
