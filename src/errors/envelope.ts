/** The envelope every response is wrapped in: `{success, message}` (interface document §2.1). */
export interface Envelope<T extends object> {
  success: boolean;
  message: T;
}

export interface ErrorMessage {
  /** Stable, machine-readable, snake_case. */
  code: string;
  /** One human sentence. */
  description: string;
  /** The request field at fault, where one is (owner API validation, conflicts). */
  field?: string;
  /** Present on 5xx answers, so a caller can quote it to the operator. */
  requestId?: string;
}

export function ok<T extends object>(message: T): Envelope<T> {
  return { success: true, message };
}

export function failure(message: ErrorMessage): Envelope<ErrorMessage> {
  return { success: false, message };
}
