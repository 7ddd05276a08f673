import { vi } from 'vitest';
import { dlqCommand } from './internal.js';

/** Runs `oncemq dlq ...args` in process and returns its exit code and what it printed. */
export async function runDlq(...args: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => {
    lines.push(parts.map(String).join(' '));
  });
  try {
    const code = await dlqCommand.run(args);
    return { code, out: lines.join('\n') };
  } finally {
    log.mockRestore();
  }
}
