/**
 * Who calls the owner API, and from where. The HTTP layer works these out (http/owner/caller.ts)
 * and hands them to every operation of src/owner/, which decides what the caller may see.
 */

/** An owner signed in with a session, or an operator with an admin token (every account). */
export type Caller =
  | { kind: 'owner'; ownerId: string; email: string }
  | { kind: 'operator' };

/** Where a change came from, for its audit event. */
export interface RequestMeta {
  /** The client address as the limits count it. */
  ip: string;
  requestId: string;
  /** The device cookie the request carried (owner/devices.ts checks it), if any. */
  deviceCookie?: string | undefined;
  /** The User-Agent the request carried (a new session keeps it, cut to its bound). */
  userAgent?: string | undefined;
}

/** A caller and where the call came from: what every change takes. */
export interface Actor {
  caller: Caller;
  meta: RequestMeta;
}

/** A page of a listing: `nextCursor` is absent on the last page. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** What listings take: `limit` 1 to 100, and the `nextCursor` of the page before. */
export interface PageQuery {
  limit: number;
  cursor?: string;
}

/** What the session service tells about a presented session token (http/owner/caller.ts asks). */
export interface ResumedSession {
  caller: Extract<Caller, { kind: 'owner' }>;
  csrfToken: string;
  /** An operator-set initial password: only the password change and the session routes work. */
  mustChangePassword: boolean;
  /** A second factor is required of the owner and they have none: only enrollment and the session routes work. */
  mustEnrollSecondFactor?: boolean;
}

export interface SessionResolver {
  /** The live session of this token (its idle deadline moved on), or undefined. */
  resume(token: string): Promise<ResumedSession | undefined>;
}
