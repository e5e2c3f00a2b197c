/** (Being built: issue 14.) */
import type { OwnerDeps } from './deps.js';

export type AccountService = Record<string, never>;

export function createAccountService(_deps: OwnerDeps): AccountService {
  return {};
}
