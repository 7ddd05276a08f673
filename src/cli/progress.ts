/** Where progress is written: stderr, or a stand-in in tests. */
export interface ProgressStream {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

/** Reports how far a run is; `end()` once it is over. */
export interface Progress {
  update(done: number, total: number): void;
  end(): void;
}

/** Width of the terminal progress bar, in characters. */
export const PROGRESS_BAR_WIDTH = 30;

/**
 * Progress on `stream` (stderr, so that stdout keeps the result alone): on a terminal a bar redrawn
 * in place; elsewhere (a pipe, a log file, CI) one line each time another tenth of the work is done.
 */
export function progressReporter(what: string, stream: ProgressStream = process.stderr): Progress {
  if (stream.isTTY === true) {
    let drawn = false;
    return {
      update(done, total) {
        const share = total === 0 ? 1 : Math.min(1, done / total);
        const filled = Math.round(share * PROGRESS_BAR_WIDTH);
        const bar = `${'#'.repeat(filled)}${'.'.repeat(PROGRESS_BAR_WIDTH - filled)}`;
        stream.write(
          `\r  [${bar}] ${String(Math.floor(share * 100)).padStart(3)}%  ${done}/${total} ${what}`,
        );
        drawn = true;
      },
      end() {
        if (drawn) stream.write('\n');
      },
    };
  }
  let tenths = 0;
  return {
    update(done, total) {
      const reached = total === 0 ? 10 : Math.min(10, Math.floor((done * 10) / total));
      if (reached <= tenths) return;
      tenths = reached;
      stream.write(`${what} ${done}/${total} (${Math.floor((done * 100) / Math.max(1, total))}%)\n`);
    },
    end() {
      // lines need no closing
    },
  };
}
