import { expect } from 'vitest';
import { createRelay, type Outbox, type OutboxDatabase } from 'oncemq';

/** Relays what `outbox` holds once, through `database`, to an in-memory transport; answers the keys it published. */
export async function relayOnce<Tx>(outbox: Outbox<Tx>, database: OutboxDatabase): Promise<string[]> {
  const sent: string[] = [];
  const relay = createRelay({
    outbox,
    database,
    transport: {
      name: 'memory',
      publish: (message) => {
        sent.push(message.key ?? '');
        return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
      },
    },
  });
  try {
    expect(await relay.runOnce()).toMatchObject({ published: sent.length, failed: 0 });
  } finally {
    await relay.stop();
  }
  return sent;
}
