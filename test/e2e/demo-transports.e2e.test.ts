import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { findRunBroker } from '../support/run-services.js';

beforeAll(() => {
  buildCli();
}, 180_000);

afterAll(() => {
  removeCli();
});

interface DemoJson {
  events: number;
  effects: number;
  transport: string;
  duplicates: { redelivery: number; republish: number; concurrent: number };
  deadLetterReasons: Record<string, number>;
  doubleEffects: number;
  lostEffects: number;
  ledgerRows: number;
  connectionDrops: number;
  faults: Record<string, number>;
  ok: boolean;
}

for (const transport of ['rabbitmq', 'nats', 'redis-streams', 'kafka', 'rocketmq', 'sqs']) {
  const broker = await findRunBroker(transport);
  describe.skipIf(!broker.available)(`oncemq demo --transport ${transport}`, () => {
    it('applies every event once through dropped connections, resent publishes and acks lost after commit (exit 0)', async () => {
      // A run takes 3–60 s; one that hangs is killed with its output kept, before the test's own timeout.
      const run = await oncemq(
        ['demo', '--transport', transport, '--events', '400', '--consumers', '3', '--seed', '1', '--json'],
        {},
        150_000,
      );
      expect(run.stderr).not.toContain('Error');
      // Printed JSON on a killed run means the demo finished and the process did not exit.
      expect(run.code, `${run.stderr}\n--- stdout ---\n${run.stdout.slice(0, 2000)}`).toBe(0);
      const result = JSON.parse(run.stdout) as DemoJson;
      expect(result.transport).toBe(transport);
      expect(result.ok).toBe(true);
      expect(result.effects).toBe(400);
      expect(result.ledgerRows).toBe(400);
      expect(result.doubleEffects).toBe(0);
      expect(result.lostEffects).toBe(0);
      // the faults did happen, and their copies were absorbed
      expect(result.faults['producer-ack-loss']).toBeGreaterThan(0);
      expect(result.faults['consumer-ack-loss']).toBeGreaterThan(0);
      expect(result.connectionDrops).toBeGreaterThan(0);
      expect(result.duplicates.redelivery).toBeGreaterThan(0);
      // seed 1 publishes a poison message: dead-lettered with its reason, never applied
      expect(result.faults.poison).toBeGreaterThan(0);
      expect(result.deadLetterReasons.malformed).toBeGreaterThanOrEqual(result.faults.poison ?? 1);
    }, 180_000);
  });
}

describe('oncemq demo --transport', () => {
  it('refuses a transport it cannot run on, naming the ones it can (exit 2)', async () => {
    const run = await oncemq(['demo', '--transport', 'carrier-pigeon', '--events', '10']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      "--transport 'carrier-pigeon' is not available; use local, rabbitmq, nats, redis-streams, kafka, rocketmq, sqs",
    );
  });
});
