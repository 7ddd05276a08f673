import { describe, expect, it } from 'vitest';
import { SILENT_LOGGER, type Envelope, type Logger, type Outcome } from 'oncemq';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import { type Answer, outcomeFor } from '../support/internal.js';
import { waitUntil } from '../support/local-points.js';
import {
  NATS_SERVICE,
  natsTestBed,
  QUICK_NATS,
  serverMaxPayload,
  type NatsUnderTest,
} from '../support/nats.js';
import { sleep } from '../support/points.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);

/** Each case of TRANSPORTS.md's NATS list that applies, named by what the transport does about it. */
describe.skipIf(!service.available)('NATS JetStream pitfalls', () => {
  const bed = natsTestBed(service.url);
  const open = (config: NatsTransportConfig = {}): Promise<NatsUnderTest> => bed.open(config);
  const answering =
    (answer: (envelope: Envelope) => Answer | Promise<Answer>, delayMs = 300) =>
    async (envelope: Envelope): Promise<Outcome> =>
      outcomeFor(envelope, await answer(envelope), delayMs);
  const topicStream = (test: NatsUnderTest): string => `${test.streamPrefix}_orders`;

  it('pulls no more than its free concurrency: the other messages wait in the stream, their ack wait not started (#2)', async () => {
    const test = await open();
    for (let i = 0; i < 10; i++)
      await test.transport.publish({ topic: 'orders', key: `k-${i}`, body: { i } });
    let started = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(async (): Promise<Answer> => {
        started++;
        await gate;
        return 'ack';
      }),
      { concurrency: 2 },
    );
    await waitUntil(() => started === 2, 'two deliveries started');
    await sleep(300);
    const info = await bed.admin.consumers.info(topicStream(test), 'g');
    expect(info.num_ack_pending).toBe(2);
    expect(info.num_pending).toBe(8);
    release();
    await waitUntil(() => started === 10, 'every message');
  });

  it('gets back the slots its expired pulls did not fill: a member with one slot still consumes after its pulls ran out empty (#2)', async () => {
    const test = await open();
    const seen: Envelope[] = [];
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering((envelope) => (seen.push(envelope), 'ack')),
      { concurrency: 1 },
    );
    // Pulls of 1 s: several expire empty, on the topic and on the retry stream.
    await sleep(3500);
    for (let i = 0; i < 3; i++) await test.transport.publish({ topic: 'orders', key: `k-${i}`, body: { i } });
    await waitUntil(() => seen.length === 3, 'every message', 8000);
  });

  it('leaves no pull request behind when it closes: a message published once one member closed goes to the other at once, not after the ack wait (#2)', async () => {
    const test = await open();
    const other = bed.track(
      new NatsTransport({
        ...QUICK_NATS,
        servers: service.url,
        streamPrefix: test.streamPrefix,
        subjectPrefix: test.subjectPrefix,
      }),
    );
    const first = await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => 'ack'),
      { visibility: '20s' },
    );
    // Its requests wait at the server, ahead of the other member's.
    await sleep(300);
    const seen: Envelope[] = [];
    await other.subscribe(
      'g',
      ['orders'],
      answering((envelope) => (seen.push(envelope), 'ack')),
      { visibility: '20s' },
    );
    await first.close();
    await test.transport.publish({ topic: 'orders', key: 'k', body: {} });
    await waitUntil(() => seen.length === 1, 'the other member', 5000);
  });

  it('pulls again as soon as a lost connection is back, without waiting for missed heartbeats (#6)', async () => {
    const test = await open({ pullExpires: '10s' });
    const seen: Envelope[] = [];
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering((envelope) => (seen.push(envelope), 'ack')),
    );
    await sleep(300);
    await test.dropConnections();
    await test.transport.publish({ topic: 'orders', key: 'after', body: {} });
    await waitUntil(() => seen.length === 1, 'the message published after the reconnect', 5000);
  });

  it('does not settle a delivery on a new connection after its own was lost while the handler ran: the same copy comes back after the ack wait (#1)', async () => {
    const test = await open();
    const receipt = await test.transport.publish({ topic: 'orders', key: 'k', body: {} });
    const seen: Envelope[] = [];
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(async (envelope): Promise<Answer> => {
        seen.push(envelope);
        if (seen.length === 1) {
          await test.dropConnections();
          // Reconnected: a publish goes through again before this handler answers.
          await test.transport.publish({ topic: 'other', key: 'probe', body: {} });
        }
        return 'ack';
      }),
      { visibility: 1000 },
    );
    await waitUntil(() => seen.length === 2, 'the copy again');
    expect(seen.map((envelope) => envelope.brokerId)).toEqual([receipt.brokerId, receipt.brokerId]);
  });

  it('knows an ack the server did not confirm: the ack of a copy whose consumer was deleted under its handler is logged (#1)', async () => {
    const warnings: string[] = [];
    const logger: Logger = { ...SILENT_LOGGER, warn: (message) => warnings.push(message) };
    const test = await open({ logger });
    await test.transport.publish({ topic: 'orders', key: 'k', body: {} });
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(async (): Promise<Answer> => {
        await bed.admin.consumers.delete(topicStream(test), 'g');
        return 'ack';
      }),
    );
    await waitUntil(
      () => warnings.some((warning) => /settle was not confirmed/.test(warning)),
      'the unconfirmed ack logged',
    );
  });

  it('sends an uncharged retry (a busy key) back with its delay: the server holds it, never requeues it at once (#3)', async () => {
    const test = await open();
    await test.transport.publish({ topic: 'orders', key: 'busy', body: {} });
    const at: number[] = [];
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => (at.push(Date.now()), at.length === 1 ? 'retry-uncharged' : 'ack'), 800),
    );
    await waitUntil(() => at.length === 2, 'the copy again');
    expect((at[1] ?? 0) - (at[0] ?? 0)).toBeGreaterThanOrEqual(720);
  });

  it('dead-letters a copy that keeps ending unsettled after maxDeliver deliveries, reason max-deliveries, instead of leaving it in the stream (#4)', async () => {
    const test = await open({ maxDeliver: 3, failureBackoff: '50ms' });
    await test.transport.publish({ topic: 'orders', key: 'stuck', body: {} });
    let deliveries = 0;
    await test.transport.subscribe('g', ['orders'], () => (deliveries++, Promise.reject(new Error('down'))));
    await waitUntil(
      async () => (await test.transport.deadLetters.list({ group: 'g' })).length === 1,
      'the dead letter',
    );
    const [letter] = await test.transport.deadLetters.list({ group: 'g' });
    expect(letter).toMatchObject({ key: 'stuck', reason: 'max-deliveries', deliveryCount: 1 });
    expect(letter?.error).toMatch(/delivered 3 times .*the processor threw: Error: down/);
    expect(deliveries).toBe(3);
    await waitUntil(
      async () => (await bed.admin.consumers.info(topicStream(test), 'g')).num_ack_pending === 0,
      'nothing pending',
    );
  });

  it('terms a dead-lettered copy with a plain +TERM, which a 2.9 server honours: it never comes back after the ack wait (#4)', async () => {
    const test = await open();
    await test.transport.publish({ topic: 'orders', key: 'poison', body: {} });
    let deliveries = 0;
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => (deliveries++, 'dead-letter')),
      {
        visibility: 1000,
      },
    );
    await waitUntil(() => deliveries === 1, 'the delivery');
    await sleep(2000);
    expect(deliveries).toBe(1);
    expect((await bed.admin.consumers.info(topicStream(test), 'g')).num_ack_pending).toBe(0);
  });

  it("dead-letters a message near the server's max_payload whose copy with the dead-letter headers is over it: listed cut, with its reason and original size, never delivered again (#4)", async () => {
    const test = await open({ maxDeliver: 3 });
    const maxPayload = await serverMaxPayload(service.url);
    // As large as the server takes with the original's few headers; the dead-letter headers make it too large.
    const body = new Uint8Array(maxPayload - 256).fill(7);
    await test.transport.publish({ topic: 'orders', key: 'huge', body });
    let deliveries = 0;
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => (deliveries++, 'dead-letter')),
      { visibility: 1000 },
    );
    await waitUntil(() => deliveries === 1, 'the delivery');
    await waitUntil(
      async () => (await test.transport.deadLetters.list({ group: 'g' })).length === 1,
      'the dead letter',
    );
    const [letter] = await test.transport.deadLetters.list({ group: 'g' });
    expect(letter).toMatchObject({ key: 'huge', topic: 'orders', reason: 'permanent-error' });
    expect(letter?.cut).toMatchObject({ bodyBytes: body.length });
    expect(letter?.body.length).toBeLessThan(body.length);
    await sleep(3000);
    expect(deliveries).toBe(1);
    expect((await bed.admin.consumers.info(topicStream(test), 'g')).num_ack_pending).toBe(0);
    await expect(test.transport.deadLetters.replay('g', [letter?.id ?? ''])).rejects.toThrow(
      new RegExp(`dead letter ${letter?.id} of group g .*cut`),
    );
    expect(await test.transport.deadLetters.list({ group: 'g' })).toHaveLength(1);
  });

  it('keeps the original unacked when its charged retry copy cannot be stored: the same copy comes back, its count unchanged', async () => {
    const test = await open();
    await test.transport.subscribe(
      'warm-up',
      ['orders'],
      answering(() => 'ack'),
    );
    // The retry stream now refuses every copy (the message is larger than it allows).
    await bed.admin.streams.update(`${test.streamPrefix}-RETRY`, { max_msg_size: 1 });
    await test.transport.publish({ topic: 'orders', key: 'retried', body: { some: 'body' } });
    const seen: Envelope[] = [];
    await test.transport.subscribe(
      'g2',
      ['orders'],
      answering((envelope) =>
        envelope.headers['oncemq-key'] === 'retried' && seen.push(envelope) === 1 ? 'retry' : 'ack',
      ),
      { visibility: 1000 },
    );
    await waitUntil(() => seen.length === 2, 'the original again');
    expect(seen.map((envelope) => [envelope.brokerId, envelope.deliveryCount])).toEqual([
      [seen[0]?.brokerId, 1],
      [seen[0]?.brokerId, 1],
    ]);
  });

  it('does not term a message whose dead-letter copy cannot be stored: it comes back', async () => {
    const test = await open();
    await test.transport.subscribe(
      'warm-up',
      ['orders'],
      answering(() => 'ack'),
    );
    await bed.admin.streams.update(`${test.streamPrefix}-DLQ`, { max_msg_size: 1 });
    await test.transport.publish({ topic: 'orders', key: 'poison', body: { some: 'body' } });
    let deliveries = 0;
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => (++deliveries === 1 ? 'dead-letter' : 'ack')),
      {
        visibility: 1000,
      },
    );
    await waitUntil(() => deliveries === 2, 'the message again');
  });

  it('drops a producer resend of a key inside the duplicate window and says so: one stored copy (#5)', async () => {
    const test = await open();
    expect(test.transport.capabilities.brokerDedupWindowMs).toBe(120_000);
    const first = await test.transport.publish({ topic: 'orders', key: 'pay-1', body: { n: 1 } });
    const again = await test.transport.publish({ topic: 'orders', key: 'pay-1', body: { n: 1 } });
    expect(first).toMatchObject({ duplicate: false, messageId: 'pay-1' });
    expect(again).toMatchObject({ duplicate: true, brokerId: first.brokerId });
    expect((await bed.admin.streams.info(topicStream(test))).state.messages).toBe(1);
  });

  it('gives each replay an id of its own: a dead letter replayed, dead-lettered again and replayed again is delivered both times (#5)', async () => {
    const test = await open();
    await test.transport.publish({ topic: 'orders', key: 'again', body: {} });
    let deliveries = 0;
    await test.transport.subscribe(
      'g',
      ['orders'],
      answering(() => (deliveries++, 'dead-letter')),
    );
    for (let round = 1; round <= 3; round++) {
      await waitUntil(() => deliveries === round, `delivery ${round}`);
      await waitUntil(
        async () => (await test.transport.deadLetters.list({ group: 'g' })).length === 1,
        `dead letter ${round}`,
      );
      if (round < 3) {
        const [letter] = await test.transport.deadLetters.list({ group: 'g' });
        expect(await test.transport.deadLetters.replay('g', [letter?.id ?? ''])).toBe(1);
      }
    }
  });

  it('keeps the retry copies of two groups apart: both groups get their own retry of the same message (#5)', async () => {
    const test = await open();
    await test.transport.publish({ topic: 'orders', key: 'both', body: {} });
    const counts = new Map<string, number[]>();
    for (const group of ['a', 'b']) {
      counts.set(group, []);
      await test.transport.subscribe(
        group,
        ['orders'],
        answering((envelope) => {
          const seen = counts.get(group) ?? [];
          seen.push(envelope.deliveryCount);
          return seen.length === 1 ? 'retry' : 'ack';
        }),
      );
    }
    await waitUntil(() => counts.get('a')?.length === 2 && counts.get('b')?.length === 2, 'both retries');
    expect(Object.fromEntries(counts)).toEqual({ a: [1, 2], b: [1, 2] });
  });
});
