import { expect, it } from 'vitest';
import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import { PermanentError } from '../core/errors.js';
import { compileKeySource, DEFAULT_KEY_SOURCE, normalizeKey } from '../core/key.js';
import type { Outcome } from '../core/outcome.js';
import { DEAD_LETTER_HEADERS, type DeadLetter } from '../transport/dead-letters.js';
import type { TransportCase } from './transport-conformance.js';
import { outcomeFor, sleep, type ForeignHeaderValue } from './transport-conformance-fixture.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One foreign message of the key case: how its key header is sent, and what it must be read as. */
interface KeySample {
  readonly name: string;
  readonly values: readonly ForeignHeaderValue[];
  /** The key read, or `invalid-key`: the value cannot be read exactly, and is refused. */
  readonly expected: string;
}

const text = (value: string): ForeignHeaderValue => ({ type: 'text', value });
const bytes = (...value: number[]): ForeignHeaderValue => ({ type: 'bytes', value: Uint8Array.from(value) });

/**
 * Keys a foreign producer may send, in every type a broker carries. Pairs that differ only in what a
 * lossy reading drops (the bytes that are not UTF-8, the digits past 2^53) must never become one key:
 * each is read exactly or refused.
 */
function keySamples(types: ReadonlySet<ForeignHeaderValue['type']>, repeated: boolean): KeySample[] {
  const samples: KeySample[] = [];
  const add = (name: string, expected: string, ...values: ForeignHeaderValue[]): void => {
    if (values.every((value) => types.has(value.type))) samples.push({ name, values, expected });
  };
  add('text', 'order-1', text('order-1'));
  add('text beyond ASCII', 'заказ-🔑-1', text('заказ-🔑-1'));
  add('text holding U+FFFD', 'invalid-key', text('order-\uFFFD'));
  add('UTF-8 bytes', 'order-2', bytes(...encoder.encode('order-2')));
  add('UTF-8 bytes beyond ASCII', 'ключ-2', bytes(...encoder.encode('ключ-2')));
  add('bytes that are not UTF-8 (ff)', 'invalid-key', bytes(0x6b, 0xff));
  add('bytes that are not UTF-8 (fe)', 'invalid-key', bytes(0x6b, 0xfe));
  add('an overlong UTF-8 encoding', 'invalid-key', bytes(0x6b, 0xc0, 0xaf));
  add('a safe integer', '42', { type: 'integer', value: 42n });
  add('an integer past 2^53 (…993)', 'invalid-key', { type: 'integer', value: 9007199254740993n });
  add('an integer past 2^53 (…992)', 'invalid-key', { type: 'integer', value: 9007199254740992n });
  add('a float', 'invalid-key', { type: 'float', value: 1.5 });
  add('a boolean', 'invalid-key', { type: 'boolean', value: true });
  if (repeated) {
    add('the header twice, two values', 'invalid-key', text('order-3'), text('order-4'));
    add('the header twice, one value', 'order-5', text('order-5'), text('order-5'));
  }
  return samples;
}

const readKey = compileKeySource(DEFAULT_KEY_SOURCE);

/** The key the pipeline reads from `envelope` (its default key source), or the reason it refuses it. */
function pipelineKey(envelope: Envelope): { key: string } | { refused: string; message: string } {
  try {
    return { key: normalizeKey(readKey(envelope, undefined)) };
  } catch (error) {
    if (error instanceof PermanentError) return { refused: error.reason, message: error.message };
    throw error;
  }
}

/** The outcome a pipeline gives a delivery whose key it refused: a dead letter with the reason. */
function refusedOutcome(envelope: Envelope, reason: string, message: string): Outcome {
  return {
    group: 'conformance',
    key: null,
    topic: envelope.topic,
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
    kind: 'dead',
    action: 'dead-letter',
    reason,
    error: new PermanentError(reason, message),
  };
}

