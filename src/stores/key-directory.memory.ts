import type { DataFile } from './data-file.js';
import type { ApiKeyRecord, KeyDirectory } from './key-directory.js';

/** Key directory held in process memory, built from the data file. */
export class MemoryKeyDirectory implements KeyDirectory {
  readonly #byApiKey = new Map<string, ApiKeyRecord>();
  readonly #byKeyId = new Map<string, ApiKeyRecord>();

  constructor(data: DataFile) {
    for (const account of data.accounts) {
      for (const key of account.apiKeys) {
        const record: ApiKeyRecord = Object.freeze({
          keyId: key.id,
          accountId: account.id,
          secretDigest: key.secretDigest,
          disabled: key.disabled,
          scopes: Object.freeze([...key.scopes]),
        });
        this.#byApiKey.set(key.apiKey, record);
        this.#byKeyId.set(key.id, record);
      }
    }
  }

  async findByApiKey(apiKey: string): Promise<ApiKeyRecord | undefined> {
    return this.#byApiKey.get(apiKey);
  }

  async findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.#byKeyId.get(keyId);
  }
}
