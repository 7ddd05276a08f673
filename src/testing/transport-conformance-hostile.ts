import { expect, it } from 'vitest';
import { DELIVERY_COUNT_HEADER, KEY_HEADER, type Envelope } from '../core/envelope.js';
import { DEAD_LETTER_HEADERS } from '../transport/dead-letters.js';
import { INVALID_HEADER_REASON } from '../transport/header-guard.js';
import { UNIQUE_ID_HEADER } from '../transport/transport.js';
import type { TransportCase } from './transport-conformance.js';
import { outcomeFor, sleep, type ForeignHeaderValue } from './transport-conformance-fixture.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One foreign message carrying one of oncemq's own headers with a value oncemq never writes there. */
interface HostileSample {
  readonly name: string;
  readonly header: string;
  readonly value: string;
}

/**
 * Headers only oncemq's transports write (on a retry copy, a dead letter, a publish), each with a value
 * no transport writes: too large, not a number, a far-future due time, another topic, dead-letter
 * headers on a normal delivery.
 */
function hostileSamples(otherTopic: string): HostileSample[] {
  const farFuture = String(Date.now() + 365 * 24 * 3_600_000);
  return [
    { name: 'count past any retry policy', header: DELIVERY_COUNT_HEADER, value: '999999999' },
    { name: 'count zero', header: DELIVERY_COUNT_HEADER, value: '0' },
    { name: 'count not a number', header: DELIVERY_COUNT_HEADER, value: 'three' },
    { name: 'count negative', header: DELIVERY_COUNT_HEADER, value: '-2' },
    { name: 'retry due in a year', header: 'oncemq-retry-due', value: farFuture },
    { name: 'retry due not a time', header: 'oncemq-retry-due', value: 'tomorrow' },
    { name: 'retry due-at in a year', header: 'oncemq-retry-due-at', value: farFuture },
    { name: 'another topic', header: 'oncemq-topic', value: otherTopic },
    { name: 'retry topic another topic', header: 'oncemq-retry-topic', value: otherTopic },
    { name: 'unique id not a UUID', header: UNIQUE_ID_HEADER, value: 'export-17' },
    { name: 'dead reason on a delivery', header: DEAD_LETTER_HEADERS.reason, value: 'conflict' },
    { name: 'dead group on a delivery', header: DEAD_LETTER_HEADERS.group, value: 'someone-else' },
    { name: 'original topic on a delivery', header: DEAD_LETTER_HEADERS.topic, value: otherTopic },
  ];
}

/** The value as the broker's client can carry text: as text, else as its UTF-8 bytes. */
function carried(value: string, types: ReadonlySet<ForeignHeaderValue['type']>): ForeignHeaderValue {
  return types.has('text') ? { type: 'text', value } : { type: 'bytes', value: encoder.encode(value) };
}

/** Foreign messages carrying oncemq's own headers with values oncemq never writes (`foreign`). */
export function describeTransportHostileHeaderCases(test: () => TransportCase): void {
  it('a foreign message with hostile oncemq-* headers ends as the message’s own fault (dead letter with a reason) or is read as a fresh message, never loops or is lost', async (ctx) => {
    const { under, group, topic, transport } = test();
    const foreign = under.foreign;
    if (foreign === undefined) ctx.skip();
    const types = new Set(foreign?.headerTypes);
    const samples = hostileSamples(`${topic}-other`);
    const delivered = new Map<string, Envelope[]>();
    await test().subscribeProcessor(group, {
      process: (envelope) => {
        const name = decoder.decode(envelope.body);
        delivered.set(name, [...(delivered.get(name) ?? []), envelope]);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      },
    });
    for (const sample of samples) {
      await foreign?.publish(topic, {
        headers: [
          [KEY_HEADER, carried(`hostile-${sample.name}`, types)],
          [sample.header, carried(sample.value, types)],
        ],
        body: encoder.encode(sample.name),
      });
    }
    const deadNames = async (): Promise<string[]> =>
      transport.capabilities.deadLetter
        ? (await transport.deadLetters.list({ group })).map((letter) => decoder.decode(letter.body))
        : [];
    const ended = async (): Promise<number> => {
      const dead = await deadNames();
      return samples.filter((sample) => delivered.has(sample.name) || dead.includes(sample.name)).length;
    };
    await test().waitFor(async () => (await ended()) === samples.length, 'every hostile message to end');
    // Neither loops nor comes back: what ended stays ended.
    await sleep(1_500);
    const letters = transport.capabilities.deadLetter ? await transport.deadLetters.list({ group }) : [];
    const endings: Record<string, string> = {};
    for (const sample of samples) {
      const copies = delivered.get(sample.name) ?? [];
      const dead = letters.filter((letter) => decoder.decode(letter.body) === sample.name);
      if (dead.length > 0) {
        // The message's own fault: dead-lettered unprocessed, the reason naming the header and value.
        expect(copies, sample.name).toHaveLength(0);
        expect(dead, sample.name).toHaveLength(1);
        expect(dead[0]?.reason, sample.name).toBe(INVALID_HEADER_REASON);
        expect(dead[0]?.error, sample.name).toContain(`'${sample.header}' = ${JSON.stringify(sample.value)}`);
        endings[sample.name] = 'dead-lettered';
      } else {
        // Read as a fresh message: once, a first delivery of the topic it was published to.
        expect(copies, sample.name).toHaveLength(1);
        expect(copies[0]?.deliveryCount, sample.name).toBe(1);
        expect(copies[0]?.topic, sample.name).toBe(topic);
        endings[sample.name] = 'fresh';
      }
    }
    expect(Object.keys(endings)).toHaveLength(samples.length);
  });
}
