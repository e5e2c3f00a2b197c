/**
 * The gateway's own routes. Each is a short list of named steps: guard, then handler.
 * Anything the router does not answer falls through to answerUnmatched, last in app.ts.
 */
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { requireBearer } from '../auth/bearer.js';
import type { Services } from '../services.js';
import { MethodNotAllowed, NotFound } from '../errors/errors.js';
import { reportLiveness, reportReadiness } from './routes/health.js';
import { publishKeys } from './routes/jwks.js';
import { refresh } from './routes/refresh.js';
import { resetTokens } from './routes/reset.js';
import { listRoles } from './routes/roles.js';
import { lookUpSignRecord } from './routes/sign.js';
import { signIn } from './routes/signin.js';

export function createRouter(services: Services): Router {
  const { auth, directory, signer, authenticate, config, formatTimestamp, readiness } = services;
  const bodyLimitBytes = config.server.bodyLimitBytes;
  const bearer = requireBearer(authenticate);
  const router = new Router({ sensitive: true });

  router.use(noStore);
  router.post('/api/signin', signIn({ auth, bodyLimitBytes }));
  router.post('/api/refresh', refresh({ auth, bodyLimitBytes }));
  router.post('/api/reset', resetTokens({ auth, bodyLimitBytes, formatTimestamp }));
  const signRecord = lookUpSignRecord({ directory, formatTimestamp, bodyLimitBytes });
  router.get('/api/sign', bearer, signRecord);
  router.post('/api/sign', bearer, signRecord);
  router.get('/api/roles', bearer, listRoles({ directory, ...config.roles }));
  router.get('/.well-known/jwks.json', publishKeys({ signer }));
  router.get('/healthz', reportLiveness());
  router.get('/readyz', reportReadiness({ checks: readiness }));
  return router;
}

/** Token and account answers must never be stored by a cache (RFC 6749 §5.1). */
async function noStore(ctx: Context, next: Next): Promise<void> {
  ctx.set('Cache-Control', 'no-store');
  await next();
}

/**
 * The last middleware: nothing answered. A path the router knows under other methods is a 405
 * with Allow; anything else is the 404 envelope, and no backend was reached.
 */
export function answerUnmatched() {
  return async function answerUnmatched(ctx: Context): Promise<void> {
    const matched = (ctx as Context & { matched?: { methods: string[] }[] }).matched ?? [];
    const allowed = [...new Set(matched.flatMap((layer) => layer.methods))];
    if (allowed.length > 0) throw new MethodNotAllowed(allowed.join(', '));
    throw new NotFound();
  };
}
