import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError } from 'oncemq';
import { CallDeadlines } from '../support/internal.js';

describe('CallDeadlines', () => {
  it('passes answers and errors through unchanged', async () => {
    const deadlines = new CallDeadlines(1000);
    expect(await deadlines.run(Promise.resolve(42), 'GET')).toBe(42);
    const failure = new Error('WRONGTYPE');
    await expect(deadlines.run(Promise.reject(failure), 'GET')).rejects.toBe(failure);
  });

  it('fails a call that gets no answer once its timeout has passed, and only that one', async () => {
    const deadlines = new CallDeadlines(80);
    const started = performance.now();
    const hung = deadlines.run(new Promise<never>(() => undefined), 'SET');
    const answered = deadlines.run(new Promise((resolve) => setTimeout(resolve, 20, 'ok')), 'GET');
    expect(await answered).toBe('ok');
    const error: unknown = await hung.catch((e: unknown) => e);
    const waited = performance.now() - started;
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect(String(error)).toMatch(/did not answer SET within 80ms/);
    expect(waited).toBeGreaterThanOrEqual(79);
  });

  it('fails every hung call around one that answered, oldest first, and keeps working afterwards', async () => {
    const deadlines = new CallDeadlines(40);
    const failed: string[] = [];
    const hung = (what: string): Promise<void> =>
      deadlines.run(new Promise<never>(() => undefined), what).catch(() => {
        failed.push(what);
      });
    const calls = [hung('first'), deadlines.run(Promise.resolve('second'), 'GET'), hung('third')];
    expect(await calls[1]).toBe('second');
    await Promise.all(calls);
    expect(failed).toEqual(['first', 'third']);
    expect(await deadlines.run(Promise.resolve(7), 'GET')).toBe(7);
    await expect(deadlines.run(new Promise<never>(() => undefined), 'SET')).rejects.toBeInstanceOf(
      LedgerUnavailableError,
    );
  });

  it('does not fail a call whose answer came while the event loop was busy past its deadline', async () => {
    const deadlines = new CallDeadlines(40);
    const hung = deadlines.run(new Promise<never>(() => undefined), 'SET').catch((e: unknown) => e);
    // Due in the same timers turn as the sweep, and after it: an answer waiting to be read.
    const answered = deadlines.run(new Promise((resolve) => setTimeout(resolve, 10, 'ok')), 'GET');
    const busyUntil = performance.now() + 120;
    while (performance.now() < busyUntil); // the event loop held past both deadlines
    expect(await answered).toBe('ok');
    expect(await hung).toBeInstanceOf(LedgerUnavailableError);
  });
});
