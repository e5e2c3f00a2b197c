/** (Being built: issue 14.) */
import type { OwnerDeps } from './deps.js';

export type SettingsTokenService = Record<string, never>;

export function createSettingsTokenService(_deps: OwnerDeps): SettingsTokenService {
  return {};
}
