import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from 'redis';
import { DOCTOR_SETTINGS, findingOf, statuses } from '../support/doctor.js';
import { brokerFindings, type BrokerTarget } from '../support/internal.js';
import { OwnRedisServer } from '../support/redis-server.js';

/** A redis-server of the suite's own: its eviction and persistence are changed at will (never the shared one's). */
// In a directory of its own: the test turns the AOF on, which writes files there.
const dir = mkdtempSync(join(tmpdir(), 'oncemq-doctor-redis-'));
const available = await OwnRedisServer.start([
  '--dir',
  dir,
  '--maxmemory-policy',
  'allkeys-lru',
  '--maxmemory',
  '100mb',
]).then(
  (server) => server,
  (error: unknown) => {
    if (process.env.CI === 'true') throw error;
    console.warn(`skipping: cannot start redis-server (${String(error)})`);
    return undefined;
  },
);

describe.skipIf(available === undefined)('oncemq doctor: the Redis Streams checks', () => {
  const server = available as OwnRedisServer;
  const client = createClient({ url: server.url });
  const target = (prefix: string): BrokerTarget => ({
    transport: 'redis-streams',
    url: server.url,
    topic: 'orders',
    prefix,
  });
  const settings = { ...DOCTOR_SETTINGS, group: 'points' };

  beforeAll(async () => {
    await client.connect();
    // A stream whose group read 2 of 5 entries before someone trimmed it to nothing.
    await client.sendCommand(['XGROUP', 'CREATE', 'dbad:stream:orders', 'points', '0', 'MKSTREAM']);
    for (let i = 0; i < 5; i++) await client.sendCommand(['XADD', 'dbad:stream:orders', '*', 'n', String(i)]);
    await client.sendCommand([
      'XREADGROUP',
      'GROUP',
      'points',
      'c1',
      'COUNT',
      '2',
      'STREAMS',
      'dbad:stream:orders',
      '>',
    ]);
    await client.sendCommand(['XTRIM', 'dbad:stream:orders', 'MAXLEN', '0']);
    // A sound one: read and acked, nothing trimmed.
    await client.sendCommand(['XGROUP', 'CREATE', 'dok:stream:orders', 'points', '0', 'MKSTREAM']);
    await client.sendCommand(['XADD', 'dok:stream:orders', '*', 'n', '1']);
  });

  afterAll(async () => {
    client.destroy();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails an allkeys eviction policy, a stream trimmed past what the group read, and warns without persistence', async () => {
    await client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru']);
    const findings = await brokerFindings(target('dbad'), settings);
    expect(findingOf(findings, 'redis-streams.maxmemory-policy')).toMatchObject({
      status: 'fail',
      detail: { maxmemoryPolicy: 'allkeys-lru' },
    });
    expect(findingOf(findings, 'redis-streams.persistence').status).toBe('warn');
    expect(findingOf(findings, 'redis-streams.trim').status).toBe('fail');
  });

  it('fails a volatile eviction policy only while a stream has a TTL', async () => {
    await client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru']);
    await client.sendCommand(['PEXPIRE', 'dok:stream:orders', '3600000']);
    const withTtl = await brokerFindings(target('dok'), settings);
    expect(findingOf(withTtl, 'redis-streams.maxmemory-policy')).toMatchObject({
      status: 'fail',
      detail: { keysWithTtl: ['dok:stream:orders'] },
    });
    await client.sendCommand(['PERSIST', 'dok:stream:orders']);
    const withoutTtl = await brokerFindings(target('dok'), settings);
    expect(findingOf(withoutTtl, 'redis-streams.maxmemory-policy').status).toBe('ok');
  });

  it('passes noeviction with the AOF on and an untrimmed stream', async () => {
    await client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']);
    await client.sendCommand(['CONFIG', 'SET', 'appendonly', 'yes']);
    try {
      const findings = await brokerFindings(target('dok'), settings);
      expect(statuses(findings)).toEqual({
        'redis-streams.maxmemory-policy': 'ok',
        'redis-streams.persistence': 'ok',
        'redis-streams.stream': 'ok',
        'redis-streams.trim': 'ok',
      });
    } finally {
      await client.sendCommand(['CONFIG', 'SET', 'appendonly', 'no']);
    }
  });

  it('fails a stream and a group that are not there, and creates nothing', async () => {
    const noStream = await brokerFindings(target('absent'), settings);
    expect(findingOf(noStream, 'redis-streams.stream').status).toBe('fail');
    expect(await client.exists('absent:stream:orders')).toBe(0);
    const noGroup = await brokerFindings(target('dok'), { ...settings, group: 'nobody' });
    expect(findingOf(noGroup, 'redis-streams.group').status).toBe('fail');
  });

  it('skips, with the reason, when Redis cannot be reached', async () => {
    const findings = await brokerFindings({ ...target('dok'), url: 'redis://127.0.0.1:1' }, settings);
    expect(findings.map(({ check, status }) => ({ check, status }))).toEqual([
      { check: 'redis-streams.reachable', status: 'skip' },
    ]);
  });
});
