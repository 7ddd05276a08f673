/**
 * The offsets of one partition a member has received and not yet committed. What may be committed is
 * the offset of the first record not finished (or one past the last received): never past a record
 * whose outcome is not settled, whatever order the records finish in.
 */
export class PartitionOffsets {
  /** Received offsets, ascending, with whether each is finished. */
  readonly #records: { readonly offset: bigint; finished: boolean }[] = [];
  /** The offset last committed (or known committed) for this partition. */
  #committed: bigint | null = null;

  /** True when `offset` was received already (a fetch after a rejoin hands it out again). */
  seen(offset: bigint): boolean {
    const last = this.#records.at(-1);
    if (last !== undefined && offset <= last.offset) return true;
    return this.#committed !== null && offset < this.#committed;
  }

  /** Records a received offset; offsets arrive in ascending order per partition. */
  receive(offset: bigint): void {
    this.#records.push({ offset, finished: false });
  }

  /** Marks a received offset finished (its outcome settled at the broker). */
  finish(offset: bigint): void {
    const record = this.#records.find((entry) => entry.offset === offset);
    if (record !== undefined) record.finished = true;
  }

  /** Records not finished yet. */
  get unfinished(): number {
    return this.#records.filter((entry) => !entry.finished).length;
  }

  /**
   * The offset to commit: the first unfinished received record's, else one past the last received;
   * `null` when that is not past what was committed already.
   */
  committable(): bigint | null {
    let next: bigint | null = null;
    for (const entry of this.#records) {
      if (!entry.finished) {
        next = entry.offset;
        break;
      }
      next = entry.offset + 1n;
    }
    if (next === null || (this.#committed !== null && next <= this.#committed)) return null;
    return next;
  }

  /** Notes that `offset` is committed, and forgets the finished records before it. */
  committed(offset: bigint): void {
    if (this.#committed === null || offset > this.#committed) this.#committed = offset;
    while (this.#records.length > 0 && (this.#records[0] as { offset: bigint }).offset < offset) {
      this.#records.shift();
    }
  }
}
