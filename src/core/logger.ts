/** Where oncemq writes log lines. Any object with these four methods fits (console, pino, winston). */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const ignore = (): void => undefined;

/** The default logger: writes nothing. */
export const SILENT_LOGGER: Logger = Object.freeze({
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
});
