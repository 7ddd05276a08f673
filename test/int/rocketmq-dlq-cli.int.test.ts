import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Envelope } from 'oncemq';
import { RocketMQTransport } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { waitUntil } from '../support/local-points.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';
import { dlqCommand, outcomeFor, RocketMQAdmin } from '../support/internal.js';

const broker = await findRocketMQ();

/** Runs `oncemq dlq … --transport rocketmq` in this process and returns its exit code and what it printed. */
async function dlq(...args: string[]): Promise<{ code: number; output: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  try {
    const code = await dlqCommand.run([...args, '--transport', 'rocketmq', '--url', broker.url]);
    return { code, output: lines.join('\n') };
  } finally {
    log.mockRestore();
  }
}

describe.skipIf(!broker.available)('oncemq dlq --transport rocketmq', () => {
  const id = randomUUID().slice(0, 8);
  const topic = `cli-${id}`;
  const group = `points-${id}`;
  let transport: RocketMQTransport | undefined;

  afterEach(async () => {
    await transport?.close();
  });

  it('lists dead letters with reason and error, replays one to its group only, purges the other', async () => {
    transport = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ });
    let healed = false;
    const seen: Envelope[] = [];
    await transport.subscribe(group, [topic], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(outcomeFor(envelope, healed ? 'ack' : 'dead-letter', 0));
    });
    await transport.publish({ topic, key: 'evt-1', body: 'garbage' });
    await transport.publish({ topic, key: 'evt-2', body: 'garbage' });
    await waitUntil(
      async () => (await transport?.deadLetters.list({ group }))?.length === 2,
      'two dead letters',
    );

    const list = await dlq('list', '--group', group, '--json');
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.output) as { id: string; key: string; reason: string; error: string }[];
    expect(letters.map((letter) => [letter.key, letter.reason]).sort()).toEqual([
      ['evt-1', 'permanent-error'],
      ['evt-2', 'permanent-error'],
    ]);
    expect(letters[0]?.error).toMatch(/conformance: poison/);

    healed = true;
    const first = letters.find((letter) => letter.key === 'evt-1');
    expect(await dlq('replay', '--group', group, first?.id ?? '')).toEqual({
      code: 0,
      output: 'replayed 1 of 1',
    });
    await waitUntil(
      () => seen.filter((envelope) => envelope.headers['oncemq-key'] === 'evt-1').length === 2,
      'the replay',
    );
    expect(seen.at(-1)?.deliveryCount).toBe(1);
    expect(await dlq('purge', '--group', group, '--all')).toEqual({ code: 0, output: 'purged 1 of 1' });
    expect(await dlq('list', '--group', group)).toEqual({ code: 0, output: 'no dead letters' });
  });

  it('refuses a group that never subscribed, and creates nothing', async () => {
    const nobody = `nobody-${id}`;
    await expect(dlq('list', '--group', nobody)).rejects.toThrow(/%DLQ%nobody-[0-9a-f]+.*never subscribed/);
    const admin = new RocketMQAdmin(broker.nameServer);
    expect(await admin.topicExists(`%DLQ%${nobody}`)).toBe(false);
    expect(await admin.groupExists(nobody)).toBe(false);
  });
});
