// A pipeline on MikroORM and its transactions: the claim's EntityManager and flush, the application's own
// transaction, the outbox, transactions disabled and a transaction a database error aborted.
import { MikroORM as MysqlOrm } from '@mikro-orm/mysql';
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql';
import { type EntityManager, type MikroORM } from '@mikro-orm/core';
import { describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, createRelay, type OutgoingMessage } from 'oncemq';
import { mikroOrmBridge, mikroOrmLedger } from 'oncemq/mikro-orm';
import {
  MIKRO_ORM_DATABASES,
  mikroOrmPipelineScope,
  mysql,
  postgres,
  type World,
} from '../support/mikro-orm-pipeline.js';
import { payment, paymentEnvelope, paymentEvents, pointsRequest } from '../support/points.js';

for (const [database, open, available] of MIKRO_ORM_DATABASES) {
  describe.skipIf(!available)(`a pipeline on MikroORM (${database})`, () => {
    let w: World;
    const { credit, balances, config } = mikroOrmPipelineScope(open, (opened) => (w = opened));

    it('hands the handler the EntityManager of a MikroORM transaction, flushes it in the claim, and applies each event once however many copies arrive', async () => {
      const seen = new Set<EntityManager>();
      const pipeline = createPipeline(
        config((event, ctx) => {
          expect(ctx.tx.isInTransaction()).toBe(true);
          seen.add(ctx.tx);
          credit(ctx.tx, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      // a fresh EntityManager per transaction: no identity map shared between messages
      expect(seen.size).toBe(20);
      expect(seen.has(w.orm.em)).toBe(false);
      expect(await w.orm.em.fork().count(w.credits)).toBe(20);
      const total = Object.values(await balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline(
        config(async (event, ctx) => {
          credit(ctx.tx, event);
          await ctx.tx.flush();
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(7);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await balances()).toEqual({ [event.userId]: 100 });
    });

    it('answers retry when the flush after the handler fails, and the claim rolls back with it', async () => {
      const pipeline = createPipeline(
        config((event, ctx) => {
          ctx.tx.create(w.credits, { eventId: event.eventId, userId: event.userId, amount: null as never });
        }),
      );
      const event = payment(8);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await balances()).toEqual({});
    });

    it('claims inside a MikroORM transaction of the application, which commits or rolls back the claim with its own writes', async () => {
      const event = payment(3);
      const request = {
        group: 'points',
        key: event.eventId,
        fingerprint: null,
        brokerId: 'b',
        topic: 'payments',
        leaseMs: 30_000,
      };
      await expect(
        w.orm.em.fork().transactional(async (em) => {
          const result = await w.ledger.join(em).transaction(request, (tx) => {
            expect(tx).toBe(em);
            credit(tx, event);
            return Promise.resolve(null);
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await balances()).toEqual({});

      await w.orm.em.fork().transactional(async (em) => {
        await w.ledger.join(em).transaction(request, (tx) => {
          credit(tx, event);
          return Promise.resolve(null);
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.orm.em
        .fork()
        .transactional((em) => w.ledger.join(em).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the MikroORM transaction, relays them through the ORM, and refuses an EntityManager outside a transaction', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      const bridge = mikroOrmBridge(w.orm.em);
      await outbox.migrate(bridge);
      const pending = async (): Promise<string[]> => {
        const rows = (await w.orm.em
          .getConnection()
          .execute(`SELECT business_key FROM ${w.outboxTable} WHERE sent_at IS NULL ORDER BY id`)) as {
          business_key: string;
        }[];
        return rows.map((r) => r.business_key);
      };
      await expect(
        w.orm.em.fork().transactional(async (em) => {
          await outbox.add(em, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      let ended: EntityManager | undefined;
      await w.orm.em.fork().transactional(async (em) => {
        ended = em;
        await outbox.add(em, { topic: 'points-added', key: 'committed', body: { n: 2 } });
      });
      expect(await pending()).toEqual(['committed']);

      for (const bare of [w.orm.em, w.orm.em.fork(), ended as EntityManager]) {
        expect(() => w.ledger.join(bare)).toThrow(ConfigError);
        await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
          /expected the EntityManager of a MikroORM transaction/,
        );
      }
      expect(await pending()).toEqual(['committed']);

      const sent: OutgoingMessage[] = [];
      const relay = createRelay({
        outbox,
        database: bridge,
        listen: false,
        transport: {
          name: 'memory',
          publish: (message) => {
            sent.push(message);
            return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
          },
        },
      });
      expect(await relay.runOnce()).toEqual({ claimed: 1, published: 1, failed: 0 });
      expect(sent.map((m) => m.key)).toEqual(['committed']);
      expect(await pending()).toEqual([]);
    });

    it('refuses to claim through an ORM whose transactions are disabled, running no handler', async () => {
      const Orm = database === 'PostgreSQL' ? PostgresOrm : MysqlOrm;
      const url = database === 'PostgreSQL' ? postgres.url : mysql.url;
      const orm: MikroORM = await Orm.init({
        clientUrl: url,
        entities: [w.credits],
        disableTransactions: true,
      });
      try {
        const ledger = mikroOrmLedger(orm.em, { ...w.where, migrate: false });
        let ran = false;
        const request = { ...pointsRequest('no-tx'), group: 'points' };
        await expect(
          ledger.transaction(request, () => {
            ran = true;
            return Promise.resolve(null);
          }),
        ).rejects.toThrow(/expected the EntityManager of a MikroORM transaction/);
        expect(ran).toBe(false);
        expect(await w.ledger.get('points', 'no-tx')).toBeUndefined();
      } finally {
        await orm.close();
      }
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the MikroORM transaction',
      async () => {
        const pipeline = createPipeline(
          config(async (event, ctx) => {
            credit(ctx.tx, event);
            await ctx.tx.flush();
            await ctx.tx
              .getConnection()
              .execute('SELECT 1/0', [], 'all', ctx.tx.getTransactionContext())
              .catch(() => undefined);
          }),
        );
        const event = payment(9);
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await balances()).toEqual({});
      },
    );
  });
}
