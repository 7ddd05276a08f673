import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createEnvelope,
  createPipeline,
  LedgerUnavailableError,
  PermanentError,
  type DeliveryKeepAlive,
  type Envelope,
  type Ledger,
  type Outcome,
} from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { payment, paymentEnvelope, scratchFileEachTest, sleep } from '../support/points.js';

const key = { jsonPath: 'eventId' } as const;
const unprintable = (): never => {
  throw Object.create(null) as Error;
};

/** The ledger as it is, but for the methods given. */
function overriding<L extends Ledger>(ledger: L, methods: Partial<Record<keyof Ledger, unknown>>): L {
  return new Proxy(ledger, {
    get(target, property, receiver) {
      if (property in methods) return methods[property as keyof Ledger];
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('whatever a user function throws, process() answers with an outcome', () => {
  const scratch = scratchFileEachTest('app.db');
  let ledger: SqliteLedger;

  beforeEach(() => {
    ledger = new SqliteLedger({ database: scratch.path });
  });

  afterEach(async () => {
    await ledger.close();
  });

  const outcomeOf = (
    config: Partial<Parameters<typeof createPipeline>[0]>,
    envelope: Envelope = paymentEnvelope(payment(1)),
  ): Promise<Outcome> =>
    createPipeline({ ledger, group: 'points', key, handler: () => undefined, ...config }).process(envelope);

  it('a decoder, key function or fingerprint that throws a value without a prototype is a dead letter', async () => {
    expect(await outcomeOf({ decode: unprintable })).toMatchObject({ kind: 'dead', reason: 'malformed' });
    expect(await outcomeOf({ key: unprintable })).toMatchObject({ kind: 'dead', reason: 'invalid-key' });
    expect(await outcomeOf({ fingerprint: unprintable })).toMatchObject({
      kind: 'dead',
      reason: 'malformed',
    });
  });

  it('a handler that throws a value without a prototype is retried, in both modes', async () => {
    for (const mode of ['transactional', 'leased'] as const) {
      const outcome = await outcomeOf(
        { mode, handler: unprintable },
        paymentEnvelope(payment(2), `b-${mode}`),
      );
      expect(outcome).toMatchObject({ kind: 'retry', action: 'retry', nextDeliveryCount: 2 });
    }
  });

  it('an onOutcome listener or a logger that throws changes nothing', async () => {
    const logger = { debug: unprintable, info: unprintable, warn: unprintable, error: unprintable };
    expect(await outcomeOf({ onOutcome: unprintable, logger })).toMatchObject({ kind: 'executed' });
    expect(await outcomeOf({ onOutcome: unprintable, logger })).toMatchObject({ kind: 'duplicate' });
  });

  it('a message keyed by a header with a body that does not decode is dead-lettered under its key', async () => {
    const envelope = createEnvelope({
      brokerId: 'b-1',
      topic: 'payments',
      headers: { 'oncemq-key': 'evt-9' },
      body: '{"eventId": ',
    });
    const outcome = await outcomeOf({ key: { header: 'oncemq-key' } }, envelope);
    expect(outcome).toMatchObject({ kind: 'dead', reason: 'malformed', key: 'evt-9' });
  });

  it('a transactional result that cannot be stored rolls back and is dead-lettered with a reason', async () => {
    const outcome = await outcomeOf({ handler: () => 10n });
    expect(outcome).toMatchObject({ kind: 'dead', reason: 'permanent-error' });
    expect(String((outcome as { error: unknown }).error)).toMatch(/cannot store the handler's result/);
  });
});

describe('retries are charged to the message only when its handler failed', () => {
  const scratch = scratchFileEachTest('app.db');

  it('a busy key and an unreachable ledger keep the delivery count; a failed handler adds one', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const leased = createPipeline({ ledger, group: 'mail', mode: 'leased', key, handler: () => gate });
    const running = leased.process(paymentEnvelope(payment(1), 'b-1', 3));
    await sleep(50);
    const busy = await leased.process(paymentEnvelope(payment(1), 'b-2', 3));
    expect(busy).toMatchObject({ kind: 'busy', deliveryCount: 3, nextDeliveryCount: 3 });
    release();
    await running;

    const away = overriding(ledger, {
      transaction: () => Promise.reject(new LedgerUnavailableError('database away')),
    });
    const outage = await createPipeline({
      ledger: away,
      group: 'points',
      key,
      handler: () => undefined,
    }).process(paymentEnvelope(payment(2), 'b-3', 3));
    expect(outage).toMatchObject({ kind: 'retry', deliveryCount: 3, nextDeliveryCount: 3 });

    const failing = await createPipeline({
      ledger,
      group: 'points',
      key,
      handler: () => {
        throw new Error('downstream down');
      },
    }).process(paymentEnvelope(payment(3), 'b-4', 3));
    expect(failing).toMatchObject({ kind: 'retry', deliveryCount: 3, nextDeliveryCount: 4 });
    await ledger.close();
  });
});

describe('a lease whose renewals fail', () => {
  const scratch = scratchFileEachTest('app.db');

  it('aborts the handler before any rival can take the key, and the retry is not charged', async () => {
    const owner = new SqliteLedger({ database: scratch.path });
    const rival = new SqliteLedger({ database: scratch.path });
    const slow = overriding(owner, { renew: () => Promise.reject(new Error('database slow')) });
    let abortedAt = 0;
    const first = createPipeline({
      ledger: slow,
      group: 'mail',
      mode: 'leased',
      key,
      lease: 300,
      renewEvery: 100,
      handler: (_message, ctx) =>
        new Promise<void>((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            abortedAt = Date.now();
            reject(ctx.signal.reason as Error);
          });
        }),
    }).process(paymentEnvelope(payment(1)));
    const second = createPipeline({
      ledger: rival,
      group: 'mail',
      mode: 'leased',
      key,
      handler: () => 'rival',
    });
    let rivalWonAt = 0;
    const deadline = Date.now() + 5000;
    while (rivalWonAt === 0 && Date.now() < deadline) {
      const outcome = await second.process(paymentEnvelope(payment(1), 'copy'));
      if (outcome.kind === 'executed') rivalWonAt = Date.now();
      else await sleep(10);
    }
    expect(abortedAt).toBeGreaterThan(0);
    expect(rivalWonAt).toBeGreaterThan(0);
    expect(abortedAt).toBeLessThanOrEqual(rivalWonAt);
    expect(await first).toMatchObject({ kind: 'retry', nextDeliveryCount: 1 });
    await owner.close();
    await rival.close();
  });
});

describe('a running handler keeps its delivery alive at the broker', () => {
  const scratch = scratchFileEachTest('app.db');

  it('extends the delivery while the handler runs, in both modes, and stops after', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    for (const mode of ['transactional', 'leased'] as const) {
      let extensions = 0;
      const keepAlive: DeliveryKeepAlive = {
        everyMs: 50,
        extend: () => {
          extensions++;
          return Promise.resolve();
        },
      };
      const event = payment(mode === 'leased' ? 1 : 2);
      const envelope = createEnvelope({ brokerId: `b-${mode}`, topic: 'payments', body: event, keepAlive });
      const outcome = await createPipeline({
        ledger,
        group: 'points',
        mode,
        key,
        handler: () => sleep(400),
      }).process(envelope);
      expect(outcome.kind).toBe('executed');
      expect(extensions).toBeGreaterThanOrEqual(3);
      const after = extensions;
      await sleep(200);
      expect(extensions).toBe(after);
    }
    await ledger.close();
  });
});

describe('what the ledger cannot store', () => {
  const scratch = scratchFileEachTest('app.db');

  it('a leased result past the ledger limit completes without it; duplicates get no result', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    const pipeline = createPipeline({
      ledger,
      group: 'mail',
      mode: 'leased',
      key,
      handler: () => 'x'.repeat(1_100_000),
    });
    expect(await pipeline.process(paymentEnvelope(payment(1)))).toMatchObject({ kind: 'executed' });
    expect(await ledger.get('mail', 'evt-1')).toMatchObject({ status: 'SUCCESS', result: null });
    const duplicate = await pipeline.process(paymentEnvelope(payment(1), 'copy'));
    expect(duplicate).toMatchObject({ kind: 'duplicate' });
    expect((duplicate as { result?: unknown }).result).toBeUndefined();
    await ledger.close();
  });

  it('a claim the ledger refuses for good is a dead letter, not a retry', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    const refusing = overriding(ledger, {
      claim: () => Promise.reject(new PermanentError('invalid-key', 'the ledger cannot store this key')),
    });
    const outcome = await createPipeline({
      ledger: refusing,
      group: 'mail',
      mode: 'leased',
      key,
      handler: () => undefined,
    }).process(paymentEnvelope(payment(1)));
    expect(outcome).toMatchObject({ kind: 'dead', reason: 'invalid-key' });
    await ledger.close();
  });

  it('a broker id past the stored limit still tells a redelivery from a republish', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    const pipeline = createPipeline({ ledger, group: 'points', key, handler: () => undefined });
    const long = 'b'.repeat(2000);
    expect(await pipeline.process(paymentEnvelope(payment(1), long))).toMatchObject({ kind: 'executed' });
    expect(await pipeline.process(paymentEnvelope(payment(1), long))).toMatchObject({
      kind: 'duplicate',
      source: 'redelivery',
    });
    expect(await pipeline.process(paymentEnvelope(payment(1), `${long}-other`))).toMatchObject({
      kind: 'duplicate',
      source: 'republish',
    });
    await ledger.close();
  });
});
