// The RabbitMQ transport's configuration and naming: checked at construction, no broker needed.
import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { DEFAULT_RABBITMQ_DELAY_LEVELS, RabbitTransport } from 'oncemq/rabbitmq';
import { delayLevel, RabbitNames } from '../support/internal.js';

describe('RabbitMQ transport configuration', () => {
  it.each([
    [{ url: 'http://127.0.0.1:5672' }, 'url'],
    [{ prefix: 'amq.mine' }, 'prefix'],
    [{ exchange: 'has space' }, 'exchange'],
    [{ topology: 'maybe' as 'check' }, 'topology'],
    [{ queueType: 'lazy' as 'classic' }, 'queueType'],
    [{ delayLevels: ['1s', '500ms'] }, 'delayLevels'],
    [{ delayLevels: [] }, 'delayLevels'],
    [{ retention: '10ms' }, 'retention'],
    [{ publishAttempts: 0 }, 'publishAttempts'],
    [{ reconnectDelay: '5s', maxReconnectDelay: '1s' }, 'maxReconnectDelay'],
  ])('refuses %j at construction, naming the field', (config, field) => {
    expect(() => new RabbitTransport(config)).toThrow(ConfigError);
    expect(() => new RabbitTransport(config)).toThrow(new RegExp(`^${field}`));
  });

  it('refuses a group or topic that cannot name a queue before connecting', async () => {
    const transport = new RabbitTransport();
    await expect(transport.publish({ topic: 'a@b', body: {} })).rejects.toThrow(/not a valid topic/);
    await expect(transport.subscribe('a b', ['t'], () => Promise.reject(new Error('never')))).rejects.toThrow(
      /not a valid consumer group/,
    );
    await transport.close();
  });

  it('waits in the shortest delay level at least as long as the delay, and the longest past it', () => {
    const levels = [100, 1000, 10_000];
    expect([1, 100, 101, 1000, 9999, 10_000, 99_999].map((ms) => delayLevel(levels, ms))).toEqual([
      100, 100, 1000, 1000, 10_000, 10_000, 10_000,
    ]);
    expect(DEFAULT_RABBITMQ_DELAY_LEVELS.slice(3, 6)).toEqual(['1s', '5s', '10s']);
  });

  it('names every queue of a group apart from every other group’s', () => {
    const names = new RabbitNames('oncemq');
    expect([names.work('points'), names.retry('points', 10_000), names.dead('points')]).toEqual([
      'oncemq.points',
      'oncemq.points@retry.10s',
      'oncemq.points@dead',
    ]);
    expect([names.log('payments'), names.ready('points', 'payments')]).toEqual([
      'oncemq@log.payments',
      'oncemq.points@ready.payments',
    ]);
  });
});
