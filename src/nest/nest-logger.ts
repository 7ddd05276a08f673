import { Logger as NestLogger } from '@nestjs/common';
import type { Logger } from '../core/logger.js';

/** The context the module's own lines carry in Nest's log. */
export const DEFAULT_NEST_LOGGER_CONTEXT = 'OncemqModule';

const line = (message: string, fields: Record<string, unknown> | undefined): string =>
  fields === undefined || Object.keys(fields).length === 0 ? message : `${message} ${safeJson(fields)}`;

function safeJson(fields: Record<string, unknown>): string {
  try {
    return JSON.stringify(fields);
  } catch {
    return '{…}';
  }
}

/**
 * An oncemq logger writing through Nest's `Logger` (and so through whatever logger the application
 * gave Nest): info lines as `log`, the fields as JSON after the message. Pass it as `logger` to see
 * the pipelines' and the relay's lines in the application's log.
 */
export function nestLogger(context: string = DEFAULT_NEST_LOGGER_CONTEXT): Logger {
  const logger = new NestLogger(context);
  return Object.freeze({
    debug: (message: string, fields?: Record<string, unknown>) => {
      logger.debug(line(message, fields));
    },
    info: (message: string, fields?: Record<string, unknown>) => {
      logger.log(line(message, fields));
    },
    warn: (message: string, fields?: Record<string, unknown>) => {
      logger.warn(line(message, fields));
    },
    error: (message: string, fields?: Record<string, unknown>) => {
      logger.error(line(message, fields));
    },
  });
}
