/**
 * WebAuthn ceremonies in flight (owner/passkeys.ts): the challenge the gateway sent, kept
 * server-side by a random ceremony id until the browser's answer comes back, then taken once.
 * A ceremony lives at most its `expiresAt` (a few minutes): a challenge answered later, or a
 * second time, finds nothing. Memory without Redis (an instance's own; the embedded default is
 * one instance), Redis with it (any instance finishes what another started). One contract:
 * test/contracts/ceremonies.contract.ts.
 */
export interface Ceremony {
  /** `registration`: a signed-in owner adding a passkey; `authentication`: a sign-in. */
  kind: 'registration' | 'authentication';
  /** The challenge sent (base64url). */
  challenge: string;
  /** The owner a registration is for; absent for a sign-in (the passkey says whose it is). */
  ownerId?: string;
  /** Epoch ms. */
  expiresAt: number;
}

export interface CeremonyStore {
  /** Keeps a ceremony under `id` until its `expiresAt` (one already past is not kept). */
  put(id: string, ceremony: Ceremony): Promise<void>;
  /**
   * The ceremony under `id`, removed in the same step, so that of two concurrent answers (on any
   * instances) only one gets it; unknown, taken or expired: undefined.
   */
  take(id: string): Promise<Ceremony | undefined>;
}
