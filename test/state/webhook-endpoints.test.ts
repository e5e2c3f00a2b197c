/** Webhook endpoints: the contract (test/contracts/webhook-endpoints.contract.ts) on memory. */
import { MemoryWebhookEndpoints } from '../../src/state/webhooks/memory.js';
import { runWebhookEndpointContract } from '../contracts/webhook-endpoints.contract.js';

runWebhookEndpointContract('memory', async () => ({ store: new MemoryWebhookEndpoints(), close: async () => {} }));
