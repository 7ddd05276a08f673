/**
 * The offsets of one partition a member has received and not yet committed. What may be committed is
 * the offset of the first record not finished (or one past the last received): never past a record
 * whose outcome is not settled, whatever order the records finish in.
 *
 * Per record it keeps an offset and a flag in two arrays read from `#head` on (a commit moves the head
 * instead of shifting the arrays); finishing a record is a binary search, and the committable offset
 * is found from where the last search for it stopped, since a finished record never becomes unfinished.
 */
export class PartitionOffsets {
  /** Received offsets, ascending, from `#head` on. */
  #offsets: bigint[] = [];
  /** Whether the record at the same index is finished. */
  #finished: boolean[] = [];
  /** Index of the first record not forgotten. */
  #head = 0;
  /** Every record from `#head` up to this index is finished. */
  #scan = 0;
  #unfinished = 0;
  /** The offset last committed (or known committed) for this partition. */
  #committed: bigint | null = null;

  /** True when `offset` was received already (a fetch after a rejoin hands it out again). */
  seen(offset: bigint): boolean {
    const last = this.#offsets.length - 1;
    if (last >= this.#head && offset <= (this.#offsets[last] as bigint)) return true;
    return this.#committed !== null && offset < this.#committed;
  }

  /** Records a received offset; offsets arrive in ascending order per partition. */
  receive(offset: bigint): void {
    this.#offsets.push(offset);
    this.#finished.push(false);
    this.#unfinished++;
  }

  /** Marks a received offset finished (its outcome settled at the broker). */
  finish(offset: bigint): void {
    let low = this.#head;
    let high = this.#offsets.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const found = this.#offsets[middle] as bigint;
      if (found < offset) low = middle + 1;
      else if (found > offset) high = middle - 1;
      else {
        if (!this.#finished[middle]) {
          this.#finished[middle] = true;
          this.#unfinished--;
        }
        return;
      }
    }
  }

  /** Records not finished yet. */
  get unfinished(): number {
    return this.#unfinished;
  }

  /**
   * The offset to commit: the first unfinished received record's, else one past the last received;
   * `null` when that is not past what was committed already.
   */
  committable(): bigint | null {
    const length = this.#offsets.length;
    if (length === this.#head) return null;
    while (this.#scan < length && this.#finished[this.#scan] === true) this.#scan++;
    const next =
      this.#scan < length
        ? (this.#offsets[this.#scan] as bigint)
        : (this.#offsets[length - 1] as bigint) + 1n;
    if (this.#committed !== null && next <= this.#committed) return null;
    return next;
  }

  /** Notes that `offset` is committed, and forgets the records before it. */
  committed(offset: bigint): void {
    if (this.#committed === null || offset > this.#committed) this.#committed = offset;
    const length = this.#offsets.length;
    while (this.#head < length && (this.#offsets[this.#head] as bigint) < offset) {
      if (this.#finished[this.#head] !== true) this.#unfinished--;
      this.#head++;
    }
    if (this.#scan < this.#head) this.#scan = this.#head;
    // Drop the forgotten records once they are most of the arrays.
    if (this.#head >= 1024 && this.#head * 2 >= length) {
      this.#offsets = this.#offsets.slice(this.#head);
      this.#finished = this.#finished.slice(this.#head);
      this.#scan -= this.#head;
      this.#head = 0;
    }
  }
}
