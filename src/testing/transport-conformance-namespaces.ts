import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import type { Subscription, Transport } from '../transport/transport.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, outcomeFor, sleep, type Answer } from './transport-conformance-fixture.js';

/** What one namespace of the isolation case publishes and sees. */
interface Side {
  readonly name: string;
  readonly transport: Transport;
  readonly seen: Envelope[];
  healed: boolean;
}

/** A key's fate in the isolation case: `<side>-retry` is retried once, `<side>-dead` dead-lettered. */
function answerFor(side: Side, envelope: Envelope): Answer {
  side.seen.push(envelope);
  const key = keyOf(envelope) ?? '';
  if (key.endsWith('-retry') && envelope.deliveryCount === 1) return 'retry';
  if (key.endsWith('-dead') && !side.healed) return 'dead-letter';
  return 'ack';
}

const keysOf = (side: Side): string[] => side.seen.map((envelope) => keyOf(envelope) ?? '');

/**
 * Namespaces: two applications sharing one broker, each in its own namespace, use the same topic and
 * group names and never see each other's messages, retries or dead letters (`otherNamespace`).
 */
export function describeTransportNamespaceCases(test: () => TransportCase, timeoutMs: number): void {
  it(
    'two transports in different namespaces on one broker never see each other’s messages, retries or dead letters',
    async (ctx) => {
      const { under, transport, topic, group, delayMs } = test();
      if (under.otherNamespace === undefined) ctx.skip();
      const other = await under.otherNamespace?.();
      if (other === undefined) return;
      const theirs: Subscription[] = [];
      try {
        const here: Side = { name: 'here', transport, seen: [], healed: false };
        const there: Side = { name: 'there', transport: other, seen: [], healed: false };
        const sides = [here, there];
        // Published before the groups exist: a new group that starts at the earliest message finds its own only.
        for (const side of sides)
          await side.transport.publish({ topic, key: `${side.name}-early`, body: {} });
        await test().subscribe(group, (envelope) => answerFor(here, envelope));
        theirs.push(
          await other.subscribe(group, [topic], (envelope) =>
            Promise.resolve(outcomeFor(envelope, answerFor(there, envelope), delayMs)),
          ),
        );
        for (const side of sides) {
          for (const suffix of ['now', 'retry', 'dead']) {
            await side.transport.publish({ topic, key: `${side.name}-${suffix}`, body: { suffix } });
          }
        }
        const deadLetters = transport.capabilities.deadLetter && other.capabilities.deadLetter;
        const finished = async (side: Side): Promise<boolean> => {
          const keys = keysOf(side);
          const own = ['early', 'now', 'retry', 'dead'].every((suffix) =>
            keys.includes(`${side.name}-${suffix}`),
          );
          const retried = keys.filter((key) => key === `${side.name}-retry`).length >= 2;
          const dead = !deadLetters || (await side.transport.deadLetters.list({ group })).length > 0;
          return own && retried && dead;
        };
        await test().waitFor(
          async () => (await finished(here)) && (await finished(there)),
          'each namespace’s messages, retry and dead letter',
        );
        await sleep(delayMs * 2 + 500);
        for (const side of sides) {
          expect(keysOf(side).filter((key) => !key.startsWith(`${side.name}-`))).toEqual([]);
          // The retry came back to its own namespace, charged.
          const retries = side.seen.filter((envelope) => keyOf(envelope) === `${side.name}-retry`);
          expect(retries.map((envelope) => envelope.deliveryCount)).toEqual([1, 2]);
        }
        if (!deadLetters) return;
        for (const side of sides) {
          const letters = await side.transport.deadLetters.list({ group });
          expect(letters.map((letter) => letter.key)).toEqual([`${side.name}-dead`]);
          expect(letters[0]).toMatchObject({ group, topic });
        }
        // A replay goes back to its own namespace's group only.
        here.healed = true;
        const [letter] = await transport.deadLetters.list({ group });
        const before = there.seen.length;
        expect(await transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
        await test().waitFor(
          () => keysOf(here).filter((key) => key === 'here-dead').length >= 2,
          'the replayed dead letter',
        );
        await sleep(delayMs + 500);
        expect(there.seen.length).toBe(before);
        expect((await other.deadLetters.list({ group })).map((left) => left.key)).toEqual(['there-dead']);
      } finally {
        await Promise.all(theirs.map((subscription) => subscription.close()));
        await other.close();
      }
    },
    timeoutMs,
  );
}
