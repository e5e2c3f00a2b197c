/**
 * `OwnerClient`: the owner API (`/owner/v1`) for scripts and servers, on the shared Transport
 * (deadlines, aborts, the envelope, retries of idempotent calls).
 *
 * Two credentials, as the gateway has them (docs/owner.md, "Who calls it"):
 * - an operator's admin token, sent as `Authorization: Bearer gwadm_…` with every call;
 * - an owner's email and password. Node's fetch keeps no cookies, so the client does what a
 *   browser would: it signs in at `POST /owner/v1/session` on the first call, keeps the
 *   session cookie (from `Set-Cookie`) and the session's CSRF token in memory, sends the cookie
 *   with every call and `X-CSRF-Token` with every change. It sends no `Origin`: the gateway
 *   refuses only an Origin other than its own (`owner.publicOrigin`, which a script reaching it
 *   by another address could not match), and a request without one carries no ambient
 *   credential. When a call is answered `401 session_required` (the session idled out, ended,
 *   or the gateway restarted), the client signs in again, once for all calls waiting, and
 *   replays that call once: a 401 changed nothing, so even a POST is safe to send again. A
 *   second 401 is thrown; a wrong password is thrown at once.
 *
 * Not for browsers: a page cannot read `Set-Cookie` nor send `Cookie`, and an admin token or
 * an owner's password in a page is readable by every script on it. A dashboard in a browser
 * calls `/owner/v1` with `credentials: 'include'` itself.
 */
