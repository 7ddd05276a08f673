/** One `oncemq` sub-command. */
export interface Command {
  readonly name: string;
  /** One line for `oncemq --help`. */
  readonly summary: string;
  /** Full usage text for `oncemq NAME --help`. */
  readonly usage: string;
  /** Runs with the arguments after the command name; resolves to the process exit code. */
  run(args: readonly string[]): Promise<number>;
}

/** Thrown for wrong command-line input; printed without a stack, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The whole number ≥ 1 given for `--name`, or `fallback` when the option is absent. */
export function positiveOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--${name} must be a positive whole number, got '${value}'`);
  return n;
}
