// A channel closed at the moment its connection drops: amqplib's close() waits for the broker's
// close-ok, which never comes, so everything awaiting the close (a topology step, an ordered
// member consuming again, a subscription closing) would wait forever.
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from 'oncemq/testing';
import { SILENT_LOGGER } from '../../src/core/logger.js';
import { RabbitChannel } from '../../src/transport/rabbitmq/rabbit-channel.js';
import { findRabbit, throughProxy } from '../support/rabbitmq.js';

const service = await findRabbit();

/** What `promise` came to within `ms`: its value, or 'pending'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  return Promise.race([
    promise,
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms)),
  ]);
}

describe.skipIf(!service.available)('RabbitMQ channel close', () => {
  let proxy: TcpProxy;
  let connection: amqplib.ChannelModel;

  beforeEach(async () => {
    const target = new URL(service.url);
    proxy = await TcpProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 5672) });
    connection = await amqplib.connect(throughProxy(service.url, proxy));
    connection.on('error', () => undefined);
  });

  afterEach(async () => {
    await proxy.close();
  });

  it('ends when the connection drops after the close was sent and before the broker answered it', async () => {
    for (let round = 0; round < 3; round++) {
      if (round > 0) {
        connection = await amqplib.connect(throughProxy(service.url, proxy));
        connection.on('error', () => undefined);
      }
      const channel = new RabbitChannel(await connection.createConfirmChannel(), SILENT_LOGGER, 'test');
      const closing = channel.close().then(() => 'closed' as const);
      // Same tick: channel.close is on the wire, its close-ok cannot have come back yet.
      proxy.dropConnections();
      expect(await within(closing, 5_000)).toBe('closed');
      expect(channel.open).toBe(false);
    }
  });

  it('still waits for the broker when nothing drops', async () => {
    const channel = new RabbitChannel(await connection.createConfirmChannel(), SILENT_LOGGER, 'test');
    await channel.close();
    expect(channel.open).toBe(false);
    await connection.close();
  });
});
