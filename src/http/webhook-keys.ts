import { ConfigError } from '../core/errors.js';
import { exactUtf8 } from '../core/header-text.js';
import { parseJsonPath, readPath } from '../core/key.js';
import type { HttpKeySource } from './http-request.js';

// RFC 9110 `token`: what a header name may be made of.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/**
 * The key carried by a request header, such as a sender's delivery id (`x-github-delivery`,
 * `webhook-id`). No key (`undefined`, which the middleware answers with 400) when the header is
 * absent or empty, or when it holds a `,`: every adapter joins a header sent twice with `", "`, and
 * two delivery ids read as one would be a key no sender ever sent. Throws {@link ConfigError} at
 * start-up for a name that is no header name.
 */
export function webhookHeaderKey(name: string): HttpKeySource {
  const header = name.toLowerCase();
  if (!HEADER_NAME.test(header)) {
    throw new ConfigError(
      'key.header',
      `"${name}" is not a header name (letters, digits and !#$%&'*+-.^_\`|~)`,
    );
  }
  return (request) => {
    const value = request.headers[header];
    if (value === undefined || value === '' || value.includes(',')) return undefined;
    return value;
  };
}

/**
 * The key at a path into the request's JSON body, such as a sender's event id (`id`, `$.event.id`;
 * the path forms of the message consumers' `{ jsonPath }`). No key (`undefined`, which the middleware
 * answers with 400) when the body is not UTF-8 JSON, or the path leads to nothing, to an empty string,
 * or to anything but a string or an integer within ±2^53 − 1. Never throws on a request: a bad body
 * is a missing key, not a server error. Throws {@link ConfigError} at start-up for a malformed path.
 */
export function jsonBodyKey(path: string): HttpKeySource {
  const steps = parseJsonPath(path, 'key.jsonPath');
  return (request) => {
    const text = exactUtf8(request.body);
    if (text === undefined) return undefined;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return undefined;
    }
    const value = readPath(body, steps);
    if (typeof value === 'string') return value === '' ? undefined : value;
    if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
    return undefined;
  };
}
