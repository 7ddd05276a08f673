// `oncemq dlq --transport rabbitmq`, run in process against the real broker.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { dlqCommand, outcomeFor, waitFor } from '../support/internal.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';

const service = await findRabbit();

/** Runs `oncemq dlq ...args` and returns its exit code and what it printed. */
async function dlq(...args: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => {
    lines.push(parts.map(String).join(' '));
  });
  try {
    const code = await dlqCommand.run(args);
    return { code, out: lines.join('\n') };
  } finally {
    log.mockRestore();
  }
}

describe.skipIf(!service.available)('oncemq dlq --transport rabbitmq', () => {
  let world: RabbitWorld;
  let url: string;

  beforeEach(async () => {
    world = await rabbitWorld(service.url);
    url = `${service.url}?prefix=${world.prefix}&exchange=${world.prefix}`;
  });

  afterEach(async () => {
    await world.cleanup();
  });

  it('lists a group’s dead letters with reason and error, replays one to the group, purges the other', async () => {
    const { transport } = world;
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

    const list = await dlq('list', '--transport', 'rabbitmq', '--url', url, '--group', 'points', '--json');
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.out) as { id: string; key: string; reason: string; error: string }[];
    expect(letters.map((letter) => letter.key)).toEqual(['evt-1', 'evt-2']);
    expect(letters[0]?.reason).toBe('permanent-error');
    expect(letters[0]?.error).toMatch(/poison/);

    healed = true;
    const replay = await dlq(
      'replay',
      '--transport',
      'rabbitmq',
      '--url',
      url,
      '--group',
      'points',
      letters[0]?.id ?? '',
    );
    expect(replay).toMatchObject({ code: 0, out: 'replayed 1 of 1' });
    await waitFor(() => replayed.includes('evt-1'), 'the replayed copy', 15_000);

    const purge = await dlq('purge', '--transport', 'rabbitmq', '--url', url, '--group', 'points', '--all');
    expect(purge).toMatchObject({ code: 0, out: 'purged 1 of 1' });
    expect(await transport.deadLetters.list({ group: 'points' })).toEqual([]);
  });

  it('says that a group without a dead-letter queue has none, and creates nothing', async () => {
    await expect(dlq('list', '--transport', 'rabbitmq', '--url', url, '--group', 'nobody')).rejects.toThrow(
      new RegExp(`queue '${world.prefix}\\.nobody@dead' does not exist`),
    );
  });
});
