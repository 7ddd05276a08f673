import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import {
  BODY_ENCODING_HEADER,
  fifoId,
  PACKED_HEADERS_ATTRIBUTE,
  sqsEnvelope,
  sqsPublishInput,
  sqsRecordOf,
  sqsSendInput,
  type SqsRecord,
} from '../support/internal.js';

const decoder = new TextDecoder();

/** The record SQS would hand back for a SendMessage input (as the SDK receives it). */
function received(input: ReturnType<typeof sqsSendInput>, receiveCount = 1): SqsRecord {
  return sqsRecordOf({
    MessageId: 'm-1',
    ReceiptHandle: 'r-1',
    Body: input.MessageBody,
    Attributes: { ApproximateReceiveCount: String(receiveCount), SentTimestamp: '1700000000000' },
    MessageAttributes: input.MessageAttributes,
  });
}

describe('SQS message mapping', () => {
  it('maps a publish to attributes and back: key, ordering key, headers, text body, receive count', () => {
    const input = sqsPublishInput(
      { topic: 't', key: 'order-1', orderingKey: 'customer-7', body: { a: 1 }, headers: { trace: 'x' } },
      { fifo: false },
    );
    expect(input.MessageAttributes?.['oncemq-key']).toEqual({ DataType: 'String', StringValue: 'order-1' });
    expect(input.MessageGroupId).toBeUndefined();
    const envelope = sqsEnvelope(received(input, 3), { topic: 'orders' });
    expect(envelope.headers).toEqual({
      'oncemq-key': 'order-1',
      'oncemq-ordering-key': 'customer-7',
      trace: 'x',
    });
    expect(envelope.orderingKey).toBe('customer-7');
    expect(decoder.decode(envelope.body)).toBe('{"a":1}');
    expect(envelope.deliveryCount).toBe(1);
    expect(envelope.brokerDeliveryCount).toBe(3);
    expect(envelope.topic).toBe('orders');
    expect(envelope.brokerId).toBe('m-1');
    expect(envelope.publishedAt?.getTime()).toBe(1_700_000_000_000);
  });

  it('carries the delivery count of a retry copy in its header', () => {
    const input = sqsSendInput({ headers: { 'oncemq-delivery-count': '4' }, body: 'x' });
    expect(sqsEnvelope(received(input, 1), { topic: 't' }).deliveryCount).toBe(4);
  });

  it('sends bytes that are not XML text as base64, and an empty body marked, and reads both back exactly', () => {
    for (const bytes of [
      Uint8Array.from([0, 0xff, 0x10, 0x41]),
      new Uint8Array(),
      new TextEncoder().encode('\u0001'),
    ]) {
      const input = sqsSendInput({ headers: {}, body: bytes });
      expect(input.MessageBody.length).toBeGreaterThan(0);
      expect(input.MessageAttributes?.[BODY_ENCODING_HEADER]).toBeDefined();
      const envelope = sqsEnvelope(received(input), { topic: 't' });
      expect([...envelope.body]).toEqual([...bytes]);
      expect(envelope.headers[BODY_ENCODING_HEADER]).toBeUndefined();
    }
  });

  it('packs what does not fit 10 attributes (or has a name or value SQS refuses) into one attribute', () => {
    const headers: Record<string, string> = { 'bad name:x': 'v', empty: '', ctl: 'a\u0001b' };
    for (let i = 0; i < 12; i++) headers[`h${i}`] = `v${i}`;
    const input = sqsSendInput({ headers: { ...headers, 'oncemq-key': 'k' }, body: 'x' });
    const attributes = input.MessageAttributes ?? {};
    expect(Object.keys(attributes)).toHaveLength(10);
    expect(attributes['oncemq-key']?.StringValue).toBe('k');
    expect(attributes[PACKED_HEADERS_ATTRIBUTE]?.StringValue).not.toContain('\u0001');
    expect(sqsEnvelope(received(input), { topic: 't' }).headers).toEqual({ ...headers, 'oncemq-key': 'k' });
  });

  it('refuses a header that is not text', () => {
    expect(() => sqsSendInput({ headers: { n: 1 as unknown as string }, body: 'x' })).toThrow(ConfigError);
  });

  it("maps another producer's message: plain body, String, Number and Binary attributes read exactly or refused as keys", () => {
    const record = sqsRecordOf({
      MessageId: 'f-1',
      ReceiptHandle: 'r',
      Body: 'plain text',
      Attributes: { ApproximateReceiveCount: '2' },
      MessageAttributes: {
        'oncemq-key': { DataType: 'Number', StringValue: '42' },
        big: { DataType: 'Number', StringValue: '9007199254740993' },
        utf8: { DataType: 'Binary', BinaryValue: new TextEncoder().encode('ключ') },
        raw: { DataType: 'Binary', BinaryValue: Uint8Array.from([0x6b, 0xff]) },
        label: { DataType: 'String.custom', StringValue: 'a' },
        [PACKED_HEADERS_ATTRIBUTE]: { DataType: 'String', StringValue: 'not json' },
      },
    });
    const envelope = sqsEnvelope(record, { topic: 't' });
    expect(decoder.decode(envelope.body)).toBe('plain text');
    expect(envelope.headers).toEqual({
      'oncemq-key': '42',
      utf8: 'ключ',
      label: 'a',
      [PACKED_HEADERS_ATTRIBUTE]: 'not json',
    });
    expect(Object.keys(envelope.nonKeyHeaders ?? {}).sort()).toEqual(['big', 'raw']);
    expect(envelope.deliveryCount).toBe(1);
  });

  it('FIFO: the group is the ordering key, the deduplication id the business key, as ids SQS takes', () => {
    const input = sqsPublishInput(
      { topic: 't', key: 'k-1', orderingKey: 'c 7 ключ', body: 'x' },
      { fifo: true },
    );
    expect(input.MessageDeduplicationId).toBe('k-1');
    expect(input.MessageGroupId).toBe(fifoId('c 7 ключ'));
    expect(input.MessageGroupId).toMatch(/^[0-9a-f]{64}$/);
    const replay = sqsPublishInput(
      { topic: 't', key: 'k-1', body: 'x' },
      { fifo: true, deduplicationId: 'replay-9' },
    );
    expect(replay.MessageDeduplicationId).toBe('replay-9');
    expect(replay.MessageGroupId).toBe('k-1');
    const keyless = sqsPublishInput({ topic: 't', body: 'x' }, { fifo: true });
    expect(keyless.MessageDeduplicationId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
