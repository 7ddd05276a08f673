const exact = new TextDecoder('utf-8', { fatal: true });

/** The text of `bytes` if they are UTF-8, else `undefined` (never a lossy reading with U+FFFD). */
export function exactUtf8(bytes: Uint8Array): string | undefined {
  try {
    return exact.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Why a value a broker carried is no business key: a fact about the value, shown in the dead letter. */
export const NON_KEY = Object.freeze({
  notUtf8: 'bytes that are not UTF-8',
  repeated: 'sent more than once with different values',
  inexactNumber: 'a number that is not an integer within ±2^53 - 1 (it cannot be read exactly)',
} as const);

/**
 * The text headers of one delivery, read from what the broker carried exactly or not at all: a value
 * with no exact text (bytes that are not UTF-8, a number past 2^53, a name sent twice with different
 * values) is left out of {@link headers}; it, and any value that has a text form but is no key (a
 * boolean, a table), is named in {@link nonKey} with what it was, so that a business key read from it
 * is refused as `invalid-key` instead of two different keys becoming one.
 */
export class HeaderText {
  readonly headers: Record<string, string> = {};
  /** Header name → why no business key is read from it; `undefined` while every header is plain text. */
  nonKey: Record<string, string> | undefined;

  /** A text value (a repeated name keeps its value only while every copy says the same). */
  text(name: string, value: string): void {
    const earlier = this.headers[name];
    if (earlier === undefined) {
      if (this.nonKey?.[name] === undefined) this.headers[name] = value;
    } else if (earlier !== value) {
      this.drop(name, NON_KEY.repeated);
    }
  }

  /** A value as bytes: its text when they are UTF-8. */
  bytes(name: string, value: Uint8Array): void {
    const text = exactUtf8(value);
    if (text === undefined) this.drop(name, NON_KEY.notUtf8);
    else this.text(name, text);
  }

  /** A value with an exact text form that is still no key (an AMQP boolean or double). */
  textNotKey(name: string, value: string, why: string): void {
    this.text(name, value);
    if (this.headers[name] !== undefined) this.markNonKey(name, why);
  }

  /** A value with no exact text form: left out of the headers. */
  drop(name: string, why: string): void {
    Reflect.deleteProperty(this.headers, name);
    this.markNonKey(name, why);
  }

  private markNonKey(name: string, why: string): void {
    (this.nonKey ??= {})[name] ??= why;
  }
}
