import { describe, expect, it } from 'vitest';
import { ConfigError, TransportUnavailableError, type Envelope } from 'oncemq';
import {
  RedisStreamsTransport,
  type RedisStreamsTransportConfig,
  type StreamConnection,
} from 'oncemq/redis-streams';
import { waitUntil } from '../support/local-points.js';
import { REDIS_CLIENT_KINDS, REDIS_SERVICE } from '../support/redis.js';
import { gate, streamsEachTest, type ProxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';
import { keyOf, outcomeFor, toStreamConnection } from '../support/internal.js';

const service = await findService(REDIS_SERVICE);

const topic = 'payments';
const group = 'points';

const ack = (envelope: Envelope) => Promise.resolve(outcomeFor(envelope, 'ack', 0));

/** The keys under a prefix. */
const keysUnder = async (streams: ProxiedStreams): Promise<string[]> =>
  ((await streams.admin.send('KEYS', `${streams.prefix}:*`)) as string[]).sort();

describe.skipIf(!service.available)('Redis Streams transport', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    const { open, subscriptions } = streamsEachTest(kind, service.url, { failureBackoff: '50ms' });

    it('refuses a bad configuration at construction and a bad subscription before connecting, naming the field', async () => {
      const { client, transport } = await open();
      const make = (config: Partial<RedisStreamsTransportConfig>) => () =>
        new RedisStreamsTransport({ client: client.client, ...config });
      expect(make({ prefix: 'has space' })).toThrow(/prefix/);
      expect(make({ topology: 'make' as never })).toThrow(/topology/);
      expect(make({ timeout: '0ms' })).toThrow(/timeout/);
      expect(make({ maxDeliveries: -1 })).toThrow(/maxDeliveries/);
      expect(make({ trimInterval: '1ms' })).toThrow(/trimInterval/);
      expect(() => new RedisStreamsTransport({ client: {} as never })).toThrow(ConfigError);
      await expect(transport.subscribe(group, [topic], ack, { visibility: 50 })).rejects.toThrow(
        /visibility/,
      );
      await expect(transport.subscribe(group, [topic], ack, { concurrency: 0 })).rejects.toThrow(
        /concurrency/,
      );
      await expect(transport.subscribe(group, ['no spaces'], ack)).rejects.toThrow(/topic/);
      await expect(transport.subscribe('bad group', [topic], ack)).rejects.toThrow(/group/);
      await expect(transport.publish({ topic, body: {}, headers: { body: 'x' } })).rejects.toThrow(/headers/);
      subscriptions.push(await transport.subscribe(group, [topic], ack, { consumerName: 'one' }));
      await expect(transport.subscribe(group, [topic], ack, { consumerName: 'one' })).rejects.toThrow(
        /consumerName/,
      );
    });

    it("with topology 'check' creates nothing: a missing stream or group is a ConfigError naming it", async () => {
      const streams = await open({ topology: 'check' });
      const { transport, admin, prefix } = streams;
      await expect(transport.publish({ topic, key: 'k', body: {} })).rejects.toThrow(
        new RegExp(`stream '${prefix}:stream:payments' does not exist`),
      );
      await expect(transport.subscribe(group, [topic], ack)).rejects.toThrow(
        new RegExp(`${prefix}:stream:payments \\(no such stream\\)`),
      );
      await expect(transport.deadLetters.list({ group })).rejects.toThrow(ConfigError);
      expect(await keysUnder(streams)).toEqual([]);

      const creator = new RedisStreamsTransport({ client: admin.client, prefix });
      await (await creator.subscribe(group, [topic], ack)).close();
      await creator.close();
      await expect(transport.subscribe('other', [topic], ack)).rejects.toThrow(/no consumer group other/);
      const seen: string[] = [];
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          (envelope) => (seen.push(keyOf(envelope) ?? ''), ack(envelope)),
        ),
      );
      await transport.publish({ topic, key: 'k', body: {} });
      await waitUntil(() => seen.length === 1, 'the delivery');
      expect(await transport.deadLetters.list({ group })).toEqual([]);
    });

    it('a publish whose confirm is lost is sent again: a second copy with the same key, and the receipt names it', async () => {
      const streams = await open();
      const raw = toStreamConnection(streams.client.client);
      let lose = true;
      const losing: StreamConnection = {
        client: raw.client,
        async send(args, options) {
          const reply = await raw.send(args, options);
          // A publish is the publish script (XADD, and the shard copy while the topic has ordered groups).
          if (lose && (args[0] === 'EVALSHA' || args[0] === 'EVAL')) {
            lose = false;
            throw new Error('read ECONNRESET');
          }
          return reply;
        },
        duplicate: () => raw.duplicate(),
        onLost: (listener) => raw.onLost(listener),
        close: () => raw.close(),
      };
      const transport = new RedisStreamsTransport({ client: losing, prefix: streams.prefix });
      const receipt = await transport.publish({ topic, key: 'evt-1', body: { n: 1 } });
      const stored: Envelope[] = [];
      subscriptions.push(
        await transport.subscribe(group, [topic], (envelope) => (stored.push(envelope), ack(envelope))),
      );
      await waitUntil(() => stored.length === 2, 'both copies');
      expect(stored.map(keyOf)).toEqual(['evt-1', 'evt-1']);
      expect(stored[1]?.brokerId).toBe(receipt.brokerId);
      expect(stored[0]?.brokerId).not.toBe(receipt.brokerId);
      expect(stored.map((envelope) => envelope.headers['oncemq-unique-id'])).toEqual([
        receipt.messageId,
        receipt.messageId,
      ]);
    });

    it('a publish during a short outage waits and is confirmed once the connection is back', async () => {
      const streams = await open();
      const outage = streams.proxy.outage(300);
      const receipt = await streams.transport.publish({ topic, key: 'during', body: {} });
      await outage;
      expect(receipt.brokerId).toMatch(/:stream:payments\/\d+-\d+$/);
      expect(Number(await streams.admin.send('XLEN', streams.transport.settings.keys.topic(topic)))).toBe(1);
    });

    it('a publish that gets no confirm within the timeout fails with TransportUnavailableError', async () => {
      const streams = await open({ timeout: '300ms' });
      streams.proxy.refuse(true);
      streams.proxy.dropConnections();
      await expect(streams.transport.publish({ topic, key: 'lost', body: {} })).rejects.toBeInstanceOf(
        TransportUnavailableError,
      );
      streams.proxy.refuse(false);
    });

    it('bodies are bytes: a binary body comes back unchanged, and an entry another producer wrote is delivered with its key and body', async () => {
      const { transport, admin } = await open();
      const bytes = new Uint8Array([0, 255, 1, 128, 10, 13]);
      const receipt = await transport.publish({ topic, key: 'binary', body: bytes });
      await admin.send(
        'XADD',
        transport.settings.keys.topic(topic),
        '*',
        'oncemq-key',
        'foreign-1',
        'body',
        'hello',
      );
      const seen: Envelope[] = [];
      subscriptions.push(
        await transport.subscribe(group, [topic], (envelope) => (seen.push(envelope), ack(envelope))),
      );
      await waitUntil(() => seen.length === 2, 'both');
      expect(seen[0]).toMatchObject({ brokerId: receipt.brokerId, topic, deliveryCount: 1 });
      expect([...(seen[0]?.body ?? [])]).toEqual([...bytes]);
      expect(keyOf(seen[1] as Envelope)).toBe('foreign-1');
      expect(new TextDecoder().decode(seen[1]?.body)).toBe('hello');
      expect(seen[1]?.publishedAt).toBeInstanceOf(Date);
    });

    it('a handler that runs past the visibility without keeping its entry gets a second delivery of it, even in a group of one; the first one’s settle is dropped', async () => {
      const { transport } = await open();
      await transport.publish({ topic, key: 'long', body: {} });
      const seen: Envelope[] = [];
      const released = gate();
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          async (envelope) => {
            seen.push(envelope);
            if (seen.length === 1) {
              await released.opened;
              return outcomeFor(envelope, 'retry', 0);
            }
            released.open();
            return outcomeFor(envelope, 'ack', 0);
          },
          { visibility: 300 },
        ),
      );
      await waitUntil(() => seen.length === 2, 'the second delivery');
      expect(seen[1]).toMatchObject({
        brokerId: seen[0]?.brokerId,
        deliveryCount: 1,
        brokerDeliveryCount: 2,
      });
      // The first delivery's retry (due at once) would be a third delivery had it been settled.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(seen).toHaveLength(2);
    });

    it('keepAlive rejects once another member has claimed the entry', async () => {
      const { transport } = await open();
      await transport.publish({ topic, key: 'kept', body: {} });
      let first: Envelope | undefined;
      const released = gate();
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          async (envelope) => {
            first = envelope;
            await envelope.keepAlive?.extend();
            await released.opened;
            return outcomeFor(envelope, 'ack', 0);
          },
          { consumerName: 'a', concurrency: 1, visibility: 200 },
        ),
      );
      await waitUntil(() => first !== undefined, 'the delivery');
      let claimed = false;
      subscriptions.push(
        await transport.subscribe(group, [topic], (envelope) => ((claimed = true), ack(envelope)), {
          consumerName: 'b',
          visibility: 200,
        }),
      );
      await waitUntil(() => claimed, 'member b claimed it');
      await expect(first?.keepAlive?.extend()).rejects.toThrow(/no longer this consumer's/);
      released.open();
    });
  });
});
