import { describe, expect, it } from 'vitest';
import { createEnvelope, DEAD_LETTER_HEADERS, DeadLetterTooLargeError, type Outcome } from 'oncemq';
import { sendDeadLetterThenAck } from '../support/internal.js';

// The dead-letter settle of RocketMQ and SQS: the copy is confirmed before the original is acked, and a
// copy that is not stored leaves the original unacked, to come again.

const envelope = createEnvelope({
  brokerId: 'M-1',
  topic: 'orders',
  headers: { 'oncemq-key': 'k-1', 'x-own': 'yes' },
  body: new Uint8Array([1, 2, 3]),
  deliveryCount: 2,
});

const outcome: Extract<Outcome, { kind: 'dead' }> = {
  kind: 'dead',
  action: 'dead-letter',
  reason: 'retries-exhausted',
  error: new Error('the handler failed'),
  group: 'points',
  key: 'k-1',
  topic: 'orders',
  brokerId: 'M-1',
  deliveryCount: 5,
  elapsedMs: 1,
};

/** Records the order of the send and the ack; `send` fails when told to. */
function steps(failSend = false) {
  const done: string[] = [];
  const copies: { headers: Readonly<Record<string, string>>; body: Uint8Array }[] = [];
  return {
    done,
    copies,
    send: async (copy: { headers: Readonly<Record<string, string>>; body: Uint8Array }) => {
      await Promise.resolve();
      if (failSend) throw new Error('the broker refused the copy');
      copies.push(copy);
      done.push('send');
    },
    ack: async () => {
      await Promise.resolve();
      done.push('ack');
    },
  };
}

describe('sendDeadLetterThenAck', () => {
  it('sends the copy with its reason, error, key and attempt, and acks the original only once the send resolved', async () => {
    const s = steps();
    await sendDeadLetterThenAck(envelope, 'points', outcome, { maxBytes: 64 * 1024 }, s.send, s.ack);
    expect(s.done).toEqual(['send', 'ack']);
    expect(s.copies[0]?.headers).toMatchObject({
      'x-own': 'yes',
      [DEAD_LETTER_HEADERS.group]: 'points',
      [DEAD_LETTER_HEADERS.reason]: 'retries-exhausted',
      [DEAD_LETTER_HEADERS.error]: 'Error: the handler failed',
      [DEAD_LETTER_HEADERS.key]: 'k-1',
      [DEAD_LETTER_HEADERS.deliveryCount]: '5',
    });
    expect(s.copies[0]?.body).toEqual(envelope.body);
  });

  it('leaves the original unacked when the send fails: the error goes to the settle', async () => {
    const s = steps(true);
    await expect(
      sendDeadLetterThenAck(envelope, 'points', outcome, { maxBytes: 64 * 1024 }, s.send, s.ack),
    ).rejects.toThrow('the broker refused the copy');
    expect(s.done).toEqual([]);
  });

  it('neither sends nor acks a copy that cannot fit the broker’s limit', async () => {
    const s = steps();
    await expect(
      sendDeadLetterThenAck(envelope, 'points', outcome, { maxBytes: 1100 }, s.send, s.ack),
    ).rejects.toThrow(DeadLetterTooLargeError);
    expect(s.done).toEqual([]);
  });
});
