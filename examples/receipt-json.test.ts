import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { PublishReceipt } from 'oncemq';
import { LocalBroker } from 'oncemq/local';
import { receiptJson } from './receipt-json.js';

describe('the receipt-json example', () => {
  it('writes a receipt with a bigint offset, which JSON.stringify alone refuses', () => {
    // The receipt the Kafka transport resolves with (src/transport/kafka/kafka-publisher.ts).
    const receipt: PublishReceipt = Object.assign(
      { brokerId: 'payments/0/41', topic: 'payments', position: { partition: 0, offset: '41' } },
      { partition: 0, offset: 41n },
    );
    expect(() => JSON.stringify(receipt)).toThrow(/BigInt/);
    expect(JSON.parse(receiptJson(receipt))).toEqual({
      brokerId: 'payments/0/41',
      topic: 'payments',
      position: { partition: 0, offset: '41' },
      partition: 0,
      offset: '41',
    });
  });

  it('writes a receipt of the local broker as it is', async () => {
    const broker = new LocalBroker({ path: ':memory:' });
    try {
      const receipt = await broker.publish({ topic: 'payments', key: 'pay-1', body: { eventId: 'pay-1' } });
      expect(JSON.parse(receiptJson(receipt))).toEqual(JSON.parse(JSON.stringify(receipt)));
    } finally {
      await broker.close();
    }
  });

  it('is quoted in the transport contract exactly as it compiles', () => {
    const source = readFileSync(new URL('./receipt-json.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/transports/contract.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