import { AuthenticationError, ConfigurationError, UnexpectedResponseError } from '../errors.js';
import { runsInBrowser } from '../platform.js';
import { isTokenText } from '../tokens.js';
import { isIdempotent, readEnvelope, Transport, within } from '../transport.js';
import type { CallOptions, RateLimitInfo } from '../types.js';
import type {
  AccountsApi, AuditApi, ChangePasswordInput, InvitesApi, KeysApi, MailFlowsApi, MembersApi, OwnerClientOptions, OwnSession, OwnSessions, Page, RolesApi,
  SecondFactorsApi, Session, SettingsTokensApi, SignedOut, WebhooksApi, SignRecordsApi, SsoOptions, UsageApi,
} from './types.js';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call an operation: `caller` (an admin token or a session), `session` (an owner's
 * session only) or `public` (nobody's credential is sent).
 */
type Audience = 'caller' | 'session' | 'public';

interface Operation {
  method: Method;
  path: string;
  operationId: string;
  audience: Audience;
}

const A = '/owner/v1/accounts/{accountId}';

/**
 * Every method of OwnerClient and the operation of `GET /openapi.json` it calls (the test of
 * conformance walks this table against the document, and the methods against this table).
 */
export const OPERATIONS = {
  signIn: { method: 'POST', path: '/owner/v1/session', operationId: 'signIn', audience: 'public' },
  getSession: { method: 'GET', path: '/owner/v1/session', operationId: 'getSession', audience: 'session' },
  changePassword: { method: 'POST', path: '/owner/v1/session/password', operationId: 'changePassword', audience: 'session' },
  signOut: { method: 'DELETE', path: '/owner/v1/session', operationId: 'deleteSession', audience: 'session' },
  listSessions: { method: 'GET', path: '/owner/v1/sessions', operationId: 'listOwnSessions', audience: 'session' },
  endSession: { method: 'DELETE', path: '/owner/v1/sessions/{sessionId}', operationId: 'endOwnSession', audience: 'session' },
  ssoOptions: { method: 'GET', path: '/owner/v1/sso', operationId: 'getSsoOptions', audience: 'public' },
  'accounts.list': { method: 'GET', path: '/owner/v1/accounts', operationId: 'listAccounts', audience: 'caller' },
  'accounts.all': { method: 'GET', path: '/owner/v1/accounts', operationId: 'listAccounts', audience: 'caller' },
  'accounts.create': { method: 'POST', path: '/owner/v1/accounts', operationId: 'createAccount', audience: 'caller' },
  'accounts.get': { method: 'GET', path: A, operationId: 'getAccount', audience: 'caller' },
  'accounts.update': { method: 'PATCH', path: A, operationId: 'updateAccount', audience: 'caller' },
  'accounts.delete': { method: 'DELETE', path: A, operationId: 'deleteAccount', audience: 'caller' },
  'accounts.reset': { method: 'POST', path: `${A}/reset`, operationId: 'resetAccount', audience: 'caller' },
  'members.list': { method: 'GET', path: `${A}/members`, operationId: 'listMembers', audience: 'caller' },
  'members.all': { method: 'GET', path: `${A}/members`, operationId: 'listMembers', audience: 'caller' },
  'members.addOwner': { method: 'POST', path: `${A}/owners`, operationId: 'addOwner', audience: 'caller' },
  'members.remove': { method: 'DELETE', path: `${A}/members/{ownerId}`, operationId: 'removeMember', audience: 'caller' },
  'invites.list': { method: 'GET', path: `${A}/invites`, operationId: 'listInvites', audience: 'caller' },
  'invites.all': { method: 'GET', path: `${A}/invites`, operationId: 'listInvites', audience: 'caller' },
  'invites.create': { method: 'POST', path: `${A}/invites`, operationId: 'createInvite', audience: 'caller' },
  'invites.revoke': { method: 'DELETE', path: `${A}/invites/{inviteId}`, operationId: 'revokeInvite', audience: 'caller' },
  'invites.accept': { method: 'POST', path: '/owner/v1/invites/accept', operationId: 'acceptInvite', audience: 'public' },
  'mail.requestPasswordReset': { method: 'POST', path: '/owner/v1/password-reset', operationId: 'requestPasswordReset', audience: 'public' },
  'mail.completePasswordReset': { method: 'POST', path: '/owner/v1/password-reset/complete', operationId: 'completePasswordReset', audience: 'public' },
  'mail.verifyEmail': { method: 'POST', path: '/owner/v1/email-verification', operationId: 'verifyEmail', audience: 'public' },
  'keys.list': { method: 'GET', path: `${A}/keys`, operationId: 'listKeys', audience: 'caller' },
  'keys.all': { method: 'GET', path: `${A}/keys`, operationId: 'listKeys', audience: 'caller' },
  'keys.create': { method: 'POST', path: `${A}/keys`, operationId: 'createKey', audience: 'caller' },
  'keys.get': { method: 'GET', path: `${A}/keys/{keyId}`, operationId: 'getKey', audience: 'caller' },
  'keys.update': { method: 'PATCH', path: `${A}/keys/{keyId}`, operationId: 'updateKey', audience: 'caller' },
  'keys.delete': { method: 'DELETE', path: `${A}/keys/{keyId}`, operationId: 'deleteKey', audience: 'caller' },
  'keys.roll': { method: 'POST', path: `${A}/keys/{keyId}/roll`, operationId: 'rollKey', audience: 'caller' },
  'keys.reset': { method: 'POST', path: `${A}/keys/{keyId}/reset`, operationId: 'resetKey', audience: 'caller' },
  'settingsTokens.list': { method: 'GET', path: `${A}/settings-tokens`, operationId: 'listSettingsTokens', audience: 'caller' },
  'settingsTokens.all': { method: 'GET', path: `${A}/settings-tokens`, operationId: 'listSettingsTokens', audience: 'caller' },
  'settingsTokens.create': { method: 'POST', path: `${A}/settings-tokens`, operationId: 'createSettingsToken', audience: 'caller' },
  'settingsTokens.get': { method: 'GET', path: `${A}/settings-tokens/{tokenId}`, operationId: 'getSettingsToken', audience: 'caller' },
  'settingsTokens.revoke': { method: 'DELETE', path: `${A}/settings-tokens/{tokenId}`, operationId: 'revokeSettingsToken', audience: 'caller' },
  'webhooks.list': { method: 'GET', path: `${A}/webhooks`, operationId: 'listWebhooks', audience: 'caller' },
  'webhooks.create': { method: 'POST', path: `${A}/webhooks`, operationId: 'createWebhook', audience: 'caller' },
  'webhooks.get': { method: 'GET', path: `${A}/webhooks/{webhookId}`, operationId: 'getWebhook', audience: 'caller' },
  'webhooks.update': { method: 'PATCH', path: `${A}/webhooks/{webhookId}`, operationId: 'updateWebhook', audience: 'caller' },
  'webhooks.delete': { method: 'DELETE', path: `${A}/webhooks/{webhookId}`, operationId: 'deleteWebhook', audience: 'caller' },
  'webhooks.deliveries': { method: 'GET', path: `${A}/webhooks/{webhookId}/deliveries`, operationId: 'listWebhookDeliveries', audience: 'caller' },
  'webhooks.sendTest': { method: 'POST', path: `${A}/webhooks/{webhookId}/test`, operationId: 'sendTestWebhook', audience: 'caller' },
  'webhooks.rollSecret': { method: 'POST', path: `${A}/webhooks/{webhookId}/roll-secret`, operationId: 'rollWebhookSecret', audience: 'caller' },
  'roles.list': { method: 'GET', path: `${A}/roles`, operationId: 'listAccountRoles', audience: 'caller' },
  'roles.all': { method: 'GET', path: `${A}/roles`, operationId: 'listAccountRoles', audience: 'caller' },
  'roles.get': { method: 'GET', path: `${A}/roles/{roleId}`, operationId: 'getAccountRole', audience: 'caller' },
  'roles.create': { method: 'POST', path: `${A}/roles`, operationId: 'createAccountRole', audience: 'caller' },
  'roles.replace': { method: 'PUT', path: `${A}/roles/{roleId}`, operationId: 'replaceAccountRole', audience: 'caller' },
  'roles.delete': { method: 'DELETE', path: `${A}/roles/{roleId}`, operationId: 'deleteAccountRole', audience: 'caller' },
  'signRecords.create': { method: 'POST', path: `${A}/sign-records`, operationId: 'createAccountSignRecord', audience: 'caller' },
  'signRecords.get': { method: 'GET', path: `${A}/sign-records/{address}`, operationId: 'getAccountSignRecord', audience: 'caller' },
  'signRecords.replace': { method: 'PUT', path: `${A}/sign-records/{address}`, operationId: 'replaceAccountSignRecord', audience: 'caller' },
  'signRecords.delete': { method: 'DELETE', path: `${A}/sign-records/{address}`, operationId: 'deleteAccountSignRecord', audience: 'caller' },
  'signRecords.served': { method: 'GET', path: `${A}/sign-records/{address}/served`, operationId: 'getAccountServedSignRecord', audience: 'caller' },
  'usage.get': { method: 'GET', path: `${A}/usage`, operationId: 'getAccountUsage', audience: 'caller' },
  'audit.list': { method: 'GET', path: `${A}/audit`, operationId: 'listAudit', audience: 'caller' },
  'audit.all': { method: 'GET', path: `${A}/audit`, operationId: 'listAudit', audience: 'caller' },
  'secondFactors.get': { method: 'GET', path: '/owner/v1/session/second-factors', operationId: 'getSecondFactors', audience: 'session' },
  'secondFactors.startTotp': { method: 'POST', path: '/owner/v1/session/totp', operationId: 'startTotpEnrollment', audience: 'session' },
  'secondFactors.confirmTotp': { method: 'POST', path: '/owner/v1/session/totp/confirmation', operationId: 'confirmTotpEnrollment', audience: 'session' },
  'secondFactors.disableTotp': { method: 'POST', path: '/owner/v1/session/totp/disable', operationId: 'disableTotp', audience: 'session' },
  'secondFactors.regenerateRecoveryCodes': { method: 'POST', path: '/owner/v1/session/recovery-codes', operationId: 'regenerateRecoveryCodes', audience: 'session' },
  'secondFactors.deletePasskey': { method: 'DELETE', path: '/owner/v1/session/passkeys/{passkeyId}', operationId: 'deletePasskey', audience: 'session' },
  'secondFactors.getRequirement': { method: 'GET', path: `${A}/second-factor-requirement`, operationId: 'getSecondFactorRequirement', audience: 'caller' },
  'secondFactors.setRequirement': { method: 'PUT', path: `${A}/second-factor-requirement`, operationId: 'setSecondFactorRequirement', audience: 'caller' },
  'secondFactors.resetMember': { method: 'DELETE', path: `${A}/members/{ownerId}/second-factors`, operationId: 'resetMemberSecondFactors', audience: 'caller' },
} as const satisfies Record<string, Operation>;

export type OperationName = keyof typeof OPERATIONS;

/** One call of an operation: its path parameters, query and JSON body. */
interface Call {
  params?: Record<string, string | number>;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
}

/** A session held: the cookie as sent back (`name=value`) and its CSRF token. */
interface HeldSession {
  cookie: string;
  csrfToken: string;
}

const ADMIN_TOKEN_PREFIX = 'gwadm_';
// Over TLS the gateway names it __Host-gw_session, else gw_session (docs/owner.md, Sessions).
const SESSION_COOKIE = /^((?:__Host-)?gw_session)=([^;]*)/;
const UNSAFE = new Set<string>(['POST', 'PUT', 'PATCH', 'DELETE']);

export class OwnerClient {
  readonly accounts: AccountsApi;
  readonly members: MembersApi;
  readonly invites: InvitesApi;
  readonly mail: MailFlowsApi;
  readonly keys: KeysApi;
  readonly settingsTokens: SettingsTokensApi;
  /** Where the account's owner events are sent (docs/webhooks.md). */
  readonly webhooks: WebhooksApi;
  readonly roles: RolesApi;
  readonly signRecords: SignRecordsApi;
  readonly usage: UsageApi;
  readonly audit: AuditApi;
  readonly secondFactors: SecondFactorsApi;

  readonly #transport: Transport;
  readonly #adminToken: string | undefined;
  readonly #email: string | undefined;
  #password: string | undefined;
  #session: HeldSession | undefined;
  #signingIn: Promise<{ held: HeldSession; session: Session }> | undefined;

  constructor(options: OwnerClientOptions) {
    if (runsInBrowser()) {
      throw new ConfigurationError({
        code: 'browser_unsupported',
        description: 'OwnerClient is for scripts and servers: a page can neither read Set-Cookie nor keep an admin token or a password from its other scripts',
      });
    }
    const { adminToken, email, password } = options as { adminToken?: unknown; email?: unknown; password?: unknown };
    if (adminToken !== undefined) {
      if (email !== undefined || password !== undefined) throw configuration('give either adminToken or email and password, not both');
      const token = typeof adminToken === 'string' ? adminToken.trim() : adminToken;
      // Checked as a header value too: the platform's refusal of one would quote it.
      if (typeof token !== 'string' || !token.startsWith(ADMIN_TOKEN_PREFIX) || !isTokenText(token)) throw configuration(`adminToken must be an admin token (${ADMIN_TOKEN_PREFIX}…)`);
      this.#adminToken = token;
    } else {
      if (typeof email !== 'string' || typeof password !== 'string' || email === '' || password === '') throw configuration('give adminToken, or email and password');
      this.#email = email;
      this.#password = password;
    }
    this.#transport = new Transport({ baseUrl: options.baseUrl, fetch: options.fetch, timeoutMs: options.timeoutMs, retry: options.retry, onRateLimit: options.onRateLimit });

    const call = <T>(name: OperationName, request: Call, callOptions?: CallOptions) => this.#call<T>(name, request, callOptions);
    const all = <T>(name: OperationName, params: Record<string, string>, query: Record<string, string | number | undefined>, callOptions?: CallOptions) =>
      everyItem<T>((cursor) => this.#call<Page<T>>(name, { params, query: { ...query, cursor } }, callOptions));

    this.accounts = {
      list: (query = {}, o) => call('accounts.list', { query: { ...query } }, o),
      all: (query = {}, o) => all('accounts.all', {}, { ...query }, o),
      create: (input, o) => call('accounts.create', { body: input }, o),
      get: (accountId, o) => call('accounts.get', { params: { accountId } }, o),
      update: (accountId, input, o) => call('accounts.update', { params: { accountId }, body: input }, o),
      delete: (accountId, o) => call('accounts.delete', { params: { accountId } }, o),
      reset: (accountId, o) => call('accounts.reset', { params: { accountId } }, o),
    };
    this.members = {
      list: (accountId, query = {}, o) => call('members.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('members.all', { accountId }, { ...query }, o),
      addOwner: (accountId, input, o) => call('members.addOwner', { params: { accountId }, body: input }, o),
      remove: (accountId, ownerId, o) => call('members.remove', { params: { accountId, ownerId } }, o),
    };
    this.invites = {
      list: (accountId, query = {}, o) => call('invites.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('invites.all', { accountId }, { ...query }, o),
      create: (accountId, input, o) => call('invites.create', { params: { accountId }, body: input }, o),
      revoke: (accountId, inviteId, o) => call('invites.revoke', { params: { accountId, inviteId } }, o),
      accept: (input, o) => call('invites.accept', { body: input }, o),
    };
    this.mail = {
      requestPasswordReset: (input, o) => call('mail.requestPasswordReset', { body: input }, o),
      completePasswordReset: (input, o) => call('mail.completePasswordReset', { body: input }, o),
      verifyEmail: (input, o) => call('mail.verifyEmail', { body: input }, o),
    };
    this.keys = {
      list: (accountId, query = {}, o) => call('keys.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('keys.all', { accountId }, { ...query }, o),
      create: (accountId, input, o) => call('keys.create', { params: { accountId }, body: input }, o),
      get: (accountId, keyId, o) => call('keys.get', { params: { accountId, keyId } }, o),
      update: (accountId, keyId, input, o) => call('keys.update', { params: { accountId, keyId }, body: input }, o),
      delete: (accountId, keyId, o) => call('keys.delete', { params: { accountId, keyId } }, o),
      roll: (accountId, keyId, input, o) => call('keys.roll', { params: { accountId, keyId }, body: input }, o),
      reset: (accountId, keyId, o) => call('keys.reset', { params: { accountId, keyId } }, o),
    };
    this.settingsTokens = {
      list: (accountId, query = {}, o) => call('settingsTokens.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('settingsTokens.all', { accountId }, { ...query }, o),
      create: (accountId, input, o) => call('settingsTokens.create', { params: { accountId }, body: input }, o),
      get: (accountId, tokenId, o) => call('settingsTokens.get', { params: { accountId, tokenId } }, o),
      revoke: (accountId, tokenId, o) => call('settingsTokens.revoke', { params: { accountId, tokenId } }, o),
    };
    this.roles = {
      list: (accountId, query = {}, o) => call('roles.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('roles.all', { accountId }, { ...query }, o),
      get: (accountId, roleId, o) => call('roles.get', { params: { accountId, roleId } }, o),
      create: (accountId, input, o) => call('roles.create', { params: { accountId }, body: input }, o),
      replace: (accountId, roleId, input, o) => call('roles.replace', { params: { accountId, roleId }, body: input }, o),
      delete: (accountId, roleId, o) => call('roles.delete', { params: { accountId, roleId } }, o),
    };
    this.signRecords = {
      create: (accountId, input, o) => call('signRecords.create', { params: { accountId }, body: input }, o),
      get: (accountId, address, o) => call('signRecords.get', { params: { accountId, address } }, o),
      replace: (accountId, address, input, o) => call('signRecords.replace', { params: { accountId, address }, body: input }, o),
      delete: (accountId, address, o) => call('signRecords.delete', { params: { accountId, address } }, o),
      served: (accountId, address, o) => call('signRecords.served', { params: { accountId, address } }, o),
    };
    this.webhooks = {
      list: (accountId, o) => call('webhooks.list', { params: { accountId } }, o),
      create: (accountId, input, o) => call('webhooks.create', { params: { accountId }, body: input }, o),
      get: (accountId, webhookId, o) => call('webhooks.get', { params: { accountId, webhookId } }, o),
      update: (accountId, webhookId, input, o) => call('webhooks.update', { params: { accountId, webhookId }, body: input }, o),
      delete: (accountId, webhookId, o) => call('webhooks.delete', { params: { accountId, webhookId } }, o),
      deliveries: (accountId, webhookId, o) => call('webhooks.deliveries', { params: { accountId, webhookId } }, o),
      sendTest: (accountId, webhookId, o) => call('webhooks.sendTest', { params: { accountId, webhookId } }, o),
      rollSecret: (accountId, webhookId, input = {}, o) => call('webhooks.rollSecret', { params: { accountId, webhookId }, body: input }, o),
    };
    this.usage = {
      get: (accountId, query = {}, o) => call('usage.get', { params: { accountId }, query: { ...query } }, o),
    };
    this.audit = {
      list: (accountId, query = {}, o) => call('audit.list', { params: { accountId }, query: { ...query } }, o),
      all: (accountId, query = {}, o) => all('audit.all', { accountId }, { ...query }, o),
    };
    this.secondFactors = {
      get: (o) => call('secondFactors.get', {}, o),
      startTotp: (o) => call('secondFactors.startTotp', {}, o),
      confirmTotp: (input, o) => call('secondFactors.confirmTotp', { body: input }, o),
      disableTotp: (input, o) => call('secondFactors.disableTotp', { body: input }, o),
      regenerateRecoveryCodes: (input, o) => call('secondFactors.regenerateRecoveryCodes', { body: input }, o),
      deletePasskey: (passkeyId, o) => call('secondFactors.deletePasskey', { params: { passkeyId } }, o),
      getRequirement: (accountId, o) => call('secondFactors.getRequirement', { params: { accountId } }, o),
      setRequirement: (accountId, input, o) => call('secondFactors.setRequirement', { params: { accountId }, body: input }, o),
      resetMember: (accountId, ownerId, o) => call('secondFactors.resetMember', { params: { accountId, ownerId } }, o),
    };
  }

  /** The RateLimit fields of the latest answer that carried them. */
  get rateLimit(): RateLimitInfo | undefined {
    return this.#transport.rateLimit;
  }

  /**
   * Signs the owner in now (the first call would otherwise) and answers the session: the owner,
   * their accounts, and whether the initial password must be changed first. A session already
   * held is replaced. Owners only.
   */
  async signIn(options: CallOptions = {}): Promise<Session> {
    this.#ownerOnly('signIn');
    const scope = this.#transport.scope(options);
    try {
      scope.check();
      return (await within(scope, this.#startSignIn())).session;
    } finally {
      scope.end();
    }
  }

  /** `GET /owner/v1/session`: the session held (signing in first if none is). Owners only. */
  async getSession(options?: CallOptions): Promise<Session> {
    this.#ownerOnly('getSession');
    return await this.#call<Session>('getSession', {}, options);
  }

  /**
   * Changes the owner's password (also how an initial password set by an operator is replaced).
   * Every other session of the owner ends; this client keeps the new one and signs in with the
   * new password from now on. Owners only.
   */
  async changePassword(input: ChangePasswordInput, options?: CallOptions): Promise<Session> {
    this.#ownerOnly('changePassword');
    return await this.#call<Session>('changePassword', { body: input }, options, (session, res) => {
      this.#password = input.newPassword;
      const cookie = sessionCookieOf(res);
      if (cookie) this.#session = { cookie, csrfToken: session.csrfToken };
    });
  }

  /**
   * Ends the session held, if any (`DELETE /owner/v1/session`); a later call signs in again.
   * With an admin token, or before any sign-in, there is nothing to end and nothing is sent.
   * Whatever the answer, the client forgets the session.
   */
  async signOut(options?: CallOptions): Promise<SignedOut> {
    if (this.#adminToken !== undefined) return { signedOut: true };
    // A sign-in under way is let finish, so that the session it makes is the one ended.
    await this.#signingIn?.catch(() => undefined);
    const held = this.#session;
    if (held === undefined) return { signedOut: true };
    try {
      return await this.#call<SignedOut>('signOut', {}, options);
    } catch (err) {
      if (isSessionEnded(err)) return { signedOut: true };
      throw err;
    } finally {
      if (this.#session === held) this.#session = undefined;
    }
  }

  /** `GET /owner/v1/sessions`: the owner's sessions, newest first, the one this client holds marked `current`. Owners only. */
  async listSessions(options?: CallOptions): Promise<OwnSessions> {
    this.#ownerOnly('listSessions');
    return await this.#call<OwnSessions>('listSessions', {}, options);
  }

  /** `DELETE /owner/v1/sessions/{sessionId}`: ends one of the owner's sessions (its `id` from listSessions). Owners only. */
  async endSession(sessionId: string, options?: CallOptions): Promise<OwnSession> {
    this.#ownerOnly('endSession');
    return await this.#call<OwnSession>('endSession', { params: { sessionId } }, options);
  }

  /** `GET /owner/v1/sso`: whether owners may sign in through an OpenID provider (a browser's navigation, not this client's). */
  async ssoOptions(options?: CallOptions): Promise<SsoOptions> {
    return await this.#call<SsoOptions>('ssoOptions', {}, options);
  }

  #ownerOnly(what: string): void {
    if (this.#adminToken !== undefined) throw configuration(`${what} is for owners (email and password); an admin token has no session`);
  }

  /**
   * One operation: its credential, the retry policy (idempotent methods only), the envelope
   * read into the answer or the typed error, and for a session that ended, one sign-in and one
   * replay. `adopt` sees a successful answer's message and response (for a new session cookie).
   */
  async #call<T>(name: OperationName, request: Call, options: CallOptions = {}, adopt?: (value: T, res: Response) => void): Promise<T> {
    const operation: Operation = OPERATIONS[name];
    const scope = this.#transport.scope(options);
    try {
      const url = this.#transport.url(expand(operation.path, request.params ?? {}), request.query);
      const body = request.body === undefined ? undefined : JSON.stringify(request.body);
      const usesSession = operation.audience !== 'public' && this.#adminToken === undefined;
      // Signing out must not sign in again: an ended session is what it asks for.
      for (let replayed = name === 'signOut'; ; replayed = true) {
        scope.check();
        let held: HeldSession | undefined;
        if (usesSession) held = this.#session ?? (name === 'signOut' ? undefined : (await within(scope, this.#startSignIn())).held);
        const headers: Record<string, string> = { accept: 'application/json' };
        if (body !== undefined) headers['content-type'] = 'application/json';
        if (operation.audience !== 'public' && this.#adminToken !== undefined) headers.authorization = `Bearer ${this.#adminToken}`;
        if (held !== undefined) {
          headers.cookie = held.cookie;
          if (UNSAFE.has(operation.method)) headers['x-csrf-token'] = held.csrfToken;
        }
        const res = await this.#transport.withRetries(scope, this.#transport.policy(options), isIdempotent(operation.method), () =>
          this.#transport.attempt(scope, url, { method: operation.method, headers, body }));
        try {
          const value = await readEnvelope<T>(res, scope);
          adopt?.(value, res);
          return value;
        } catch (err) {
          if (held === undefined || replayed || !isSessionEnded(err)) throw err;
          // Only the session this call used is dropped: another call may have signed in since.
          if (this.#session === held) this.#session = undefined;
        }
      }
    } finally {
      scope.end();
    }
  }

  /** One sign-in at a time: every call that needs a session while it runs waits for it. */
  #startSignIn(): Promise<{ held: HeldSession; session: Session }> {
    this.#signingIn ??= this.#signInNow().finally(() => {
      this.#signingIn = undefined;
    });
    return this.#signingIn;
  }

  /**
   * `POST /owner/v1/session`, under a time limit of its own (the client's), so that a waiting
   * call giving up does not end it for the others. Refusals that changed nothing (429, 503)
   * are retried; a wrong password is not.
   */
  async #signInNow(): Promise<{ held: HeldSession; session: Session }> {
    const operation = OPERATIONS.signIn;
    const scope = this.#transport.scope();
    try {
      const url = this.#transport.url(operation.path);
      const init = {
        method: operation.method,
        headers: { accept: 'application/json', 'content-type': 'application/json' },
        body: JSON.stringify({ email: this.#email, password: this.#password }),
      };
      const res = await this.#transport.withRetries(scope, this.#transport.policy(), true, () => this.#transport.attempt(scope, url, init));
      const session = await readEnvelope<Session>(res, scope);
      const cookie = sessionCookieOf(res);
      if (!cookie || typeof session.csrfToken !== 'string') {
        throw new UnexpectedResponseError({
          code: 'unexpected_response',
          description: 'the sign-in answer set no session cookie (a proxy in front of the gateway may drop Set-Cookie)',
          status: res.status,
          requestId: res.headers.get('x-request-id') ?? undefined,
        });
      }
      const held = { cookie, csrfToken: session.csrfToken };
      this.#session = held;
      return { held, session };
    } finally {
      scope.end();
    }
  }
}

/** Every item of a listing, following `nextCursor` page after page. */
async function* everyItem<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  // A cursor that comes back (the same one, or one of a cycle) would loop for ever.
  const seen = new Set<string>();
  for (;;) {
    const answer = await page(cursor);
    if (!Array.isArray(answer?.items)) throw new UnexpectedResponseError({ code: 'unexpected_response', description: 'the listing answered without an items list' });
    yield* answer.items;
    if (answer.nextCursor === undefined || answer.nextCursor === null) return;
    if (typeof answer.nextCursor !== 'string' || seen.has(answer.nextCursor)) {
      throw new UnexpectedResponseError({ code: 'unexpected_response', description: 'the listing answered a cursor it had already given' });
    }
    seen.add(answer.nextCursor);
    cursor = answer.nextCursor;
  }
}

/** The path template with its parameters, each percent-encoded. */
function expand(template: string, params: Record<string, string | number>): string {
  return template.replaceAll(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name}`);
    // encodeURIComponent leaves dots alone, and the URL parser resolves '.' and '..' segments:
    // keys.delete(accountId, '..') would be DELETE /owner/v1/accounts/{accountId}.
    const text = String(value);
    if (text === '' || text === '.' || text === '..') throw new TypeError(`path parameter ${name} may not be empty, "." or ".."`);
    return encodeURIComponent(text);
  });
}

/** The session cookie an answer sets, as `name=value`; `''` when it clears it; undefined when it sets none. */
function sessionCookieOf(res: Response): string | undefined {
  // getSetCookie is Node 19.7+ and every current browser (where it answers nothing).
  for (const line of res.headers.getSetCookie()) {
    const match = SESSION_COOKIE.exec(line);
    if (match !== null) return match[2] === '' ? '' : `${match[1]}=${match[2]}`;
  }
  return undefined;
}

function isSessionEnded(err: unknown): boolean {
  return err instanceof AuthenticationError && err.code === 'session_required';
}

function configuration(description: string): ConfigurationError {
  return new ConfigurationError({ code: 'invalid_configuration', description });
}
