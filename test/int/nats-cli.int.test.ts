import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Envelope } from 'oncemq';
import { dlqCommand, outcomeFor } from '../support/internal.js';
import { NatsTransport } from 'oncemq/nats';
import { waitUntil } from '../support/local-points.js';
import { adminOf, NATS_SERVICE, QUICK_NATS } from '../support/nats.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);

/** Runs `oncemq dlq …` in this process and returns its exit code and what it printed. */
async function dlq(...args: string[]): Promise<{ code: number; output: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  try {
    const code = await dlqCommand.run([...args, '--transport', 'nats', '--url', service.url]);
    return { code, output: lines.join('\n') };
  } finally {
    log.mockRestore();
  }
}

// The CLI reads the default names (ONCEMQ-DLQ, ONCEMQ-RETRY): this test uses its own topic and group
// in them and removes what it made.
describe.skipIf(!service.available)('oncemq dlq --transport nats', () => {
  const id = randomUUID().slice(0, 8);
  const topic = `cli-${id}`;
  const group = `points-${id}`;
  let transport: NatsTransport | undefined;

  afterEach(async () => {
    await transport?.close();
    const admin = await adminOf(service.url);
    try {
      await admin.jsm.streams.delete(`ONCEMQ_${topic}`).catch(() => false);
      await admin.jsm.consumers.delete('ONCEMQ-RETRY', group).catch(() => false);
      await admin.jsm.streams.purge('ONCEMQ-DLQ', { filter: `oncemq-dlq.${group}` }).catch(() => undefined);
      for (const stream of ['ONCEMQ-RETRY', 'ONCEMQ-DLQ']) {
        const info = await admin.jsm.streams.info(stream).catch(() => null);
        if (info !== null && info.state.messages === 0 && info.state.consumer_count === 0) {
          await admin.jsm.streams.delete(stream);
        }
      }
    } finally {
      await admin.close();
    }
  });

  it('lists dead letters with reason and error, replays one to its group only, purges the other', async () => {
    transport = new NatsTransport({ ...QUICK_NATS, servers: service.url });
    await transport.publish({ topic, key: 'evt-1', body: 'garbage' });
    await transport.publish({ topic, key: 'evt-2', body: 'garbage' });
    let healed = false;
    const seen: Envelope[] = [];
    const subscription = await transport.subscribe(group, [topic], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(outcomeFor(envelope, healed ? 'ack' : 'dead-letter', 0));
    });
    await waitUntil(
      async () => (await transport?.deadLetters.list({ group }))?.length === 2,
      'two dead letters',
    );

    const list = await dlq('list', '--group', group, '--json');
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.output) as { id: string; key: string; reason: string; error: string }[];
    expect(letters.map((letter) => [letter.key, letter.reason])).toEqual([
      ['evt-1', 'permanent-error'],
      ['evt-2', 'permanent-error'],
    ]);
    expect(letters[0]?.error).toMatch(/conformance: poison/);

    healed = true;
    const replay = await dlq('replay', '--group', group, letters[0]?.id ?? '');
    expect(replay).toEqual({ code: 0, output: 'replayed 1 of 1' });
    await waitUntil(
      () => seen.filter((envelope) => envelope.headers['oncemq-key'] === 'evt-1').length === 2,
      'the replay',
    );
    expect(seen.at(-1)?.deliveryCount).toBe(1);

    expect(await dlq('purge', '--group', group, '--all')).toEqual({ code: 0, output: 'purged 1 of 1' });
    expect(await dlq('list', '--group', group)).toEqual({ code: 0, output: 'no dead letters' });
    await subscription.close();
  });
});
