/**
 * The one error type the sandbox throws for anything a translator did wrong.
 *
 * Callers map `kind` to device log entries (run time) or to a 422 (upload);
 * a plain `Error` from the sandbox means a bug in the host, not in a translator.
 */

export type TranslatorErrorKind =
  /** Rejected before it can run: code too large, syntax error, no `translate`, or an invalid `spec`. */
  | 'upload'
  /** The call (or the code's top level) ran past its deadline. */
  | 'timeout'
  /** The translator ran out of heap, or recursed past the stack limit. */
  | 'memory'
  /** The translator threw. */
  | 'runtime'
  /** An emitted key is not in `spec`, or its value does not have the declared type. */
  | 'spec'
  /** The return value is not shaped like `{result?, additionalDeviceUpdates?}` (or a codec's `{data?, warnings?, errors?}`), or cannot cross as JSON. */
  | 'result'
  /** A device-repository codec returned `errors` (from `decodeUplink` or `encodeDownlink`). */
  | 'codec';

export class TranslatorError extends Error {
  override readonly name = 'TranslatorError';
  readonly kind: TranslatorErrorKind;
  /** The offending result key (`spec` and `result` errors), e.g. `temperature` or `additionalDeviceUpdates[0].result.co2`. */
  readonly key: string | undefined;
  /** 1-based line in the uploaded code, when the engine reported one. */
  readonly line: number | undefined;
  readonly column: number | undefined;
  /** `console.log` lines written before the failure, when they could be recovered. */
  readonly logs: string[];
  /** The `errors` a codec returned (kind `codec`). */
  readonly codecErrors: string[];
  /**
   * Set by the sandbox when the call cost its warm context, which is then
   * rebuilt (tens of milliseconds): a time-out, a memory or stack failure,
   * a fault of the engine. A plain throw or a refused result does not.
   */
  discarded = false;

  constructor(
    kind: TranslatorErrorKind,
    message: string,
    details: { key?: string; line?: number; column?: number; logs?: string[]; codecErrors?: string[] } = {},
  ) {
    super(message);
    this.kind = kind;
    this.key = details.key;
    this.line = details.line;
    this.column = details.column;
    this.logs = details.logs ?? [];
    this.codecErrors = details.codecErrors ?? [];
  }
}

export function isTranslatorError(error: unknown): error is TranslatorError {
  return error instanceof TranslatorError;
}
