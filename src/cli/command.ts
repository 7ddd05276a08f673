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
