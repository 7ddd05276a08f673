import { describe, expect, it } from 'vitest';
import { suite } from '../../bench/sqs.js';
import { findPostgres } from '../support/postgres.js';
import { REDIS_SERVICE } from '../support/redis.js';
import { findService } from '../support/services.js';
import { findSqs } from '../support/sqs-lambda.js';

const sqs = await findSqs();
const postgres = await findPostgres();
const redis = await findService(REDIS_SERVICE);

/**
 * The `sqs` suite on a few messages: every row (oncemq's SQS transport among them) drains with a positive rate (the suite checks each
 * drain's effects itself), and the fault run's effect checker finds Powertools applying a stalled
 * record's effect twice and oncemq never. No timing is asserted.
 */
describe.skipIf(!sqs.available || !postgres.available || !redis.available)('bench suite sqs', () => {
  it('drains every row, and the fault run applies an effect twice with Powertools only', async () => {
    const results = await suite.run({
      seconds: 1,
      flags: { messages: '30', repetitions: '1', warmup: '0', pollers: '1', faultKeys: '10' },
    });
    const rates = Object.fromEntries(results.map((result) => [result.name, result.messagesPerSecond]));
    for (const name of ['raw:sqs', 'oncemq:sqs', 'oncemq:sqs:lambda', 'peer:powertools:sqs']) {
      expect(rates[name]).toBeGreaterThan(0);
    }
    const notes = Object.fromEntries(results.map((result) => [result.name, result.note ?? '']));
    expect(notes['fault:oncemq:sqs:lambda']).toMatch(/stalled 2, applied twice 0, missing 0/);
    expect(notes['fault:peer:powertools:sqs']).toMatch(/stalled 2, applied twice 2, missing 0/);
  }, 240_000);
});
