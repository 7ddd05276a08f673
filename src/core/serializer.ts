/** Turns a handler's result into text stored in the ledger, and back for duplicates. */
export interface Serializer {
  /**
   * Turns a handler's result into the text the ledger stores. A throw is a result that cannot be
   * stored (docs/pipeline.md says what the pipeline then does, per mode).
   */
  serialize(value: unknown): string;
  /** Turns stored text back into the result a duplicate's outcome replays. A throw leaves the result out. */
  deserialize(text: string): unknown;
}

/** JSON, with `undefined` results stored as no result at all. */
export const JSON_SERIALIZER: Serializer = Object.freeze({
  serialize: (value: unknown): string => JSON.stringify(value),
  deserialize: (text: string): unknown => JSON.parse(text),
});
