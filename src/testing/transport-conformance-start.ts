import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, sleep, unique } from './transport-conformance-fixture.js';

/** Keys of what a group saw, in delivery order. */
function recorder(): { readonly keys: string[]; readonly record: (envelope: Envelope) => 'ack' } {
  const keys: string[] = [];
  return { keys, record: (envelope) => (keys.push(keyOf(envelope) ?? ''), 'ack') };
}

const has = (keys: readonly string[], wanted: readonly string[]): boolean =>
  wanted.every((key) => keys.includes(key));

/**
 * Where a group starts on a topic it has never consumed (`SubscribeOptions.from`): `now` after what was
 * published before its first subscribe, `earliest` (the default for an unordered group) at what the
 * broker kept; a group that has a position keeps it whatever `from` says.
 */
export function describeTransportStartCases(test: () => TransportCase, timeoutMs: number): void {
  it(
    "a new group starts where `from` says: 'now' gets only what is published after its subscribe, 'earliest' and the default also what came before; a group that exists keeps its place",
    async () => {
      const { group, delayMs } = test();
      const before = await test().publish(2, 'before');
      const fromNow = recorder();
      const first = await test().subscribe(group, fromNow.record, { from: 'now' });
      const after = await test().publish(2, 'after');
      const fromEarliest = recorder();
      await test().subscribe(unique('g'), fromEarliest.record, { from: 'earliest' });
      const byDefault = recorder();
      await test().subscribe(unique('g'), byDefault.record);
      await test().waitFor(
        () =>
          has(fromNow.keys, after) &&
          has(fromEarliest.keys, [...before, ...after]) &&
          has(byDefault.keys, [...before, ...after]),
        "every group's messages",
      );
      // The group exists now: `from` no longer moves it, it goes on where it was.
      await first.close();
      const away = await test().publish(1, 'away');
      const again = recorder();
      await test().subscribe(group, again.record, { from: 'earliest' });
      await test().waitFor(() => has(again.keys, away), 'what was published while the group was away');
      await sleep(delayMs + 500);
      expect(fromNow.keys.filter((key) => key.startsWith('before'))).toEqual([]);
      expect(again.keys.filter((key) => key.startsWith('before'))).toEqual([]);
    },
    timeoutMs,
  );

  it("refuses a start position that is neither 'now' nor 'earliest'", async () => {
    const { group } = test();
    const wrong = { from: 'latest' as unknown as 'now' };
    await expect(test().subscribe(group, () => 'ack', wrong)).rejects.toThrow(
      /from: expected 'now' or 'earliest'/,
    );
  });

  it(
    "an ordered group starts where `from` says: 'now' gets only what is published after its subscribe; 'earliest' gets what came before, or is refused with a ConfigError on `from` (ordering capability)",
    async (ctx) => {
      const { transport, topic, group, delayMs } = test();
      if (!transport.capabilities.ordering) ctx.skip();
      const publish = async (prefix: string): Promise<string[]> => {
        const keys = [`${prefix}-0`, `${prefix}-1`];
        for (const key of keys) await transport.publish({ topic, key, orderingKey: 'one', body: {} });
        return keys;
      };
      const before = await publish('before');
      const fromNow = recorder();
      await test().subscribe(group, fromNow.record, { ordering: {}, from: 'now' });
      const after = await publish('after');
      await test().waitFor(() => has(fromNow.keys, after), 'what was published after the subscribe');
      const fromEarliest = recorder();
      let refused: unknown;
      await test()
        .subscribe(unique('g'), fromEarliest.record, { ordering: {}, from: 'earliest' })
        .catch((error: unknown) => (refused = error));
      if (refused === undefined) {
        await test().waitFor(() => has(fromEarliest.keys, [...before, ...after]), 'every message in order');
        expect(fromEarliest.keys.slice(0, 4)).toEqual([...before, ...after]);
      } else {
        expect(refused).toBeInstanceOf(ConfigError);
        expect((refused as ConfigError).field).toBe('from');
      }
      await sleep(delayMs + 500);
      expect([...new Set(fromNow.keys)]).toEqual(after);
    },
    timeoutMs,
  );
}
