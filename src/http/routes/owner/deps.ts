/** What the owner API's routes need besides the owner service. */
import type { Config } from '../../../config/schema.js';
import type { SignAnswers } from '../sign.js';

export interface OwnerRouteDeps {
  config: Pick<Config, 'owner' | 'dashboard'>;
  /** What /api/sign answers for an address (routes/sign.ts): the `served` sign record. */
  signAnswers: SignAnswers;
}
