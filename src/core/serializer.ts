/** Turns a handler's result into text stored in the ledger, and back for duplicates. */
export interface Serializer {
  serialize(value: unknown): string;
  deserialize(text: string): unknown;
}

/** JSON, with `undefined` results stored as no result at all. */
export const JSON_SERIALIZER: Serializer = Object.freeze({
  serialize: (value: unknown): string => JSON.stringify(value),
  deserialize: (text: string): unknown => JSON.parse(text),
});
