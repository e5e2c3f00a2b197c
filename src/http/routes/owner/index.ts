/** Every operation of the owner API, in the order the OpenAPI document lists them. */
import type { OwnerServices } from '../../../owner/service.js';
import type { Operation } from '../../owner/operation.js';
import { accountOperations } from './accounts.js';
import type { OwnerRouteDeps } from './deps.js';
import { directoryOperations } from './directory.js';
import { keyOperations } from './keys.js';
import { sessionListOperations } from './session-list.js';
import { mailOperations } from './mail.js';
import { secondFactorOperations } from './second-factors.js';
import { sessionOperations } from './sessions.js';
import { ssoOperations } from './sso.js';
import { settingsTokenOperations } from './settings-tokens.js';
import { usageOperations } from './usage.js';
import { webhookOperations } from './webhooks.js';

export function ownerOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [
    ...sessionOperations(owner, deps),
    ...sessionListOperations(owner),
    ...ssoOperations(owner, deps),
    ...mailOperations(owner),
    ...accountOperations(owner, deps),
    ...keyOperations(owner, deps),
    ...settingsTokenOperations(owner, deps),
    ...directoryOperations(owner, deps),
    ...usageOperations(owner, deps),
    ...webhookOperations(owner),
    ...secondFactorOperations(owner, deps),
  ];
}
