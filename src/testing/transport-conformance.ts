import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import type { Subscription, Transport } from '../transport/transport.js';

/** Makes a fresh transport for one test; `cleanup` runs after it is closed. */
export type TransportFactory = () => Promise<{ transport: Transport; cleanup?: () => Promise<void> | void }>;

async function waitFor(condition: () => boolean, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function outcome(envelope: Envelope, action: Outcome['action']): Outcome {
  const base = {
    group: 'conformance',
    key: envelope.headers[KEY_HEADER] ?? null,
    topic: envelope.topic,
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
  };
  switch (action) {
    case 'ack':
      return {
        ...base,
        kind: 'executed',
        action,
        mode: 'transactional',
        attempt: 1,
        reclaimed: false,
        leaseLost: false,
      };
    case 'retry':
      return {
        ...base,
        kind: 'retry',
        action,
        delayMs: 20,
        reconsumeTimes: envelope.deliveryCount - 1,
        error: null,
      };
    case 'dead-letter':
      return { ...base, kind: 'dead', action, reason: 'permanent-error', error: new Error('conformance') };
  }
}

/**
 * The behaviour every transport must show, as a vitest suite: call it from a test file with a
 * factory making a fresh transport. Needs vitest (a dev dependency of the caller).
 */
export function describeTransportConformance(name: string, factory: TransportFactory): void {
  describe(`transport conformance: ${name}`, () => {
    let transport: Transport;
    let cleanup: (() => Promise<void> | void) | undefined;
    let topic: string;
    const subscriptions: Subscription[] = [];

    beforeEach(async () => {
      ({ transport, cleanup } = await factory());
      topic = `conformance-${randomUUID().slice(0, 8)}`;
    });

    afterEach(async () => {
      await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
      await transport.close();
      await cleanup?.();
    });

    const subscribe = async (group: string, handle: (envelope: Envelope) => Outcome['action']) => {
      const subscription = await transport.subscribe(group, [topic], (envelope) =>
        Promise.resolve(outcome(envelope, handle(envelope))),
      );
      subscriptions.push(subscription);
      return subscription;
    };

    it('confirms a publish with a broker id and delivers that copy with its key and a delivery count of 1', async () => {
      const receipt = await transport.publish({ topic, key: 'key-1', body: { n: 1 } });
      expect(receipt.brokerId).not.toBe('');
      const seen: Envelope[] = [];
      await subscribe('g1', (envelope) => (seen.push(envelope), 'ack'));
      await waitFor(() => seen.length === 1, 'the delivery');
      expect(seen[0]).toMatchObject({ brokerId: receipt.brokerId, topic, deliveryCount: 1 });
      expect(seen[0]?.headers[KEY_HEADER]).toBe('key-1');
      expect(JSON.parse(new TextDecoder().decode(seen[0]?.body))).toEqual({ n: 1 });
    });

    it('delivers every message to one group across its members, and to every group', async () => {
      const receipts = [];
      for (let i = 0; i < 20; i++)
        receipts.push(await transport.publish({ topic, key: `key-${i}`, body: { i } }));
      const group1 = new Set<string>();
      const group2 = new Set<string>();
      await subscribe('g1', (envelope) => (group1.add(envelope.brokerId), 'ack'));
      await subscribe('g1', (envelope) => (group1.add(envelope.brokerId), 'ack'));
      await subscribe('g2', (envelope) => (group2.add(envelope.brokerId), 'ack'));
      await waitFor(() => group1.size === 20 && group2.size === 20, 'every message in both groups');
      expect(group1).toEqual(new Set(receipts.map((receipt) => receipt.brokerId)));
    });

    it('redelivers a message whose outcome says retry, with a higher delivery count', async () => {
      await transport.publish({ topic, key: 'key-r', body: {} });
      const counts: number[] = [];
      await subscribe('g1', (envelope) => {
        counts.push(envelope.deliveryCount);
        return counts.length < 3 ? 'retry' : 'ack';
      });
      await waitFor(() => counts.length === 3, 'two retries');
      expect(counts).toEqual([1, 2, 3]);
    });

    it('does not deliver a dead-lettered message again', async () => {
      await transport.publish({ topic, key: 'key-d', body: {} });
      await transport.publish({ topic, key: 'key-after', body: {} });
      const keys: (string | undefined)[] = [];
      await subscribe('g1', (envelope) => {
        keys.push(envelope.headers[KEY_HEADER]);
        return envelope.headers[KEY_HEADER] === 'key-d' ? 'dead-letter' : 'ack';
      });
      await waitFor(() => keys.includes('key-after'), 'the next message');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(keys.filter((key) => key === 'key-d')).toHaveLength(1);
    });

    it('acks nothing before the outcome: a processor that throws gets the copy again', async () => {
      const receipt = await transport.publish({ topic, key: 'key-t', body: {} });
      const seen: string[] = [];
      const subscription = await transport.subscribe('g1', [topic], (envelope) => {
        seen.push(envelope.brokerId);
        if (seen.length === 1) return Promise.reject(new Error('processor down'));
        return Promise.resolve(outcome(envelope, 'ack'));
      });
      subscriptions.push(subscription);
      await waitFor(() => seen.length >= 2, 'the copy again');
      expect(seen.slice(0, 2)).toEqual([receipt.brokerId, receipt.brokerId]);
    });

    it('stops delivering to a closed subscription', async () => {
      let count = 0;
      const subscription = await subscribe('g1', () => (count++, 'ack'));
      await transport.publish({ topic, key: 'key-1', body: {} });
      await waitFor(() => count === 1, 'the first delivery');
      await subscription.close();
      await transport.publish({ topic, key: 'key-2', body: {} });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(count).toBe(1);
    });
  });
}
