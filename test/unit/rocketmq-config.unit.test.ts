import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { RocketMQTransport } from 'oncemq/rocketmq';
import {
  invisibleMs,
  parseRocketMQUrl,
  resolveRocketMQSettings,
  UnchargedRetries,
} from '../support/internal.js';

describe('RocketMQ transport configuration', () => {
  it('reads the proxy endpoint, the name server and the namespace from the URL', () => {
    expect(parseRocketMQUrl('rocketmq://10.0.0.5:8081?namesrv=10.0.0.6:9876&namespace=prod')).toEqual({
      endpoints: '10.0.0.5:8081',
      nameServer: '10.0.0.6:9876',
      namespace: 'prod',
    });
    expect(parseRocketMQUrl('rocketmq://proxy')).toEqual({
      endpoints: 'proxy:8081',
      nameServer: 'proxy:9876',
      namespace: '',
    });
  });

  it('refuses another scheme, a long poll under 1s and an unknown topology, naming the field', () => {
    expect(() => parseRocketMQUrl('amqp://h')).toThrow(/rocketmq:\/\//);
    expect(() => resolveRocketMQSettings({ longPoll: '500ms' })).toThrow(ConfigError);
    expect(() => resolveRocketMQSettings({ topology: 'make' as 'create' })).toThrow(/topology/);
  });

  it('refuses per-key order without FIFO topics, and a visibility under 1s, before reaching the broker', async () => {
    const transport = new RocketMQTransport({ url: 'rocketmq://127.0.0.1:1' });
    const never = (): Promise<never> => Promise.reject(new Error('never'));
    await expect(transport.subscribe('g', ['t'], never, { ordering: {} })).rejects.toThrow(/fifo: true/);
    await expect(transport.subscribe('g', ['t'], never, { visibility: '500ms' })).rejects.toThrow(
      /visibility/,
    );
    await expect(transport.subscribe('g', ['no spaces'], never)).rejects.toThrow(/topic name/);
    expect(transport.capabilities).toMatchObject({
      ordering: false,
      brokerDedupWindowMs: 0,
      halfMessages: true,
    });
    expect(new RocketMQTransport({ fifo: true }).capabilities.ordering).toBe(true);
  });

  it('rounds a retry delay up to whole seconds, at least one', () => {
    expect([0, 300, 1000, 1001, 2500].map(invisibleMs)).toEqual([1000, 1000, 1000, 2000, 3000]);
  });

  it('counts the uncharged retries of a message until it is settled, forgetting the oldest past its limit', () => {
    const uncharged = new UnchargedRetries(2);
    uncharged.add('a');
    uncharged.add('a');
    uncharged.add('b');
    expect([uncharged.count('a'), uncharged.count('b')]).toEqual([2, 1]);
    uncharged.add('c');
    expect(uncharged.count('a')).toBe(0);
    uncharged.forget('b');
    expect(uncharged.count('b')).toBe(0);
  });
});