/** Messages of producers that are not oncemq's, sent with the broker's own client (`foreign`). */
export function describeTransportForeignCases(test: () => TransportCase): void {
  it('reads a foreign key header exactly in every type the broker carries, and refuses what it cannot read exactly', async (ctx) => {
    const { under, group, topic, transport } = test();
    const foreign = under.foreign;
    if (foreign === undefined) ctx.skip();
    const samples = keySamples(new Set(foreign?.headerTypes), foreign?.repeatedHeaders ?? false);
    const read = new Map<string, string>();
    const refusals = new Map<string, string>();
    await test().subscribeProcessor(group, {
      process: (envelope) => {
        const name = decoder.decode(envelope.body);
        const key = pipelineKey(envelope);
        if ('key' in key) {
          read.set(name, key.key);
          return Promise.resolve(outcomeFor(envelope, 'ack', 0));
        }
        read.set(name, key.refused);
        refusals.set(name, key.message);
        return Promise.resolve(refusedOutcome(envelope, key.refused, key.message));
      },
    });
    for (const sample of samples) {
      await foreign?.publish(topic, {
        headers: sample.values.map((value) => [KEY_HEADER, value] as const),
        body: encoder.encode(sample.name),
      });
    }
    await test().waitFor(() => read.size === samples.length, 'every foreign message');
    expect(Object.fromEntries(read)).toEqual(
      Object.fromEntries(samples.map((sample) => [sample.name, sample.expected])),
    );
    for (const message of refusals.values()) expect(message).toMatch(/key/);
    if (transport.capabilities.deadLetter) {
      const refused = samples.filter((sample) => sample.expected === 'invalid-key').length;
      await test().waitFor(
        async () => (await transport.deadLetters.list({ group })).length === refused,
        'the refused keys in the dead letters',
      );
      const letters = await transport.deadLetters.list({ group, reason: 'invalid-key' });
      expect(letters.map((letter) => decoder.decode(letter.body)).sort()).toEqual(
        samples
          .filter((sample) => sample.expected === 'invalid-key')
          .map((sample) => sample.name)
          .sort(),
      );
    }
    await sleep(300);
    expect(read.size).toBe(samples.length);
  });

  it('keeps in a dead letter the business key the group read, wherever it read it from (deadLetter capability)', async (ctx) => {
    const { group, topic, transport } = test();
    if (!transport.capabilities.deadLetter) ctx.skip();
    // No key header: the group reads the key from the body, as `key: { jsonPath: 'eventId' }` does.
    await transport.publish({ topic, body: { eventId: 'body-key-1' } });
    const withBodyKey = (envelope: Envelope): Outcome => {
      const { eventId } = JSON.parse(decoder.decode(envelope.body)) as { eventId: string };
      return { ...outcomeFor(envelope, 'dead-letter', 0), key: eventId };
    };
    await test().subscribeProcessor(group, { process: (envelope) => Promise.resolve(withBodyKey(envelope)) });
    await test().waitFor(
      async () => (await transport.deadLetters.list({ group })).length === 1,
      'the dead letter',
    );
    const [letter] = await transport.deadLetters.list({ group });
    expect(letter?.key).toBe('body-key-1');
    // A replay is a fresh copy: the key is read again by the group, not carried as a dead-letter header.
    await transport.deadLetters.replay(group, [letter?.id ?? '']);
    let again: DeadLetter | undefined;
    await test().waitFor(async () => {
      [again] = (await transport.deadLetters.list({ group })).filter((next) => next.id !== letter?.id);
      return again !== undefined;
    }, 'the replayed copy dead-lettered again');
    expect(again?.key).toBe('body-key-1');
    expect(again?.headers[DEAD_LETTER_HEADERS.key]).toBe('body-key-1');
  });

  it('gives two foreign messages with one body two broker ids, and a foreign copy redelivered its own again', async (ctx) => {
    const { under, group, topic } = test();
    const foreign = under.foreign;
    if (foreign === undefined) ctx.skip();
    const seen = new Map<string, string[]>();
    await test().subscribeProcessor(group, {
      process: (envelope) => {
        const key = pipelineKey(envelope);
        const name = 'key' in key ? key.key : key.refused;
        const ids = seen.get(name) ?? [];
        seen.set(name, [...ids, envelope.brokerId]);
        // The first delivery of each fails before an outcome: the broker hands the same copy again.
        if (ids.length === 0) return Promise.reject(new Error('conformance: processor down'));
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      },
    });
    const body = encoder.encode('{"same":"body"}');
    for (const key of ['twin-1', 'twin-2']) {
      await foreign?.publish(topic, { headers: [[KEY_HEADER, text(key)]], body });
    }
    await test().waitFor(
      () => (seen.get('twin-1')?.length ?? 0) >= 2 && (seen.get('twin-2')?.length ?? 0) >= 2,
      'both foreign messages twice',
    );
    const [first, again] = seen.get('twin-1') ?? [];
    const [second, secondAgain] = seen.get('twin-2') ?? [];
    expect(again).toBe(first);
    expect(secondAgain).toBe(second);
    expect(second).not.toBe(first);
  });

  it('keeps a foreign message’s headers that are not text on its retry, dead-letter and replay copies', async (ctx) => {
    const { under, group, topic, transport } = test();
    const foreign = under.foreign;
    const types = new Set(foreign?.headerTypes);
    const odd: (readonly [string, ForeignHeaderValue])[] = [];
    if (types.has('bytes')) odd.push(['x-raw', bytes(0x6b, 0xff)]);
    if (foreign?.repeatedHeaders === true) odd.push(['x-twice', text('one')], ['x-twice', text('two')]);
    if (foreign === undefined || odd.length === 0 || !transport.capabilities.deadLetter) ctx.skip();
    const expected = [...new Set(odd.map(([name]) => name))].sort();
    const seen: string[][] = [];
    let replayed = false;
    await test().subscribe(group, (envelope) => {
      // Only the producer's own: a broker adds headers of its own on some hops (RabbitMQ's `x-death`).
      seen.push(
        Object.keys(envelope.nonKeyHeaders ?? {})
          .filter((name) => expected.includes(name))
          .sort(),
      );
      if (replayed) return 'ack';
      return seen.length === 1 ? 'retry' : 'dead-letter';
    });
    await foreign?.publish(topic, {
      headers: [[KEY_HEADER, text('keep-1')], ...odd],
      body: encoder.encode('{}'),
    });
    await test().waitFor(
      async () => (await transport.deadLetters.list({ group })).length === 1,
      'the dead letter',
    );
    const [letter] = await transport.deadLetters.list({ group });
    replayed = true;
    expect(await transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
    await test().waitFor(() => seen.length >= 3, 'the replayed copy');
    // The first delivery, its retry copy and its replay: each still carries what the producer sent.
    expect(seen.slice(0, 3)).toEqual([expected, expected, expected]);
  });

  it('never lists the dead-letter headers a foreign message came with as its dead letter’s (a forged key, a cut mark)', async (ctx) => {
    const { under, group, topic, transport } = test();
    const foreign = under.foreign;
    if (foreign === undefined || !transport.capabilities.deadLetter) ctx.skip();
    await test().subscribe(group, () => 'dead-letter');
    await foreign?.publish(topic, {
      headers: [
        [DEAD_LETTER_HEADERS.key, text('forged-key')],
        [DEAD_LETTER_HEADERS.reason, text('forged-reason')],
        [DEAD_LETTER_HEADERS.bodyBytes, text('99999')],
        [DEAD_LETTER_HEADERS.droppedHeaders, text('7')],
      ],
      body: encoder.encode('{"forged":true}'),
    });
    await test().waitFor(
      async () => (await transport.deadLetters.list({ group })).length === 1,
      'the dead letter',
    );
    const [letter] = await transport.deadLetters.list({ group });
    // The suite's processor dead-letters with the key it read: none (no oncemq-key header).
    expect(letter).toMatchObject({ key: null, reason: 'permanent-error' });
    expect(letter?.cut).toBeUndefined();
    expect(await transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
  });
}
