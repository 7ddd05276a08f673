// A pipeline on Prisma and the application's own transactions: join(trx), the outbox, the PrismaClient
// refused where a transaction client is needed, and the rollback check.
import { describe, expect, it } from 'vitest';
import { ConfigError, createPipeline, createRelay, type OutgoingMessage, type PipelineConfig } from 'oncemq';
import { checkRollback, RollbackCheckError } from 'oncemq/testing';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  pointsRequest,
  type PaymentSucceeded,
} from '../support/points.js';
import { describePaymentToPoints } from '../support/points-scenario.js';
import { onEachPrismaDatabase, openPrismaWorldEach, type PrismaWorld } from '../support/prisma-pipeline.js';

const event = payment(1);

function describePrismaPipeline<Tx>(name: string, open: () => Promise<PrismaWorld<Tx>>, skip: boolean): void {
  describePaymentToPoints(name, open, { skip });

  describe.skipIf(skip)(`a Prisma pipeline on ${name}`, () => {
    let world: PrismaWorld<Tx>;
    openPrismaWorldEach(open, (opened) => (world = opened));

    it('claims inside the application’s own Prisma transaction with join(trx): the claim, its work and the application’s write commit together', async () => {
      const request = pointsRequest('order-1');
      await world.appTransaction(async (trx) => {
        await world.recordPayment(trx, 'pay-1', 'alice');
        const claimed = await world.ledger.join(trx).transaction(request, async (tx) => {
          expect(tx).toBe(trx);
          await world.addPoints(tx, 'alice', 100);
          return null;
        });
        expect(claimed.status).toBe('acquired');
      });
      expect(await world.payments()).toBe(1);
      expect(await world.balance('alice')).toBe(100);
      expect(await world.ledger.get('points', 'order-1')).toMatchObject({ status: 'SUCCESS' });
      // the same key claimed again in another application transaction is a duplicate, its work not run
      await world.appTransaction(async (trx) => {
        const again = await world.ledger.join(trx).transaction(request, () => {
          throw new Error('must not run');
        });
        expect(again.status).toBe('duplicate');
      });
      expect(await world.balance('alice')).toBe(100);
    });

    it('rolls the joined claim back with the application’s transaction, and the key can be claimed again', async () => {
      const request = pointsRequest('order-2');
      await expect(
        world.appTransaction(async (trx) => {
          await world.recordPayment(trx, 'pay-2', 'bob');
          const claimed = await world.ledger.join(trx).transaction(request, async (tx) => {
            await world.addPoints(tx, 'bob', 100);
            return null;
          });
          expect(claimed.status).toBe('acquired');
          throw new Error('the application changed its mind');
        }),
      ).rejects.toThrow('the application changed its mind');
      expect(await world.payments()).toBe(0);
      expect(await world.balance('bob')).toBe(0);
      expect(await world.ledger.get('points', 'order-2')).toBeUndefined();
      const retried = await world.ledger.transaction(request, async (tx) => {
        await world.addPoints(tx, 'bob', 100);
        return null;
      });
      expect(retried.status).toBe('acquired');
      expect(await world.balance('bob')).toBe(100);
    });

    it('writes to the outbox with add(trx) only when the Prisma transaction commits, and from a handler with ctx.outbox; the relay publishes them', async () => {
      const { outbox, bridge } = await world.outbox();
      await world.appTransaction((trx) => outbox.add(trx, { topic: 'points', key: 'k-1', body: { n: 1 } }));
      expect(await world.outboxRows()).toBe(1);
      await expect(
        world.appTransaction(async (trx) => {
          await outbox.add(trx, { topic: 'points', key: 'k-2', body: { n: 2 } });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await world.outboxRows()).toBe(1);
      const pipeline = createPipeline<Tx, PaymentSucceeded>({
        ledger: world.ledger,
        outbox,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await world.addPoints(ctx.tx, message.userId, 100);
          await ctx.outbox.add({ topic: 'points-added', key: message.eventId, body: message });
        },
      });
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('duplicate');
      expect(await world.outboxRows()).toBe(2);
      const published: OutgoingMessage[] = [];
      const transport = {
        name: 'memory',
        publish: (message: OutgoingMessage) => {
          published.push(message);
          return Promise.resolve({ brokerId: `m-${published.length}`, topic: message.topic });
        },
      };
      const relay = createRelay({ outbox, transport, database: bridge });
      expect(await relay.runOnce()).toEqual({ claimed: 2, published: 2, failed: 0 });
      expect(published.map((m) => m.key).sort()).toEqual(['evt-1', 'k-1']);
      await relay.stop();
    });

    it('refuses the PrismaClient where a transaction client is required: join, outbox.add and the dialect', async () => {
      const { outbox } = await world.outbox();
      expect(() => world.ledger.join(world.client)).toThrow(ConfigError);
      expect(() => world.ledger.join(world.client)).toThrow(/expected a Prisma transaction client/);
      await expect(outbox.add(world.client, { topic: 'points', key: 'k', body: 'x' })).rejects.toThrow(
        ConfigError,
      );
      expect(() => world.ledger.dialect.query(world.client, 'SELECT 1', [])).toThrow(ConfigError);
      expect(await world.outboxRows()).toBe(0);
    });

    const config = (
      handler: NonNullable<PipelineConfig<Tx, PaymentSucceeded>['handler']>,
    ): PipelineConfig<Tx, PaymentSucceeded> => ({
      ledger: world.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('passes the rollback check when the handler writes with ctx.tx', async () => {
      const report = await checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(message, ctx) {
          await world.addPoints(ctx.tx, message.userId, 100);
        }),
        envelopes: paymentEvents(3, 'ok').map((e) => paymentEnvelope(e)),
        observe: () => world.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
    });

    it('fails the rollback check, naming the handler, when it writes with the PrismaClient instead of ctx.tx', async () => {
      const check = checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsOnThePrismaClient(message) {
          await world.addPoints(world.client, message.userId, 100);
        }),
        envelopes: [paymentEnvelope(event)],
        observe: () => world.balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
      await expect(check).rejects.toThrow(
        /handler 'addPointsOnThePrismaClient' of group 'points' wrote outside/,
      );
    });
  });
}

onEachPrismaDatabase(describePrismaPipeline);
