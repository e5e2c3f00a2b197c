/** (Being built: issue 14.) */
import type { OwnerDeps } from './deps.js';
import type { SessionResolver } from './types.js';

export type SessionService = SessionResolver;

export function createSessionService(_deps: OwnerDeps): SessionService {
  return { resume: async () => undefined };
}
