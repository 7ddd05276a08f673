import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { suite as ordered } from '../../bench/ordered.js';
import { suite as transport } from '../../bench/transport.js';
import { NATS_SERVICE } from '../support/nats.js';
import { findService } from '../support/services.js';

const postgres = await findService({
  variable: 'ONCEMQ_POSTGRES_URL',
  defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
});
const brokers = {
  rabbitmq: await findService({
    variable: 'ONCEMQ_RABBITMQ_URL',
    defaultUrl: 'amqp://guest:guest@127.0.0.1:5672',
  }),
  nats: await findService(NATS_SERVICE),
  'redis-streams': await findService({ variable: 'ONCEMQ_REDIS_URL', defaultUrl: 'redis://127.0.0.1:6379' }),
};
const kafka = await findService({ variable: 'ONCEMQ_KAFKA_URL', defaultUrl: 'kafka://127.0.0.1:9092' });
const transports = [
  'local',
  ...Object.entries(brokers)
    .filter(([, service]) => service.available)
    .map(([name]) => name),
];

/**
 * The benchmark suites run end to end on a few messages: every row is produced with a positive rate,
 * and each drain's effects were checked by the suite itself (it throws when the points credited do
 * not match the messages drained). No timing is asserted.
 */
describe.skipIf(!postgres.available)('bench suites transport and ordered', () => {
  it('produces a raw and an oncemq row per transport and shape, with rates and ratios', async () => {
    const results = await transport.run({
      seconds: 1,
      flags: { transport: transports.join(','), messages: '30', repetitions: '2', batch: '5' },
    });
    const names = results.map((row) => row.name);
    for (const name of transports) {
      for (const suffix of ['', ':batch']) {
        expect(names).toContain(`raw:${name}${suffix}`);
        expect(names).toContain(`oncemq:${name}${suffix}`);
      }
    }
    for (const row of results) {
      expect(row.messagesPerSecond, row.name).toBeGreaterThan(0);
      expect(row.messages, row.name).toBe(60);
      expect(row.warmupMessages, row.name).toBe(30);
      expect(row.peakRssMb, row.name).toBeGreaterThan(0);
      if (row.name.startsWith('oncemq:')) {
        expect(row.baseline, row.name).toBe(row.name.replace(/^oncemq:/, 'raw:'));
        expect(row.ratio, row.name).toBeGreaterThan(0);
        expect(row.ratios, row.name).toHaveLength(2);
      }
    }
  }, 180_000);

  it.skipIf(!kafka.available)(
    'Kafka rows: every drain of both shapes has its effects, the oncemq rows reading records stored with the keys the transport writes',
    async () => {
      // The suite throws when an oncemq outcome is not `executed` (a record without its key header is
      // not) or when the points credited differ from the messages drained.
      const results = await transport.run({
        seconds: 1,
        flags: { transport: 'kafka', messages: '30', repetitions: '2', batch: '5', warmup: '10' },
      });
      expect(results.map((row) => row.name)).toEqual([
        'raw:kafka',
        'oncemq:kafka',
        'raw:kafka:batch',
        'oncemq:kafka:batch',
      ]);
      for (const row of results) expect(row.messages, row.name).toBe(60);
    },
    180_000,
  );

  it('writes a CPU profile of the consuming side of each timed drain when asked, none of the warm-up', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oncemq-bench-profile-'));
    try {
      await transport.run({
        seconds: 1,
        flags: { transport: 'local', shape: 'single', messages: '20', repetitions: '2', profile: dir },
      });
      const files = (await readdir(dir)).sort();
      expect(files.map((file) => file.replace(/^.*-local-/, ''))).toEqual([
        'oncemq_local-r0.cpuprofile',
        'oncemq_local-r1.cpuprofile',
        'raw_local-r0.cpuprofile',
        'raw_local-r1.cpuprofile',
      ]);
      const profile = JSON.parse(await readFile(join(dir, files[0] ?? ''), 'utf8')) as { nodes: unknown[] };
      expect(profile.nodes.length).toBeGreaterThan(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('adds the transport without the pipeline to the one-by-one rows when asked to split the gap', async () => {
    const results = await transport.run({
      seconds: 1,
      flags: { transport: 'local', messages: '20', repetitions: '2', warmup: '0', batch: '5', split: '1' },
    });
    expect(results.map((row) => row.name)).toEqual([
      'raw:local',
      'oncemq:local',
      'oncemq-transport:local',
      'raw:local:batch',
      'oncemq:local:batch',
    ]);
    const split = results[2];
    expect(split?.baseline).toBe('raw:local');
    expect(split?.messages).toBe(40);
    expect(split?.ratios).toHaveLength(2);
  }, 60_000);

  it('refuses a negative warm-up, naming the flag', async () => {
    await expect(transport.run({ seconds: 1, flags: { transport: 'local', warmup: '-1' } })).rejects.toThrow(
      /--flag warmup=-1: expected a whole number >= 0/,
    );
  });

  it('produces the ordered and unordered rows on the local broker, none out of order', async () => {
    const results = await ordered.run({
      seconds: 1,
      flags: { transport: 'local', messages: '60', repetitions: '1', keys: '10' },
    });
    expect(results.map((row) => row.name)).toEqual(['oncemq:ordered', 'oncemq:unordered']);
    for (const row of results) expect(row.messagesPerSecond, row.name).toBeGreaterThan(0);
    expect(results[0]?.note).toContain(', 0 out of order');
    expect(results[0]?.baseline).toBe('oncemq:unordered');
  }, 60_000);

  it('refuses a transport it does not know, naming the ones it does', async () => {
    await expect(transport.run({ seconds: 1, flags: { transport: 'carrier-pigeon' } })).rejects.toThrow(
      /unknown 'carrier-pigeon'; expected some of rabbitmq, nats, redis-streams, local/,
    );
  });
});
