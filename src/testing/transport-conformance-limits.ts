import { expect, it } from 'vitest';
import type { DeadLetter } from '../transport/dead-letters.js';
import type { TransportCase } from './transport-conformance.js';
import { sleep } from './transport-conformance-fixture.js';

/**
 * Bytes a limit case's message stays under the broker's limit by: room for the original's own
 * headers (key, count, the broker's id header), too little for the dead-letter headers as well.
 */
const ORIGINAL_HEADROOM = 256;

/** Longest time a copy that was not acked takes to come back in the suite's set-ups (an ack wait). */
const REDELIVERY_WAIT_MS = 3000;

/**
 * Publishes one message, dead-letters it, and checks what every transport must do with a copy too
 * large to store as it is: one letter, with its key, topic, broker id, reason and error, marked cut;
 * the original not delivered again; a replay refused. Returns the letter.
 */
async function deadLetterTooLarge(
  test: TransportCase,
  message: { readonly body: Uint8Array; readonly headers?: Readonly<Record<string, string>> },
): Promise<DeadLetter> {
  const { transport, topic, group } = test;
  const receipt = await transport.publish({ topic, key: 'too-large', ...message });
  let deliveries = 0;
  await test.subscribe(group, () => (deliveries++, 'dead-letter'));
  await test.waitFor(async () => (await transport.deadLetters.list({ group })).length > 0, 'the dead letter');
  const [letter, ...more] = await transport.deadLetters.list({ group });
  expect(more).toEqual([]);
  expect(letter).toMatchObject({
    key: 'too-large',
    topic,
    brokerId: receipt.brokerId,
    reason: 'permanent-error',
  });
  expect(letter?.error).toMatch(/poison/);
  expect(letter?.cut).toMatchObject({ bodyBytes: message.body.length, keptBodyBytes: letter?.body.length });
  await sleep(REDELIVERY_WAIT_MS);
  expect(deliveries).toBe(1);
  // A replay of the part kept would be a different message.
  await expect(transport.deadLetters.replay(group, [letter?.id ?? ''])).rejects.toThrow(
    new RegExp(`dead letter ${letter?.id ?? ''} of group ${group} was stored cut`),
  );
  expect(await transport.deadLetters.list({ group })).toHaveLength(1);
  return letter as DeadLetter;
}

/**
 * Cases about the broker's size limits: they run where the factory says what they are
 * (`maxMessageBytes`, `maxHeaderBytes`) and the transport keeps dead letters.
 */
export function describeTransportLimitCases(test: () => TransportCase): void {
  it('a dead letter too large to store as it is still ends in the dead-letter queue, with its reason, and the original is not delivered again', async (ctx) => {
    const max = test().under.maxMessageBytes;
    if (max === undefined || !test().transport.capabilities.deadLetter) ctx.skip();
    // The original fits; its dead-letter copy, the same body with the dead-letter headers, does not.
    const body = new Uint8Array((max ?? 0) - ORIGINAL_HEADROOM).fill(0x61);
    const letter = await deadLetterTooLarge(test(), { body });
    expect(letter.body.length).toBeLessThan(body.length);
    expect(letter.body.every((byte) => byte === 0x61)).toBe(true);
  });

  it('a dead letter whose headers are too large to store as they are still ends in the dead-letter queue, with its reason, and the original is not delivered again', async (ctx) => {
    const max = test().under.maxHeaderBytes ?? test().under.maxMessageBytes;
    if (max === undefined || !test().transport.capabilities.deadLetter) ctx.skip();
    const body = new TextEncoder().encode('{"small":true}');
    const large = 'a'.repeat((max ?? 0) - ORIGINAL_HEADROOM);
    const letter = await deadLetterTooLarge(test(), { body, headers: { 'x-large': large } });
    expect(letter.headers['x-large']).toBeUndefined();
    expect(letter.cut?.droppedHeaders).toBeGreaterThan(0);
    expect(letter.body).toEqual(body);
  });
}
