/** (Being built: issue 14.) */
import type { OwnerDeps } from './deps.js';

export type KeyService = Record<string, never>;

export function createKeyService(_deps: OwnerDeps): KeyService {
  return {};
}
