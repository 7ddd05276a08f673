/**
 * Retries of this member that were not charged to their message (a busy key, an unreachable
 * ledger). RocketMQ and SQS count every delivery and a consumer cannot write to a redelivered copy, so
 * the member subtracts the ones it knows of. Only this member knows them: a copy that comes back to
 * another member, or after a restart, counts them as deliveries.
 */
export class UnchargedRetries {
  readonly #counts = new Map<string, number>();
  readonly #limit: number;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  count(messageId: string): number {
    return this.#counts.get(messageId) ?? 0;
  }

  add(messageId: string): void {
    const count = this.count(messageId) + 1;
    this.#counts.delete(messageId);
    this.#counts.set(messageId, count);
    // The oldest go first: a message not seen again for this long counts them as deliveries.
    if (this.#counts.size > this.#limit) this.#counts.delete(this.#counts.keys().next().value ?? '');
  }

  forget(messageId: string): void {
    this.#counts.delete(messageId);
  }
}
