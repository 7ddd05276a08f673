import { isInstanceAcrossCopies } from './copy-identity.js';

/**
 * Every error oncemq raises is an {@link OncemqError} with a `code` the caller can switch on.
 * Subclasses exist where the caller has a different decision to make.
 */
export type OncemqErrorCode =
  | 'config'
  | 'permanent'
  | 'lease-lost'
  | 'ledger-unavailable'
  | 'transport-closed'
  | 'conflict'
  | 'closed'
  | 'transport-unavailable'
  | 'commit-rejected'
  | 'rollback-check'
  | 'webhook-signature';

/** Marks oncemq's error classes in every copy of the package a process loads (see `OncemqError`). */
const ERROR_CLASS = Symbol.for('oncemq.error-class');

/**
 * The base of every error oncemq throws. Catch it to tell oncemq's errors from your own and a
 * driver's (which oncemq wraps, the driver's error kept as `cause`), and switch on {@link code} (or
 * use `instanceof` on the subclasses) to decide what to do.
 */
export class OncemqError extends Error {
  /** The class's name (`ConfigError`, `LeaseLostError`, …), as in stack traces and logs. */
  override name = 'OncemqError';
  /** What went wrong, for a `switch`: stable across releases, unlike the message. */
  readonly code: OncemqErrorCode;

  constructor(code: OncemqErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }

  /**
   * `instanceof` holds across the package's two builds: an app that loads oncemq through both `import`
   * and `require()` runs two copies of each class (docs/packaging.md), and an error of one copy is an
   * instance of the other copy's class of the same name. Subclasses inherit this.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isInstanceAcrossCopies(this, value, ERROR_CLASS);
  }
}
// The mark, inherited by every subclass (a static property without a declaration to publish).
Object.defineProperty(OncemqError, ERROR_CLASS, { value: true });

/** A configuration that cannot work; raised at start-up, never mid-run. Names the field and the fix. */
export class ConfigError extends OncemqError {
  /** Always `'ConfigError'`. */
  override name = 'ConfigError' as const;
  /** The configuration field at fault, as a dotted path (`retry.delays`, `ledger.table`). */
  readonly field: string;

  constructor(field: string, message: string, options?: ErrorOptions) {
    super('config', `${field}: ${message}`, options);
    this.field = field;
  }
}

/** Why a message can never succeed; it is dead-lettered with this reason without further retries. */
export type PermanentReason = 'missing-key' | 'malformed' | 'invalid' | (string & {});

/**
 * Thrown by a handler (or by oncemq while reading a message) when retrying cannot help:
 * a malformed payload, a failed validation, a missing business key. Skips all retries.
 */
export class PermanentError extends OncemqError {
  /** Always `'PermanentError'`. */
  override name = 'PermanentError' as const;
  /**
   * Why the message cannot succeed. `missing-key`, `invalid-key` and `malformed` become the dead
   * outcome's `reason`; any other reason is dead-lettered as `permanent-error`, this error (with its
   * reason) kept as the outcome's `error`.
   */
  readonly reason: PermanentReason;

  constructor(reason: PermanentReason, message: string, options?: ErrorOptions) {
    super('permanent', message, options);
    this.reason = reason;
  }

  /** True when `error` is a {@link PermanentError}: a handler's failure that no retry can fix. */
  static is(error: unknown): error is PermanentError {
    return error instanceof PermanentError;
  }
}

/**
 * The claim this process held is no longer its own: the lease expired and another owner
 * reclaimed the key, or the row was released. The stale owner must stop and must not write.
 */
export class LeaseLostError extends OncemqError {
  /** Always `'LeaseLostError'`. */
  override name = 'LeaseLostError' as const;
  /** The consumer group of the lost claim. */
  readonly group: string;
  /** The business key of the lost claim. */
  readonly key: string;
  /** The ledger attempt this owner held; the new owner's attempt is higher. */
  readonly attempt: number;

