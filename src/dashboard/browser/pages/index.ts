/** Every page of pages.ts, drawn by the module of its part. */
import type { PageDef } from '../app.js';
import type { PageName } from '../pages.js';
import { accountPages } from './account.js';
import { activityPages } from './activity.js';
import { keyPages } from './keys.js';
import { mailPages } from './mail.js';
import { rolePages } from './roles.js';
import { sessionPages } from './sessions.js';
import { securityPages } from './security.js';
import { settingsTokenPages } from './settings-tokens.js';
import { signInPages } from './sign-in.js';
import { signRecordPages } from './sign-records.js';
import { webhookPages } from './webhooks.js';

export const PAGE_DEFS: Record<PageName, PageDef> = {
  ...signInPages,
  ...sessionPages,
  ...mailPages,
  ...accountPages,
  ...rolePages,
  ...keyPages,
  ...settingsTokenPages,
  ...webhookPages,
  ...signRecordPages,
  ...activityPages,
  ...securityPages,
};
