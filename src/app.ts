/**
 * createApp(services): the middleware order and nothing else.
 *
 *   request id → access log → error boundary → ambiguous requests refused → path normalised
 *     → the gateway's own routes → proxied routes → 404/405
 *
 * The access log sits outside the boundary so it sees every final status; the boundary sits
 * outside everything that can throw, so every answer, errors included, is the envelope.
 */
import Koa from 'koa';
import { errorBoundary } from './errors/boundary.js';
import { REALM } from './errors/challenge.js';
import { logAccess } from './http/middleware/access-log.js';
import { assignRequestId } from './http/middleware/request-id.js';
import { normalisePath } from './http/middleware/normalise-path.js';
import { refuseAmbiguousRequests } from './http/middleware/request-head.js';
import { answerUnmatched, createRouter } from './http/router.js';
import type { Services } from './services.js';


export function createApp(services: Services): Koa {
  const app = new Koa();
  const router = createRouter(services);

  app.use(assignRequestId());
  app.use(logAccess(services.log));
  app.use(errorBoundary({ realm: REALM, log: services.log }));
  app.use(refuseAmbiguousRequests());
  app.use(normalisePath());
  app.use(router.routes());
  app.use(services.proxy.middleware());
  app.use(answerUnmatched());

  // Reached only for failures after the response started (the boundary answers the rest).
  app.on('error', (err: Error) => services.log.warn({ err: { name: err.name, message: err.message } }, 'response failed after it started'));
  return app;
}
