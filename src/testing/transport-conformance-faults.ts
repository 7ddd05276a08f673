import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, outcomeFor, sleep } from './transport-conformance-fixture.js';

/** Cases that break connections: they run where the factory can (`dropConnections`). */
export function describeTransportFaultCases(test: () => TransportCase): void {
  it('a consumer connection lost after the effect and before the ack: the same copy comes back', async (ctx) => {
    const { under, group, transport, topic } = test();
    const drop = under.dropConnections;
    if (drop === undefined) ctx.skip();
    if (under.acksOutliveCuts !== undefined) ctx.skip(under.acksOutliveCuts);
    const receipt = await transport.publish({ topic, key: 'lost-ack', body: {} });
    const seen: Envelope[] = [];
    let subscribed: () => void = () => undefined;
    const registered = new Promise<void>((resolve) => (subscribed = resolve));
    await test().subscribeProcessor(group, {
      process: async (envelope) => {
        seen.push(envelope);
        if (seen.length === 1) {
          // The effect is committed; the connection goes before the ack reaches the broker.
          await registered;
          await drop?.(test().subscriptions);
        }
        return outcomeFor(envelope, 'ack', 0);
      },
    });
    subscribed();
    await test().waitFor(() => seen.length >= 2, 'the copy again');
    expect(seen[1]).toMatchObject({ brokerId: receipt.brokerId, topic });
    expect(keyOf(seen[1] as Envelope)).toBe('lost-ack');
    expect(seen[1]?.deliveryCount).toBe(1);
  });

  it('recovers from dropped connections while messages flow, losing none', async (ctx) => {
    const { under, group } = test();
    const drop = under.dropConnections;
    if (drop === undefined) ctx.skip();
    const acked = new Set<string>();
    await test().subscribeProcessor(group, {
      process: async (envelope) => {
        await sleep(2);
        acked.add(keyOf(envelope) ?? '');
        return outcomeFor(envelope, 'ack', 0);
      },
    });
    const keys = await test().publish(30, 'before');
    await drop?.(test().subscriptions);
    // Publishing right after the drop must work too: the transport reconnects (or waits) and confirms.
    keys.push(...(await test().publish(30, 'after')));
    await drop?.(test().subscriptions);
    await test().waitFor(() => keys.every((key) => acked.has(key)), 'every message acked');
    expect(acked.size).toBe(keys.length);
  });
}
