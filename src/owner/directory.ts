/** (Being built: issue 14.) */
import type { OwnerDeps } from './deps.js';

export type DirectoryService = Record<string, never>;

export function createDirectoryService(_deps: OwnerDeps): DirectoryService {
  return {};
}
