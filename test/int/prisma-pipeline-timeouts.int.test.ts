// A pipeline on Prisma and transaction timeouts: a handler past the claim's timeout, Prisma's own, a write
// still running, the isolation level, a transaction a database error aborted, and the maintenance lock.
import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError, createPipeline } from 'oncemq';
import type { BridgedLedger } from 'oncemq/prisma';
import { payment, paymentEnvelope, sleep, type PaymentSucceeded } from '../support/points.js';
import { onEachPrismaDatabase, openPrismaWorldEach, type PrismaWorld } from '../support/prisma-pipeline.js';
import type { PostgresPrismaTx } from '../support/prisma.js';

const event = payment(1);

function describePrismaTimeouts<Tx>(name: string, open: () => Promise<PrismaWorld<Tx>>, skip: boolean): void {
  describe.skipIf(skip)(`a Prisma pipeline on ${name}`, () => {
    let world: PrismaWorld<Tx>;
    openPrismaWorldEach(open, (opened) => (world = opened));

    const points = (
      ledger: BridgedLedger<Tx>,
      handler?: (message: PaymentSucceeded, tx: Tx) => Promise<void>,
    ) =>
      createPipeline<Tx, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await (handler ?? ((m, tx) => world.addPoints(tx, m.userId, 100)))(message, ctx.tx);
        },
      });

    /** The first claims on a new client compile Prisma's query plans: run one through before timing any. */
    const warmUp = async (ledger: BridgedLedger<Tx>): Promise<void> => {
      const warm = payment(99);
      for (let attempt = 1; attempt <= 5; attempt++) {
        const outcome = await points(ledger).process(
          paymentEnvelope(warm, `broker-${warm.eventId}`, attempt),
        );
        if (outcome.kind === 'executed') return;
      }
      throw new Error('the warm-up delivery never executed');
    };

    it('rolls back and retries, never acks, a claim whose handler finishes past the timeout, whether or not it writes again; the redelivery applies it once', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 500 } });
      const late = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(600);
      });
      await warmUp(short);
      const first = await late.process(paymentEnvelope(event));
      expect(first.kind).toBe('retry');
      const error = (first as { error?: unknown }).error;
      expect(error).toBeInstanceOf(LedgerUnavailableError);
      expect((error as Error).message).toMatch(/past transactionOptions\.timeout \(500ms\)/);
      const writing = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(600);
        await world.addPoints(tx, message.userId, 100);
      });
      const second = await writing.process(paymentEnvelope(event, `broker-${event.eventId}`, 2));
      expect(second.kind).toBe('retry');
      expect(await world.balance(event.userId)).toBe(0);
      expect((await short.get('points', event.eventId))?.status).not.toBe('SUCCESS');
      const quick = await points(short).process(paymentEnvelope(event, `broker-${event.eventId}`, 3));
      expect(quick.kind).toBe('executed');
      expect(await world.balance(event.userId)).toBe(100);
      expect(await world.ledgerRows()).toBe(2); // the first claim and this key
    });

    it('leaves a handler that does not return to Prisma’s own timeout, twice the claim’s: a retry, nothing applied', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 200 } });
      const stuck = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(700);
      });
      const outcome = await stuck.process(paymentEnvelope(event));
      expect(outcome.kind).toBe('retry');
      expect(((outcome as { error?: unknown }).error as Error).message).toMatch(
        /timeout for this transaction was 400 ms/,
      );
      expect(await world.balance(event.userId)).toBe(0);
    });

    it('rolls back a Prisma write that was still running at the timeout with the rest of the claim: none of it escapes', async () => {
      // Prisma's own timeout does not wait for an operation in flight: on MariaDB an upsert (a read,
      // then a write) held up by a lock across it would write after Prisma's rollback, outside the
      // transaction. The claim's deadline is oncemq's, checked once the handler has returned.
      const short = await world.ledgerWith({
        transactionOptions: { timeout: 400, isolationLevel: 'Serializable' },
      });
      await warmUp(short);
      await world.appTransaction(async (trx) => {
        await world.addPoints(trx, event.userId, 5);
      });
      const release = await world.namespace.lockPoints(event.userId);
      const processing = points(short).process(paymentEnvelope(event));
      await sleep(600);
      await release();
      const outcome = await processing;
      expect(outcome.kind).toBe('retry');
      expect(await world.balance(event.userId)).toBe(5);
      expect(await short.get('points', event.eventId)).toBeUndefined();
    });

    it('gives claims its own timeout (30s by default), not the client’s', async () => {
      const ledger = await world.ledgerWith({}, { transactionOptions: { timeout: 200 } });
      const slow = points(ledger, async (message, tx) => {
        await sleep(500);
        await world.addPoints(tx, message.userId, 100);
      });
      expect((await slow.process(paymentEnvelope(event))).kind).toBe('executed');
      expect(await world.balance(event.userId)).toBe(100);
    });

    it.skipIf(name !== 'PostgreSQL through Prisma')(
      'runs claims at the configured isolation level',
      async () => {
        const ledger = await world.ledgerWith({ transactionOptions: { isolationLevel: 'Serializable' } });
        const seen: string[] = [];
        const pipeline = points(ledger, async (message, tx) => {
          seen.push(await world.isolation(tx));
          await world.addPoints(tx, message.userId, 100);
        });
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
        expect(seen).toEqual(['serializable']);
      },
    );

    it.skipIf(name !== 'PostgreSQL through Prisma')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Prisma transaction',
      async () => {
        const pipeline = points(world.ledger, async (message, tx) => {
          await world.addPoints(tx, message.userId, 100);
          await (tx as PostgresPrismaTx).$queryRawUnsafe('SELECT 1/0').catch(() => undefined);
        });
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await world.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await world.balances()).toEqual({});
      },
    );

    it('keeps the maintenance lock past the transaction timeout, on a connection Prisma does not take back', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 300 } });
      const other = await world.ledgerWith({ transactionOptions: { timeout: 300 } });
      const lock = await short.tryMaintenanceLock();
      expect(lock).toBeDefined();
      await sleep(800);
      expect(await other.tryMaintenanceLock()).toBeUndefined();
      await lock?.release();
      const next = await other.tryMaintenanceLock();
      expect(next).toBeDefined();
      await next?.release();
    });
  });
}

onEachPrismaDatabase(describePrismaTimeouts);
