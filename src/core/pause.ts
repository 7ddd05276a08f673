/** A loop's pause: over when its time is up or when something wakes it, whichever comes first. */
export class Pause {
  #wake: (() => void) | undefined;

  /** Waits `ms` (`Infinity`: until woken); a new pause takes the place of one still waiting. */
  for(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  /** Ends the pause now, if one waits. */
  wake(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
