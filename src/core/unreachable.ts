/**
 * Socket error codes that mean the server could not be reached at all: nothing listens on the port,
 * the host has no address or no route, or the connection attempt timed out.
 */
const UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
]);

/**
 * The same socket errors as quoted in a message, for clients that keep only the text: gRPC's
 * `14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:8081`.
 */
const UNREACHABLE_TEXT =
  /\b(?:connect (?:ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT)|getaddrinfo (?:ENOTFOUND|EAI_AGAIN))\b/;

/** How deep {@link unreachableCause} looks through `cause` and `errors`. */
const MAX_DEPTH = 8;

/**
 * The socket error under `error` saying that the server could not be reached, looked for in `error`
 * itself, its `cause` chain and the `errors` of an `AggregateError` (drivers wrap the socket's error
 * once or several times: `MultipleErrors` of `NetworkError`s, `ConnectionError`); `undefined` when
 * the failure was something else (a refused login, a missing table).
 */
export function unreachableCause(error: unknown): Error | undefined {
  return find(error, coded) ?? find(error, quoted);
}

/** The error itself when its `code` is one of {@link UNREACHABLE_CODES}. */
function coded(error: Error): Error | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && UNREACHABLE_CODES.has(code) ? error : undefined;
}

/** The socket error a message quotes ({@link UNREACHABLE_TEXT}), with the address after it. */
function quoted(error: Error): Error | undefined {
  const match = UNREACHABLE_TEXT.exec(error.message);
  if (match === null) return undefined;
  const address = /^ [^\s,;)]+/.exec(error.message.slice(match.index + match[0].length))?.[0] ?? '';
  return new Error(`${match[0]}${address}`);
}

/** The first error in `error`, its `errors` and its `cause` chain that `test` answers for. */
function find(error: unknown, test: (error: Error) => Error | undefined): Error | undefined {
  const seen = new Set<unknown>();
  const visit = (value: unknown, depth: number): Error | undefined => {
    if (depth > MAX_DEPTH || typeof value !== 'object' || value === null || seen.has(value)) return undefined;
    seen.add(value);
    try {
      const found = value instanceof Error ? test(value) : undefined;
      if (found !== undefined) return found;
      const nested = (value as { errors?: unknown }).errors;
      if (Array.isArray(nested)) {
        for (const inner of nested) {
          const innerFound = visit(inner, depth + 1);
          if (innerFound !== undefined) return innerFound;
        }
      }
      return visit((value as { cause?: unknown }).cause, depth + 1);
    } catch {
      return undefined;
    }
  };
  return visit(error, 0);
}

/** A URL (or `host:port` list) without its password, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/g, '//$1:***@');
}

/** What {@link unreachableMessage} says. */
export interface UnreachableServer {
  /** What could not be reached, as a reader names it: `RabbitMQ`, `the Kafka brokers`, `PostgreSQL`. */
  readonly server: string;
  /** Where it was looked for: a URL (its password is left out) or `host:port`. */
  readonly url: string;
  /** The driver's own account, e.g. the socket error's `connect ECONNREFUSED 127.0.0.1:9092`. */
  readonly detail: string;
  /** What to run or check, when there is more to say than that the server is not reachable. */
  readonly hint?: string;
}

/**
 * One line saying that a server is not reachable: `cannot connect to RabbitMQ at amqp://guest:***@host:5672:
 * the server is not reachable (connect ECONNREFUSED 127.0.0.1:5672)`, then the hint if any.
 */
export function unreachableMessage({ server, url, detail, hint }: UnreachableServer): string {
  const line = `cannot connect to ${server} at ${redactUrl(url)}: the server is not reachable (${detail})`;
  return (hint === undefined ? line : `${line}; ${hint}`).replace(/[\r\n]+/g, ' ');
}
