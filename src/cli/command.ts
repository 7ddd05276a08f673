import { parseArgs, type ParseArgsConfig } from 'node:util';

/** One `oncemq` sub-command. */
export interface Command {
  readonly name: string;
  /** One line for `oncemq --help`. */
  readonly summary: string;
  /** Left out of `oncemq --help`: a part of another command (the processes `oncemq chaos` starts). */
  readonly hidden?: boolean;
  /** Full usage text for `oncemq NAME --help`. */
  readonly usage: string;
  /** Runs with the arguments after the command name; resolves to the process exit code. */
  run(args: readonly string[]): Promise<number>;
}

/** Thrown for wrong command-line input; printed as one line without a stack, exit code 2. */
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

/** The whole number ≥ 0 given for `--name`, or `fallback` when the option is absent. */
export function nonNegativeOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(`--${name} must be a whole number ≥ 0, got '${value}'`);
  return n;
}

/**
 * One line for an error of `util.parseArgs` (`ERR_PARSE_ARGS_*`), whose own messages run over
 * several lines; `undefined` for any other error.
 */
export function parseErrorLine(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (!(error instanceof TypeError) || typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS')) {
    return undefined;
  }
  const quoted = /'([^']*)'/.exec(error.message)?.[1] ?? '';
  const option = quoted.split(' ')[0] ?? quoted;
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option '${option}'`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument '${quoted}'`;
    default:
      if (error.message.includes('ambiguous'))
        return `${option} needs a value (a value that starts with '-' is written ${option}=-…)`;
      if (error.message.includes('does not take an argument')) return `${option} takes no value`;
      if (error.message.includes('argument missing')) return `${option} needs a value`;
      return error.message.split('\n')[0] ?? error.message;
  }
}

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** What {@link parseOptions} answers: `values` typed by the options, and the positionals. */
export type ParsedOptions<O extends OptionsConfig> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; allowPositionals: boolean; strict: true }>
>;

/**
 * `util.parseArgs` in strict mode, with two differences: a negative number after an option that
 * takes a value is read as its value (`--events -5` reaches the option's own check instead of being
 * refused as ambiguous), and a parse error becomes a one-line {@link UsageError}.
 */
export function parseOptions<O extends OptionsConfig>(
  args: readonly string[],
  options: O,
  allowPositionals = false,
): ParsedOptions<O> {
  const takesValue = (arg: string | undefined): boolean =>
    arg?.startsWith('--') === true && options[arg.slice(2)]?.type === 'string';
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const next = args[i + 1];
    if (takesValue(arg) && next !== undefined && /^-\d/.test(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else {
      joined.push(arg);
    }
  }
  try {
    return parseArgs({ args: joined, options, allowPositionals, strict: true });
  } catch (error) {
    const line = parseErrorLine(error);
    if (line === undefined) throw error;
    throw new UsageError(line, { cause: error });
  }
}
