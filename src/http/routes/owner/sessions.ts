/** (Being built: issue 14.) */
import type { OwnerServices } from '../../../owner/service.js';
import type { Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';

export function sessionOperations(_owner: OwnerServices, _deps: OwnerRouteDeps): Operation[] {
  return [];
}
