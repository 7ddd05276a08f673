/**
 * The deliveries one subscription may hold at once, shared by its pull loops in arrival order: a
 * loop takes the free slots before it pulls (so the server never hands over more than the handlers
 * can start at once, and no ack wait runs in a buffer) and gives back what the pull did not fill.
 */
export class DeliverySlots {
  #free: number;
  #closed = false;
  #waking = false;
  #waiters: { readonly max: number; readonly take: (count: number) => void }[] = [];

  constructor(capacity: number) {
    this.#free = capacity;
  }

  /** Waits for at least one free slot and takes up to `max`; 0 once closed. */
  acquire(max: number): Promise<number> {
    if (this.#closed) return Promise.resolve(0);
    if (this.#free > 0 && this.#waiters.length === 0) return Promise.resolve(this.#take(max));
    return new Promise((resolve) => this.#waiters.push({ max, take: resolve }));
  }

  #take(max: number): number {
    const count = Math.min(this.#free, max);
    this.#free -= count;
    return count;
  }

  /**
   * Gives slots back. Waiters are woken after the current turn of the event loop, so that the slots
   * a batch gives back one by one (its settles go out together) make one pull, not one per slot.
   */
  release(count: number): void {
    this.#free += count;
    if (this.#waking || this.#waiters.length === 0) return;
    this.#waking = true;
    setImmediate(() => {
      this.#waking = false;
      while (this.#free > 0 && this.#waiters.length > 0) {
        const waiter = this.#waiters.shift();
        waiter?.take(this.#take(waiter.max));
      }
    });
  }

  /** Wakes every waiter with 0: nothing more is pulled. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter.take(0);
  }
}
