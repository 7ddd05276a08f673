// Another producer's business keys on RabbitMQ, sent in every AMQP field-table type amqplib can write,
// through the real pipeline on a SQLite ledger: each key is applied once when it can be read exactly,
// and is an invalid-key dead letter (never merged with another key) when it cannot.
import Database from 'better-sqlite3';
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, KEY_HEADER, type Outcome } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { waitFor } from '../support/internal.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';

const service = await findRabbit();

/**
 * Each sample: the key header as amqplib encodes it, and what the pipeline must make of it. No AMQP
 * decimal: RabbitMQ 3.10 cannot store one in a stream (the topic's log), and closes the producer's
 * connection (`function_clause` in `rabbit_msg_record:from_091`); docs/transports/rabbitmq.md says so.
 */
const SAMPLES: readonly { readonly name: string; readonly value: unknown; readonly expected: string }[] = [
  { name: 'long string', value: 'order-1', expected: 'order-1' },
  { name: 'byte array, UTF-8', value: Buffer.from('order-2'), expected: 'order-2' },
  { name: 'byte array, not UTF-8 (ff)', value: Buffer.from([0x6b, 0xff]), expected: 'invalid-key' },
  { name: 'byte array, not UTF-8 (fe)', value: Buffer.from([0x6b, 0xfe]), expected: 'invalid-key' },
  { name: 'int8', value: { '!': 'int8', value: -7 }, expected: '-7' },
  { name: 'uint8', value: { '!': 'uint8', value: 200 }, expected: '200' },
  { name: 'int16', value: { '!': 'int16', value: -30000 }, expected: '-30000' },
  { name: 'uint16', value: { '!': 'uint16', value: 60000 }, expected: '60000' },
  { name: 'int32', value: { '!': 'int32', value: -2000000000 }, expected: '-2000000000' },
  { name: 'uint32', value: { '!': 'uint32', value: 4000000000 }, expected: '4000000000' },
  { name: 'int64, safe', value: { '!': 'int64', value: 9007199254740991n }, expected: '9007199254740991' },
  { name: 'int64, 2^53 + 1', value: { '!': 'int64', value: 9007199254740993n }, expected: 'invalid-key' },
  { name: 'int64, 2^53', value: { '!': 'int64', value: 9007199254740992n }, expected: 'invalid-key' },
  { name: 'float', value: { '!': 'float', value: 1.5 }, expected: 'invalid-key' },
  { name: 'double', value: { '!': 'double', value: 2.5 }, expected: 'invalid-key' },
  { name: 'boolean', value: true, expected: 'invalid-key' },
  { name: 'timestamp', value: { '!': 'timestamp', value: 1700000000 }, expected: 'invalid-key' },
  { name: 'table', value: { id: 'order-3' }, expected: 'invalid-key' },
  { name: 'array', value: ['order-4'], expected: 'invalid-key' },
  { name: 'void', value: null, expected: 'invalid-key' },
];

describe.skipIf(!service.available)('RabbitMQ: another producer’s key header in every AMQP type', () => {
  let world: RabbitWorld;
  let db: Database.Database;

  beforeEach(async () => {
    world = await rabbitWorld(service.url);
    db = new Database(':memory:');
    db.exec('CREATE TABLE effects (key TEXT NOT NULL, body TEXT NOT NULL)');
  });

  afterEach(async () => {
    await world.cleanup();
    db.close();
  });

  it('applies each key read exactly once, dead-letters the others as invalid-key with what they were', async () => {
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<Database.Database>({
      ledger: new SqliteLedger({ database: db }),
      group: 'foreign',
      decode: 'text',
      onOutcome: (outcome) => void outcomes.push(outcome),
      handler: (message, ctx) => {
        ctx.tx.prepare('INSERT INTO effects VALUES (?, ?)').run(ctx.key, message);
      },
    });
    await world.transport.subscribe('foreign', ['payments'], pipeline);
    const connection = await amqplib.connect(service.url);
    try {
      const channel = await connection.createConfirmChannel();
      for (const sample of SAMPLES) {
        channel.publish(world.prefix, 'payments', Buffer.from(sample.name), {
          headers: { [KEY_HEADER]: sample.value },
        });
      }
      await channel.waitForConfirms();
    } finally {
      await connection.close();
    }
    await waitFor(() => outcomes.length >= SAMPLES.length, 'every foreign message', 20_000);

    const applied = db.prepare('SELECT key, body FROM effects').all() as { key: string; body: string }[];
    const letters = await world.transport.deadLetters.list({ group: 'foreign' });
    const read = new Map<string, string>([
      ...applied.map(({ key, body }) => [body, key] as [string, string]),
      ...letters.map((letter) => [new TextDecoder().decode(letter.body), letter.reason] as [string, string]),
    ]);
    expect(Object.fromEntries(read)).toEqual(
      Object.fromEntries(SAMPLES.map((sample) => [sample.name, sample.expected])),
    );
    expect(applied).toHaveLength(SAMPLES.filter((sample) => sample.expected !== 'invalid-key').length);
    const bigger = letters.find((letter) => new TextDecoder().decode(letter.body) === 'int64, 2^53 + 1');
    expect(bigger?.error).toMatch(/header 'oncemq-key' is a number that is not an integer within/);
    const bytes = letters.find(
      (letter) => new TextDecoder().decode(letter.body) === 'byte array, not UTF-8 (ff)',
    );
    expect(bytes?.error).toMatch(/bytes that are not UTF-8/);
  });
});
