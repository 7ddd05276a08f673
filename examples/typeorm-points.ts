// The payment-to-points consumer written with TypeORM: each payment-succeeded event adds 100 points
// to its user, once, however often the broker delivers it. docs/orm/typeorm.md quotes the part
// between the region markers.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment -- TypeORM types EntitySchema's options as a class; a literal is how its docs give them */
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { createEnvelope, createPipeline, type Envelope } from 'oncemq';
import { typeormLedger } from 'oncemq/typeorm';

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
  columns: {
    userId: { type: String, primary: true, name: 'user_id' },
    balance: { type: Number },
  },
});

export function pointsConsumer(dataSource: DataSource) {
  return createPipeline<EntityManager, PaymentSucceeded>({
    ledger: typeormLedger(dataSource), // the ledger lives in the business database
    group: 'points', // the same event is applied once per consumer group
    key: { jsonPath: 'eventId' },
    handler: async (event, ctx) => {
      // ctx.tx is the EntityManager of the claim's transaction: the ledger row and the points commit together
      const points = ctx.tx.getRepository(PointsEntity);
      const { affected } = await points.increment({ userId: event.userId }, 'balance', 100);
      if (affected === 0) await points.insert({ userId: event.userId, balance: 100 });
    },
  });
}
// #endregion example

/** Delivers one event three times, as a broker may after a lost ack and a producer retry. */
export async function run(dataSource: DataSource): Promise<{ actions: string[]; balance: number }> {
  const consumer = pointsConsumer(dataSource);
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
  const alice = await dataSource.getRepository(PointsEntity).findOneBy({ userId: 'alice' });
  return { actions, balance: alice?.balance ?? 0 };
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const dataSource = new DataSource({
    type: 'postgres',
    url: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    entities: [PointsEntity],
    synchronize: true,
  });
  await dataSource.initialize();
  console.log(await run(dataSource));
  await dataSource.destroy();
}
