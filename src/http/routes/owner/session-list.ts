/** An owner's own sessions (owner/session-list.ts): list them, end one. Sessions only: operators have none. */
import { z } from 'zod';
import { SessionRequired } from '../../../errors/errors.js';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';

const ownSessionSchema = z.strictObject({
  id: z.string().meta({ description: 'The session\'s handle (never its id or cookie).' }),
  createdAt: z.iso.datetime(),
  lastSeenAt: z.iso.datetime().meta({ description: 'Its last use, to the minute.' }),
  idleExpiresAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
  ip: z.string().optional(),
  userAgent: z.string().optional(),
  current: z.boolean().meta({ description: 'The session this call came with.' }),
});

const sessionIdParam = z.strictObject({ sessionId: z.string().regex(/^[A-Za-z0-9_]{1,64}$/, 'expected a session id from listOwnSessions') });

export function sessionListOperations(owner: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'listOwnSessions',
      method: 'get',
      path: '/owner/v1/sessions',
      summary: 'The signed-in owner\'s sessions, newest first, the current one marked',
      tag: 'Session',
      auth: 'session',
      response: z.strictObject({ items: z.array(ownSessionSchema) }),
      errors: [404],
      async handle({ caller, sessionToken }) {
        if (caller?.kind !== 'owner' || sessionToken === undefined) throw new SessionRequired();
        return owner.sessionList.listOwnSessions(caller, sessionToken);
      },
    }),
    operation({
      operationId: 'endOwnSession',
      method: 'delete',
      path: '/owner/v1/sessions/{sessionId}',
      summary: 'End one of the signed-in owner\'s sessions (audited owner.session_end)',
      tag: 'Session',
      auth: 'session',
      params: sessionIdParam,
      response: ownSessionSchema,
      errors: [403, 404, 409],
      async handle({ params, caller, sessionToken, meta }) {
        if (caller?.kind !== 'owner' || sessionToken === undefined) throw new SessionRequired();
        return owner.sessionList.endOwnSession({ caller, meta }, sessionToken, params.sessionId);
      },
    }),
  ];
}
