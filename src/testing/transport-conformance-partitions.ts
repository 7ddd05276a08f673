import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { Processor, Subscription, Transport } from '../transport/transport.js';
import type { TransportCase } from './transport-conformance.js';
import { outcomeFor, sleep, waitFor, type PartitionCounts } from './transport-conformance-fixture.js';

/** Ordering keys of the partition-count cases: enough for every partition of either count to hold some. */
const KEYS = Array.from({ length: 16 }, (_, i) => `order-${i}`);

/** A drain waits out the old count's leases: longer than one expected delivery. */
const CASE_TIMEOUT_MS = 180_000;

const NO_COUNTS =
  'the factory gives no partitionCounts: the broker keeps no partition count of an ordered group that a ' +
  'member configures (a RocketMQ FIFO topic orders by message group on the broker)';

/** The steps each ordering key ran, in the order they ran, from every member of the case. */
class Steps {
  readonly #runs = new Map<string, number[]>();

  /** Records each delivery's step under its ordering key, and acks it. */
  readonly processor: Processor = {
    process: async (envelope: Envelope) => {
      const { step } = JSON.parse(new TextDecoder().decode(envelope.body)) as { step: number };
      await sleep(2);
      const list = this.#runs.get(envelope.orderingKey ?? '') ?? [];
      list.push(step);
      this.#runs.set(envelope.orderingKey ?? '', list);
      return outcomeFor(envelope, 'ack', 0);
    },
  };

