/**
 * The client's owner types held to the server's: src/owner/api.generated.ts is generated from
 * the gateway's own schemas (`npm run generate:owner-types` in the repository), and this file
 * compiles (`npm run typecheck`) only while every method of OwnerClient answers exactly the
 * type its operation answers, and every input it takes is exactly its operation's body. The
 * client keeps its own named, documented types (they are its public API); a change on either
 * side that makes them differ fails here, naming the methods that drifted.
 */
import type { OPERATIONS, OperationName } from '../src/owner/client.js';
import type { OwnerAnswer, OwnerBody, OwnerOperationId } from '../src/owner/api.generated.js';
import type {
  AcceptInviteInput, AddOwnerInput, ChangePasswordInput, CodeInput, CompletePasswordResetInput, CreateAccountInput, CreateInviteInput, CreateKeyInput,
  CreateSettingsTokenInput, Key, OwnerClient, RequestPasswordResetInput, Role, RoleInput, RollKeyInput, SecondFactorRequirement, SignRecordInput, SignRecordUpdate,
  UpdateAccountInput, UpdateKeyInput, VerifyEmailInput, CreateWebhookInput, UpdateWebhookInput, RollWebhookSecretInput,
} from '../src/owner/index.js';
import type { Equal, Expect } from './assert-types.js';

/** The operation a method calls, by the client's own table. */
type OperationOf<M extends OperationName> = (typeof OPERATIONS)[M]['operationId'] & OwnerOperationId;

/** The method itself: `keys.get` is `client.keys.get`, `signIn` is `client.signIn`. */
type MethodOf<M extends OperationName> = M extends `${infer Group extends keyof OwnerClient}.${infer Name}`
  ? Name extends keyof OwnerClient[Group] ? OwnerClient[Group][Name] : never
  : M extends keyof OwnerClient ? OwnerClient[M] : never;

/**
 * What the method gives back, as the operation's answer would be: an iterator's items are a
 * listing's items (`all` walks the pages that `list` returns one at a time).
 */
type AnswerOf<M extends OperationName> = MethodOf<M> extends (...args: never[]) => infer R
  ? R extends AsyncGenerator<infer Item, void, undefined> ? { items: Item[] } : Awaited<R>
  : never;

type ExpectedAnswer<M extends OperationName> = M extends `${string}.all`
  ? { items: OwnerAnswer<OperationOf<M>>['items'] }
  : OwnerAnswer<OperationOf<M>>;

/** The methods whose answer is not exactly their operation's: `never` while none. */
export type AnswersDrifted = { [M in OperationName]: Equal<AnswerOf<M>, ExpectedAnswer<M>> extends true ? never : M }[OperationName];

/** Each operation with a body, and the client's input type for it. */
interface Inputs {
  changePassword: ChangePasswordInput;
  createAccount: CreateAccountInput;
  updateAccount: UpdateAccountInput;
  addOwner: AddOwnerInput;
  createInvite: CreateInviteInput;
  acceptInvite: AcceptInviteInput;
  requestPasswordReset: RequestPasswordResetInput;
  completePasswordReset: CompletePasswordResetInput;
  verifyEmail: VerifyEmailInput;
  createKey: CreateKeyInput;
  updateKey: UpdateKeyInput;
  rollKey: RollKeyInput;
  createSettingsToken: CreateSettingsTokenInput;
  createWebhook: CreateWebhookInput;
  updateWebhook: UpdateWebhookInput;
  rollWebhookSecret: RollWebhookSecretInput;
  createAccountRole: RoleInput;
  replaceAccountRole: RoleInput;
  createAccountSignRecord: SignRecordInput;
  replaceAccountSignRecord: SignRecordUpdate;
  confirmTotpEnrollment: CodeInput;
  disableTotp: CodeInput;
  regenerateRecoveryCodes: CodeInput;
  setSecondFactorRequirement: SecondFactorRequirement;
}

/** Operations that take a body, but not from the caller: sign-in sends the client's credentials. */
type CredentialBodies = 'signIn';

/**
 * Operations with a body the client has no method for: a passkey's ceremonies need a browser's
 * authenticator, and OwnerClient does not run in browsers (the dashboard registers and uses them).
 */
type NotInClient = 'finishPasskeyRegistration' | 'signInWithPasskey';

/** The operations with a body whose input type is not exactly that body: `never` while none. */
export type InputsDrifted = { [Id in keyof Inputs]: Equal<Inputs[Id], OwnerBody<Id>> extends true ? never : Id }[keyof Inputs];

/** Every operation with a body has its input above (a new one fails here until it is added). */
export type BodiesUnlisted = Exclude<{ [Id in OwnerOperationId]: [OwnerBody<Id>] extends [never] ? never : Id }[OwnerOperationId], keyof Inputs | CredentialBodies | NotInClient>;

/** Compiles only for `never`; otherwise the error names what is left ("… does not satisfy the constraint 'never'"). */
type None<T extends never> = T;

export type OwnerTypesAreTheServers = [None<AnswersDrifted>, None<InputsDrifted>, None<BodiesUnlisted>];

/** The checks above see the types they mean to (not `never` throughout, which would pass anything). */
export type TheChecksSeeTheTypes = [
  Expect<Equal<AnswerOf<'keys.get'>, Key>>,
  Expect<Equal<AnswerOf<'roles.all'>, { items: Role[] }>>,
  Expect<Equal<OwnerAnswer<'getKey'>['scopes'], string[]>>,
  Expect<Equal<OperationOf<'signOut'>, 'deleteSession'>>,
];
