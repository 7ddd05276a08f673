/** A value bound to a statement parameter, on every SQL database oncemq writes to. */
export type SqlValue = string | number | bigint | boolean | null | Date | Buffer;