  /** Deliveries seen so far. */
  get count(): number {
    return [...this.#runs.values()].reduce((sum, list) => sum + list.length, 0);
  }

  /** Each key with the steps it ran, for an `expect` that names the key at fault. */
  byKey(): { key: string; steps: number[] | undefined }[] {
    return KEYS.map((key) => ({ key, steps: this.#runs.get(key) }));
  }
}

async function publishSteps(transport: Transport, topic: string, steps: readonly number[]): Promise<void> {
  for (const step of steps) {
    for (const orderingKey of KEYS) {
      await transport.publish({ topic, key: `${orderingKey}-${step}`, orderingKey, body: { step } });
    }
  }
}

/** Whether `message` names `count` as a number of its own (not a digit of a name or a hex id). */
const namesCount = (message: string, count: number): boolean =>
  new RegExp(`(^|[^\\w.-])${count}([^\\w.-]|$)`).test(message);

/** Subscribes and answers the error it was refused with, or undefined (the subscription kept for closing). */
async function refusal(subscribe: Promise<Subscription>, opened: Subscription[]): Promise<unknown> {
  try {
    opened.push(await subscribe);
    return undefined;
  } catch (error) {
    return error;
  }
}

function expectRefusal(error: unknown, counts: PartitionCounts, other: number): void {
  expect(error).toBeInstanceOf(ConfigError);
  expect(error).toMatchObject({ field: counts.field ?? 'partitions' });
  const message = (error as Error).message;
  expect({ message, recorded: namesCount(message, counts.count) }).toMatchObject({ recorded: true });
  expect({ message, configured: namesCount(message, other) }).toMatchObject({ configured: true });
}

/** The case's partition counts, or a skip saying why there are none. */
function countsOf(test: TransportCase, skip: (note: string) => never): PartitionCounts {
  if (!test.transport.capabilities.ordering) skip('no ordering capability');
  return test.under.partitionCounts ?? skip(NO_COUNTS);
}

/** What both cases start from (see {@link changeSetup}). */
interface ChangeSetup extends TransportCase {
  readonly counts: PartitionCounts;
  /** The count the second transport is configured with: twice the recorded one. */
  readonly other: number;
  readonly steps: Steps;
  /** Subscriptions the case opened, closed at its end. */
  readonly opened: Subscription[];
  /** A transport configured with `other` partitions. */
  readonly member: Transport;
}

/**
 * The start of both cases: the group's first member records its partition count, steps 1 and 2 of
 * every key are published under it and wait for the group, and a second transport is configured with
 * twice that count. Skips without ordering or partition counts (and, with `drains`, where the count
 * is fixed by the broker).
 */
async function changeSetup(
  test: () => TransportCase,
  skip: (note: string) => never,
  drains: boolean,
): Promise<ChangeSetup> {
  const current = test();
  const { transport, topic, group } = current;
  const counts = countsOf(current, skip);
  if (drains && counts.fixed !== undefined) skip(counts.fixed);
  const other = counts.count * 2;
  const steps = new Steps();
  // The group's first member records its count; the messages wait for the group.
  await (await transport.subscribe(group, [topic], steps.processor, { ordering: {} })).close();
  await publishSteps(transport, topic, [1, 2]);
  const member = await counts.member(topic, other);
  return { ...current, counts, other, steps, opened: [], member };
}

/**
 * A change of an ordered group's partition count (ordering capability and the factory's
 * `partitionCounts`): refused with a `ConfigError` naming both counts, or drained with
 * `ordering.onPartitionChange: 'drain'`, a key's earlier messages before its later ones.
 */
export function describeTransportPartitionCountCases(test: () => TransportCase): void {
  it(
    'refuses a member configured with another partition count with a ConfigError naming both counts; nothing is consumed or lost',
    async (ctx) => {
      const setup = await changeSetup(test, (note) => ctx.skip(note), false);
      const { transport, topic, group, delayMs, waitMs, counts, other, steps, opened, member } = setup;
      try {
        const refused = await refusal(
          member.subscribe(group, [topic], steps.processor, { ordering: {} }),
          opened,
        );
        expectRefusal(refused, counts, other);
        if (counts.fixed !== undefined) {
          const drain = { ordering: { onPartitionChange: 'drain' as const } };
          expectRefusal(
            await refusal(member.subscribe(group, [topic], steps.processor, drain), opened),
            counts,
            other,
          );
        }
        await sleep(delayMs * 2 + 500);
        expect(steps.count).toBe(0);
        // Nothing lost: a member on the recorded count (or, where the topic's own count changed, a
        // member draining the group over to it) gets every message, each key in publish order.
        opened.push(
          (counts.reversible ?? true)
            ? await transport.subscribe(group, [topic], steps.processor, { ordering: {} })
            : await member.subscribe(group, [topic], steps.processor, {
                ordering: { onPartitionChange: 'drain' },
              }),
        );
        await waitFor(() => steps.count >= KEYS.length * 2, 'every message', waitMs * 3);
        await sleep(delayMs * 2 + 500);
        expect(steps.byKey()).toEqual(KEYS.map((key) => ({ key, steps: [1, 2] })));
      } finally {
        await Promise.all(opened.map((subscription) => subscription.close()));
        await member.close();
      }
    },
    CASE_TIMEOUT_MS,
  );

  it(
    "with ordering: { onPartitionChange: 'drain' }, moves the group to another count: each key's earlier messages run before its later ones, none lost, none doubled",
    async (ctx) => {
      // Steps 1 and 2 are published before the change, under the recorded count, and not consumed yet.
      const setup = await changeSetup(test, (note) => ctx.skip(note), true);
      const { transport, topic, group, delayMs, waitMs, counts, other, steps, opened, member } = setup;
      try {
        opened.push(
          await member.subscribe(group, [topic], steps.processor, {
            ordering: { onPartitionChange: 'drain' },
            concurrency: 8,
          }),
        );
        // Published after the change, by a producer that knows the new count.
        await publishSteps(member, topic, [3]);
        await waitFor(() => steps.count >= KEYS.length * 3, 'every message', waitMs * 3);
        await sleep(delayMs * 2 + 500);
        expect(steps.byKey()).toEqual(KEYS.map((key) => ({ key, steps: [1, 2, 3] })));
        await Promise.all(opened.splice(0).map((subscription) => subscription.close()));
        // The new count is recorded: a member on it starts without a drain, one on the old count is refused.
        opened.push(await member.subscribe(group, [topic], steps.processor, { ordering: {} }));
        if (counts.reversible ?? true) {
          const refused = await refusal(
            transport.subscribe(group, [topic], steps.processor, { ordering: {} }),
            opened,
          );
          expectRefusal(refused, { ...counts, count: other }, counts.count);
        }
      } finally {
        await Promise.all(opened.map((subscription) => subscription.close()));
        await member.close();
      }
    },
    CASE_TIMEOUT_MS,
  );
}
