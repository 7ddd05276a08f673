import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope } from 'oncemq';
import { keyOf, outcomeFor } from '../support/internal.js';
import { buildPackage, runNode } from '../support/built-package.js';
import { waitUntil } from '../support/local-points.js';
import { REDIS_SERVICE } from '../support/redis.js';
import { proxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);

interface LetterJson {
  id: string;
  group: string;
  key: string;
  reason: string;
  error: string;
  body: string;
  deliveryCount: number;
}

describe.skipIf(!service.available)('oncemq dlq --transport redis-streams', () => {
  let build: ReturnType<typeof buildPackage>;
  const cli = (): string => join(build.dir, 'cli', 'oncemq.js');

  beforeAll(() => {
    build = buildPackage();
  });

  afterAll(() => {
    build.remove();
  });

  it('lists dead letters with reason and error, replays one to its group only, and purges', async () => {
    const streams = await proxiedStreams('node-redis', service.url);
    const { transport, prefix } = streams;
    const url = `${service.url}?prefix=${prefix}`;
    const dlq = (...args: string[]) =>
      runNode(cli(), ['dlq', ...args, '--transport', 'redis-streams', '--url', url, '--group', 'points']);
    try {
      const seen: string[] = [];
      const audit: string[] = [];
      let healed = false;
      await transport.subscribe('points', ['payments'], (envelope: Envelope) => {
        seen.push(keyOf(envelope) ?? '');
        return Promise.resolve(outcomeFor(envelope, healed ? 'ack' : 'dead-letter', 0));
      });
      await transport.subscribe('audit', ['payments'], (envelope: Envelope) => {
        audit.push(keyOf(envelope) ?? '');
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      });
      await transport.publish({ topic: 'payments', key: 'evt-1', body: 'garbage' });
      await transport.publish({ topic: 'payments', key: 'evt-2', body: 'garbage' });
      await waitUntil(
        async () =>
          (await transport.deadLetters.list({ group: 'points' })).length === 2 && audit.length === 2,
        'the dead letters',
      );

      const list = await dlq('list', '--json');
      expect(list.code).toBe(0);
      const letters = JSON.parse(list.stdout) as LetterJson[];
      expect(letters.map((letter) => letter.key)).toEqual(['evt-1', 'evt-2']);
      expect(letters[0]).toMatchObject({ group: 'points', reason: 'permanent-error', body: 'garbage' });
      expect(letters[0]?.error).toMatch(/conformance: poison/);

      healed = true;
      const replay = await dlq('replay', String(letters[0]?.id));
      expect(replay.stdout).toMatch(/replayed 1 of 1/);
      expect(replay.code).toBe(0);
      expect((await dlq('replay', String(letters[0]?.id))).code).toBe(1);
      await waitUntil(() => seen.length === 3, 'the replayed copy');
      expect(seen.at(-1)).toBe('evt-1');
      expect(audit).toEqual(['evt-1', 'evt-2']);

      const purge = await dlq('purge', '--all');
      expect(purge.stdout).toMatch(/purged 1 of 1/);
      expect((await dlq('list')).stdout).toMatch(/no dead letters/);
    } finally {
      await streams.close();
    }
  });

  it('refuses a group that never subscribed under the prefix, and a Redis it cannot reach, in one line each', async () => {
    const missing = await runNode(cli(), [
      'dlq',
      'list',
      '--transport',
      'redis-streams',
      '--url',
      `${service.url}?prefix=oncemq-test-nothing-here`,
      '--group',
      'points',
    ]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/oncemq-test-nothing-here:retry:points \(no such stream\)/);
    const unreachable = await runNode(cli(), [
      'dlq',
      'list',
      '--transport',
      'redis-streams',
      '--url',
      'redis://127.0.0.1:1',
      '--group',
      'points',
    ]);
    expect(unreachable.code).not.toBe(0);
    expect(unreachable.stderr).toMatch(/cannot connect to Redis at redis:\/\/127\.0\.0\.1:1/);
  });
});
