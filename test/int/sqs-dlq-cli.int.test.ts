// `oncemq dlq --transport sqs`, run in process against ElasticMQ.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Transport } from 'oncemq';
import { findElasticMQ } from '../support/brokers.js';
import { runDlq } from '../support/dlq-cli.js';
import { outcomeFor, waitFor } from '../support/internal.js';
import { sqsUnderTest } from '../support/sqs.js';

const service = await findElasticMQ();

describe.skipIf(!service.available)('oncemq dlq --transport sqs', () => {
  let transport: Transport;
  let cleanup: () => Promise<void>;
  let url: string;

  beforeEach(async () => {
    const namespace = `cli${randomUUID().slice(0, 8)}`;
    const under = await sqsUnderTest(service.url, { namespace });
    transport = under.transport;
    cleanup = async () => {
      await transport.close();
      await under.cleanup?.();
    };
    url = `${service.url}?namespace=${namespace}`;
  });

  afterEach(async () => {
    await cleanup();
  });

  it('lists a group’s dead letters with reason and error, replays one to the group, purges the other', async () => {
    await transport.publish({ topic: 'payments', key: 'evt-1', body: { n: 1 } });
    await transport.publish({ topic: 'payments', key: 'evt-2', body: { n: 2 } });
    let healed = false;
    const replayed: string[] = [];
    await transport.subscribe('points', ['payments'], (envelope) => {
      if (healed) replayed.push(envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(outcomeFor(envelope, healed ? 'ack' : 'dead-letter', 0));
    });
    await waitFor(
      async () => (await transport.deadLetters.list({ group: 'points' })).length === 2,
      'two dead letters',
      15_000,
    );

    const list = await runDlq('list', '--transport', 'sqs', '--url', url, '--group', 'points', '--json');
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.out) as { id: string; key: string; reason: string; error: string }[];
    expect(letters.map((letter) => letter.key).sort()).toEqual(['evt-1', 'evt-2']);
    expect(letters[0]?.reason).toBe('permanent-error');
    expect(letters[0]?.error).toMatch(/poison/);

    healed = true;
    const first = letters.find((letter) => letter.key === 'evt-1');
    const replay = await runDlq(
      'replay',
      '--transport',
      'sqs',
      '--url',
      url,
      '--group',
      'points',
      first?.id ?? '',
    );
    expect(replay).toMatchObject({ code: 0, out: 'replayed 1 of 1' });
    await waitFor(() => replayed.includes('evt-1'), 'the replayed copy', 15_000);

    const purge = await runDlq('purge', '--transport', 'sqs', '--url', url, '--group', 'points', '--all');
    expect(purge).toMatchObject({ code: 0, out: 'purged 1 of 1' });
    expect(await transport.deadLetters.list({ group: 'points' })).toEqual([]);
  }, 60_000);

  it('says that a group without a dead-letter queue has none, and creates nothing', async () => {
    await expect(runDlq('list', '--transport', 'sqs', '--url', url, '--group', 'nobody')).rejects.toThrow(
      /group nobody has no dead-letter queue/,
    );
  });
});