  constructor(group: string, key: string, attempt: number, options?: ErrorOptions) {
    super(
      'lease-lost',
      `lease lost on ${describeKey(group, key)} (attempt ${attempt}): another owner reclaimed it or it was released`,
      options,
    );
    this.group = group;
    this.key = key;
    this.attempt = attempt;
  }
}

/** The ledger's store could not be reached or failed; the message is not acked and will come back. */
export class LedgerUnavailableError extends OncemqError {
  /** Always `'LedgerUnavailableError'`. */
  override name = 'LedgerUnavailableError' as const;

  constructor(message: string, options?: ErrorOptions) {
    super('ledger-unavailable', message, options);
  }
}

/**
 * The database refused the transaction for what it holds — a constraint or a check failed, at a
 * statement or at COMMIT (a deferred constraint) — not because it was unreachable. Retrying the same
 * message cannot help until the data or the handler changes, so unlike {@link LedgerUnavailableError}
 * it is charged to the message: it is retried by the retry policy and then dead-lettered.
 */
export class CommitRejectedError extends OncemqError {
  /** Always `'CommitRejectedError'`. */
  override name = 'CommitRejectedError' as const;

  constructor(message: string, options?: ErrorOptions) {
    super('commit-rejected', message, options);
  }
}

/** The transport was closed while an operation needed it. */
export class TransportClosedError extends OncemqError {
  /** Always `'TransportClosedError'`. */
  override name = 'TransportClosedError' as const;

  constructor(message: string, options?: ErrorOptions) {
    super('transport-closed', message, options);
  }
}

/** The same business key arrived with a different payload fingerprint: key reuse, never a duplicate. */
export class ConflictError extends OncemqError {
  /** Always `'ConflictError'`. */
  override name = 'ConflictError' as const;
  /** The consumer group the key was recorded in. */
  readonly group: string;
  /** The reused business key. */
  readonly key: string;
  /** The fingerprint the ledger recorded for the key; `null` when it recorded none. */
  readonly recordedFingerprint: string | null;
  /** The fingerprint of the copy that arrived; `null` when the pipeline computes none (`fingerprint: false`). */
  readonly fingerprint: string | null;

  constructor(
    group: string,
    key: string,
    recordedFingerprint: string | null,
    fingerprint: string | null,
    options?: ErrorOptions,
  ) {
    super(
      'conflict',
      `${describeKey(group, key)} was recorded with payload fingerprint ${String(recordedFingerprint)} but arrived with ${String(fingerprint)}: the key is reused for a different payload`,
      options,
    );
    this.group = group;
    this.key = key;
    this.recordedFingerprint = recordedFingerprint;
    this.fingerprint = fingerprint;
  }
}

/** Use after close: a pipeline, a ledger or a transport was called after its `close()`. */
export class ClosedError extends OncemqError {
  /** Always `'ClosedError'`. */
  override name = 'ClosedError' as const;

  constructor(what: string) {
    super('closed', `${what} is closed`);
  }
}

/** How errors and logs name one ledger entry. */
export function describeKey(group: string, key: string): string {
  return `group '${group}' key '${key}'`;
}

/**
 * Text of any thrown value, for remarks and logs. Never throws, whatever was thrown: an object
 * without a prototype, a getter that throws, a `toString` that throws.
 */
export function errorText(error: unknown): string {
  try {
    if (error instanceof Error) return `${error.name}: ${error.message}`;
    return String(error);
  } catch {
    try {
      return `unprintable ${Object.prototype.toString.call(error)}`;
    } catch {
      return 'unprintable thrown value';
    }
  }
}

/** The broker's store could not be reached or failed; the operation did not happen and may be retried. */
export class TransportUnavailableError extends OncemqError {
  /** Always `'TransportUnavailableError'`. */
  override name = 'TransportUnavailableError' as const;

  constructor(message: string, options?: ErrorOptions) {
    super('transport-unavailable', message, options);
  }
}
