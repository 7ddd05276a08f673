import { describe, expect, it } from 'vitest';
import { createEnvelope, type Envelope, type Outcome } from 'oncemq';
import { GateClosedError, OrderingGate } from '../support/internal.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function envelope(orderingKey: string | undefined, id: string): Envelope {
  return createEnvelope({
    brokerId: id,
    topic: 't',
    body: {},
    ...(orderingKey === undefined ? {} : { orderingKey }),
  });
}

function outcome(envelope: Envelope, action: 'ack' | 'retry' | 'dead-letter', charged = true): Outcome {
  const base = {
    group: 'g',
    key: envelope.brokerId,
    topic: 't',
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
  };
  if (action === 'ack') {
    return {
      ...base,
      kind: 'executed',
      action,
      mode: 'transactional',
      attempt: 1,
      reclaimed: false,
      leaseLost: false,
    };
  }
  if (action === 'retry') {
    return {
      ...base,
      kind: 'retry',
      action,
      delayMs: 20,
      nextDeliveryCount: envelope.deliveryCount + (charged ? 1 : 0),
      reconsumeTimes: 0,
      error: new Error('failed'),
    };
  }
  return { ...base, kind: 'dead', action, reason: 'retries-exhausted', error: new Error('exhausted') };
}

describe('OrderingGate', () => {
  it('runs one key at a time in submission order and different keys side by side, up to the concurrency', async () => {
    const log: string[] = [];
    let running = 0;
    let most = 0;
    const gate = new OrderingGate(
      {
        process: async (e) => {
          running++;
          most = Math.max(most, running);
          log.push(`start ${e.brokerId}`);
          await sleep(10);
          log.push(`end ${e.brokerId}`);
          running--;
          return outcome(e, 'ack');
        },
      },
      { concurrency: 2 },
    );
    await Promise.all(['a1', 'b1', 'a2', 'c1', 'a3'].map((id) => gate.submit(envelope(id[0], id))));
    const a = log.filter((line) => line.includes(' a'));
    expect(a).toEqual(['start a1', 'end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    expect(most).toBe(2);
  });

  it('retries a failing delivery in place with the count its outcome carries, ahead of the key’s next one', async () => {
    const seen: string[] = [];
    let k1Calls = 0;
    const gate = new OrderingGate(
      {
        process: (e) => {
          seen.push(`${e.brokerId}#${e.deliveryCount}`);
          // k1: a charged retry (1 → 2), an uncharged one (2 → 2), then success.
          if (e.brokerId === 'k1' && ++k1Calls < 3)
            return Promise.resolve(outcome(e, 'retry', k1Calls === 1));
          return Promise.resolve(outcome(e, 'ack'));
        },
      },
      { concurrency: 1 },
    );
    const results = await Promise.all([gate.submit(envelope('k', 'k1')), gate.submit(envelope('k', 'k2'))]);
    expect(seen).toEqual(['k1#1', 'k1#2', 'k1#2', 'k2#1']);
    expect(results.map((r) => r.action)).toEqual(['ack', 'ack']);
  });

  it('treats a processor that throws as an uncharged retry in place', async () => {
    let calls = 0;
    const gate = new OrderingGate(
      {
        process: (e) => {
          calls++;
          return calls === 1 ? Promise.reject(new Error('down')) : Promise.resolve(outcome(e, 'ack'));
        },
      },
      { concurrency: 1 },
    );
    expect((await gate.submit(envelope('k', 'k1'))).action).toBe('ack');
    expect(calls).toBe(2);
  });

  it('passes a dead letter on by default, and blocks on an exhausted one when told to', async () => {
    const dead = new OrderingGate(
      { process: (e) => Promise.resolve(outcome(e, 'dead-letter')) },
      { concurrency: 1 },
    );
    expect((await dead.submit(envelope('k', 'k1'))).action).toBe('dead-letter');
    let tries = 0;
    const blocking = new OrderingGate(
      { process: (e) => Promise.resolve(outcome(e, ++tries < 3 ? 'dead-letter' : 'ack')) },
      { concurrency: 1, onExhausted: 'block', blockedRetryEvery: 10 },
    );
    expect((await blocking.submit(envelope('k', 'k1'))).action).toBe('ack');
    expect(tries).toBe(3);
  });

  it('on close, deliveries waiting for a retry or behind their key get no outcome', async () => {
    const gate = new OrderingGate(
      { process: (e) => Promise.resolve(outcome(e, 'retry')) },
      { concurrency: 1 },
    );
    const first = gate.submit(envelope('k', 'k1'));
    const second = gate.submit(envelope('k', 'k2'));
    await sleep(5);
    gate.close();
    await expect(first).rejects.toBeInstanceOf(GateClosedError);
    await expect(second).rejects.toBeInstanceOf(GateClosedError);
    await gate.drained();
    expect(gate.pending).toBe(0);
  });

  it('refuses an unknown onExhausted or onPartitionChange by name', () => {
    const processor = { process: () => Promise.reject(new Error('unused')) };
    expect(() => new OrderingGate(processor, { concurrency: 1, onPartitionChange: 'move' as never })).toThrow(
      /ordering\.onPartitionChange.*'refuse' or 'drain'/,
    );
    expect(() => new OrderingGate(processor, { concurrency: 1, onExhausted: 'skip' as never })).toThrow(
      /ordering\.onExhausted/,
    );
    new OrderingGate(processor, { concurrency: 1, onPartitionChange: 'drain' }).close();
  });
});
