// pino and console as they are: every outcome's log line carries group, key, brokerId, attempt and
// outcome, as properties of pino's JSON line and as the fields object console prints.
import { Console } from 'node:console';
import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createEnvelope, createPipeline, KEY_HEADER, type LoggerLike } from 'oncemq';
import { MemoryLedger } from '../support/memory-ledger.js';

function sink(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
}

async function runOutcomes(logger: LoggerLike): Promise<void> {
  const pipeline = createPipeline({
    ledger: new MemoryLedger(),
    group: 'mailer',
    logger,
    telemetry: false,
    handler: () => undefined,
  });
  const envelope = (brokerId: string, body: unknown) =>
    createEnvelope({ brokerId, topic: 'mails', body: body as object, headers: { [KEY_HEADER]: 'm-1' } });
  await pipeline.process(envelope('b-1', { to: 'a' })); // executed
  await pipeline.process(envelope('b-1', { to: 'a' })); // duplicate (redelivery)
  await pipeline.process(envelope('b-2', { to: 'b' })); // conflict
}

describe('loggers taken as they are', () => {
  it('pino: one JSON line per outcome with group, key, brokerId, attempt and outcome', async () => {
    const out = sink();
    await runOutcomes(pino({ level: 'debug' }, out.stream));
    await new Promise((resolve) => setImmediate(resolve));
    const lines = out
      .text()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const outcomeLines = lines.filter((line) => line.outcome !== undefined);
    expect(outcomeLines.map((line) => [line.outcome, line.msg])).toEqual([
      ['executed', 'oncemq: executed'],
      ['duplicate', 'oncemq: duplicate'],
      ['conflict', 'oncemq: dead-lettered (conflict)'],
    ]);
    for (const line of outcomeLines) {
      expect(line).toMatchObject({ group: 'mailer', key: 'm-1', attempt: 1 });
      expect(['b-1', 'b-2']).toContain(line.brokerId);
    }
    expect(outcomeLines[1]?.source).toBe('redelivery');
  });

  it('console: the message, then the fields object', async () => {
    const out = sink();
    await runOutcomes(new Console({ stdout: out.stream, stderr: out.stream }));
    const text = out.text().replace(/\s+/g, ' ');
    expect(text).toContain(
      "oncemq: executed { group: 'mailer', key: 'm-1', brokerId: 'b-1', attempt: 1, outcome: 'executed'",
    );
    expect(text).toContain(
      "oncemq: duplicate { group: 'mailer', key: 'm-1', brokerId: 'b-1', attempt: 1, outcome: 'duplicate'",
    );
    expect(text).toContain('oncemq: dead-lettered (conflict)');
    expect(text).toContain("outcome: 'conflict'");
  });
});
