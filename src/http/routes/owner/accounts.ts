/**
 * Accounts, members, owners, invites and the audit log over HTTP: each operation turns its
 * validated input into one call of the account service (src/owner/accounts.ts), which decides
 * who may do what. Invite links point at the owner's page of the gateway, the token in the
 * fragment so it never reaches a server log or a Referer.
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import {
  accountParams, accountSchema, auditEventView, emailField, idField, inviteSchema, memberSchema, nameField,
  actorOf, callerOf, newPasswordField, pageOf, pageQuery, safeName,
} from './schemas.js';

/** Accounts, their members, invites and audit log, in the order the OpenAPI document lists them. */
export function accountOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [
    ...accountTable(owner),
    ...memberOperations(owner),
    ...inviteOperations(owner, deps),
    ...auditOperations(owner),
  ];
}

function accountTable({ accounts }: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'listAccounts',
      method: 'get',
      path: '/owner/v1/accounts',
      summary: 'The accounts the caller manages (an operator: every live account)',
      tag: 'Accounts',
      auth: 'caller',
      query: pageQuery,
      response: pageOf(accountSchema),
      errors: [403],
      handle: ({ query, caller }) => accounts.listAccounts(callerOf(caller), query),
    }),
    operation({
      operationId: 'createAccount',
      method: 'post',
      path: '/owner/v1/accounts',
      summary: 'Create an account (operator)',
      tag: 'Accounts',
      auth: 'caller',
      body: z.strictObject({ id: idField.optional(), name: nameField }),
      status: 201,
      response: accountSchema,
      errors: [403, 409],
      handle: ({ body, caller, meta }) => accounts.createAccount(actorOf({ caller, meta }), body),
    }),
    operation({
      operationId: 'getAccount',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}',
      summary: 'One account',
      tag: 'Accounts',
      auth: 'caller',
      params: accountParams,
      response: accountSchema,
      errors: [403, 404],
      handle: ({ params, caller }) => accounts.getAccount(callerOf(caller), params.accountId),
    }),
    operation({
      operationId: 'updateAccount',
      method: 'patch',
      path: '/owner/v1/accounts/{accountId}',
      summary: 'Rename an account; enable or disable it (operator: disabling stops every token of the account at once)',
      tag: 'Accounts',
      auth: 'caller',
      params: accountParams,
      body: z.strictObject({ name: nameField.optional(), enabled: z.boolean().optional() }),
      response: accountSchema,
      errors: [403, 404, 409],
      handle: ({ params, body, caller, meta }) => accounts.updateAccount(actorOf({ caller, meta }), params.accountId, body),
    }),
    operation({
      operationId: 'deleteAccount',
      method: 'delete',
      path: '/owner/v1/accounts/{accountId}',
      summary: 'Delete an account (operator): its keys, tokens, invites, members, roles and sign records go; its id is never reused',
      tag: 'Accounts',
      auth: 'caller',
      params: accountParams,
      response: z.strictObject({ id: z.string(), deleted: z.literal(true) }),
      errors: [403, 404, 409],
      handle: ({ params, caller, meta }) => accounts.deleteAccount(actorOf({ caller, meta }), params.accountId),
    }),
  ];
}

function memberOperations({ accounts }: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'listMembers',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/members',
      summary: 'The owners of an account',
      tag: 'Members',
      auth: 'caller',
      params: accountParams,
      query: pageQuery,
      response: pageOf(memberSchema),
      errors: [403, 404],
      handle: ({ params, query, caller }) => accounts.listMembers(callerOf(caller), params.accountId, query),
    }),
    operation({
      operationId: 'removeMember',
      method: 'delete',
      path: '/owner/v1/accounts/{accountId}/members/{ownerId}',
      summary: 'Remove an owner from an account (not the last one)',
      tag: 'Members',
      auth: 'caller',
      params: z.strictObject({ accountId: idField, ownerId: idField }),
      response: z.strictObject({ ownerId: z.string(), removed: z.literal(true) }),
      errors: [403, 404, 409],
      handle: ({ params, caller, meta }) => accounts.removeMember(actorOf({ caller, meta }), params.accountId, params.ownerId),
    }),
    operation({
      operationId: 'addOwner',
      method: 'post',
      path: '/owner/v1/accounts/{accountId}/owners',
      summary: 'Add a new owner with an initial password they must change (operator); an email that has an owner already is a 409: invite them',
      tag: 'Members',
      auth: 'caller',
      params: accountParams,
      body: z.strictObject({ email: emailField, initialPassword: newPasswordField }),
      status: 201,
      response: memberSchema,
      errors: [403, 404, 409],
      handle: ({ params, body, caller, meta }) => accounts.addOwner(actorOf({ caller, meta }), params.accountId, body),
    }),
  ];
}

function inviteOperations({ accounts }: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'listInvites',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/invites',
      summary: 'An account\'s invites, newest first',
      tag: 'Invites',
      auth: 'caller',
      params: accountParams,
      query: pageQuery,
      response: pageOf(inviteSchema),
      errors: [403, 404],
      handle: ({ params, query, caller }) => accounts.listInvites(callerOf(caller), params.accountId, query),
    }),
    operation({
      operationId: 'createInvite',
      method: 'post',
      path: '/owner/v1/accounts/{accountId}/invites',
      summary: 'Invite someone to own an account: the one-time token and link are in this answer only',
      tag: 'Invites',
      auth: 'caller',
      params: accountParams,
      body: z.strictObject({ email: emailField }),
      status: 201,
      response: z.strictObject({ invite: inviteSchema, token: z.string(), url: z.string() }),
      errors: [403, 404, 409],
      async handle({ params, body, caller, meta, ctx }) {
        const { invite, token } = await accounts.createInvite(actorOf({ caller, meta }), params.accountId, body);
        return { invite, token, url: `${deps.config.owner.publicOrigin ?? `${ctx.protocol}://${ctx.host}`}/owner/invite#${token}` };
      },
    }),
    operation({
      operationId: 'revokeInvite',
      method: 'delete',
      path: '/owner/v1/accounts/{accountId}/invites/{inviteId}',
      summary: 'Revoke a pending invite',
      tag: 'Invites',
      auth: 'caller',
      params: z.strictObject({ accountId: idField, inviteId: idField }),
      response: inviteSchema,
      errors: [403, 404, 409],
      handle: ({ params, caller, meta }) => accounts.revokeInvite(actorOf({ caller, meta }), params.accountId, params.inviteId),
    }),
    operation({
      operationId: 'acceptInvite',
      method: 'post',
      path: '/owner/v1/invites/accept',
      summary: 'Accept an invite: a new owner chooses their password; an existing owner gives theirs',
      tag: 'Invites',
      auth: 'public',
      body: z.strictObject({ token: safeName(256), password: newPasswordField }),
      response: z.strictObject({ ownerId: z.string(), accountId: z.string() }),
      errors: [401, 403, 404, 409],
      handle: ({ body, meta }) => accounts.acceptInvite(body, meta),
    }),
  ];
}

function auditOperations({ accounts }: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'listAudit',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/audit',
      summary: 'The account\'s audit events, newest first',
      tag: 'Audit',
      auth: 'caller',
      params: accountParams,
      query: pageQuery,
      response: pageOf(auditEventView),
      errors: [403, 404],
      handle: ({ params, query, caller }) => accounts.listAudit(callerOf(caller), params.accountId, query),
    }),
  ];
}
