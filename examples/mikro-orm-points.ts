// The payment-to-points consumer written with MikroORM: each payment-succeeded event adds 100 points
// to its user, once, however often the broker delivers it. docs/orm/mikro-orm.md quotes the part
// between the region markers.
import { EntitySchema, LockMode, type EntityManager, type MikroORM } from '@mikro-orm/core';
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql';
import { createEnvelope, createPipeline, type Envelope } from 'oncemq';
import { mikroOrmLedger } from 'oncemq/mikro-orm';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

export interface Points {
  userId: string;
  balance: number;
}

export const PointsEntity = new EntitySchema<Points>({
  name: 'Points',
  properties: {
    userId: { type: 'string', primary: true },
    balance: { type: 'number' },
  },
});

export function pointsConsumer(orm: MikroORM) {
  return createPipeline<EntityManager, PaymentSucceeded>({
    ledger: mikroOrmLedger(orm.em), // the ledger lives in the business database
    group: 'points', // the same event is applied once per consumer group
    key: { jsonPath: 'eventId' },
    handler: async (event, ctx) => {
      // ctx.tx is the EntityManager of the claim's transaction, flushed before it commits with the ledger row
      const lockMode = LockMode.PESSIMISTIC_WRITE;
      const points = await ctx.tx.findOne(PointsEntity, { userId: event.userId }, { lockMode });
      if (points) points.balance += 100;
      else ctx.tx.create(PointsEntity, { userId: event.userId, balance: 100 });
    },
  });
}
// #endregion example

/** Delivers one event three times, as a broker may after a lost ack and a producer retry. */
export async function run(orm: MikroORM): Promise<{ actions: string[]; balance: number }> {
  const consumer = pointsConsumer(orm);
  const copy = (brokerId: string, deliveryCount: number): Envelope =>
    createEnvelope({
      brokerId,
      topic: 'payments',
      body: { eventId: 'pay-1', userId: 'alice' },
      deliveryCount,
    });
  const actions: string[] = [];
  for (const envelope of [copy('offset-7', 1), copy('offset-7', 2), copy('offset-9', 1)]) {
    const outcome = await consumer.process(envelope);
    actions.push(`${outcome.kind}${outcome.kind === 'duplicate' ? ` (${outcome.source})` : ''}`);
  }
  const alice = await orm.em.fork().findOne(PointsEntity, { userId: 'alice' });
  return { actions, balance: alice?.balance ?? 0 };
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const orm = await PostgresOrm.init({
    clientUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    entities: [PointsEntity],
    // the ledger's tables are no entities: keep the schema generator from dropping them
    schemaGenerator: { skipTables: ['oncemq_ledger', 'oncemq_ledger_schema'] },
  });
  await orm.schema.updateSchema({ safe: true });
  console.log(await run(orm));
  await orm.close();
}
