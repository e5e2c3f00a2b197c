/** What the owner API's routes need besides the owner service. */
import type { Config } from '../../../config/schema.js';

export interface OwnerRouteDeps {
  config: Pick<Config, 'owner'>;
}
