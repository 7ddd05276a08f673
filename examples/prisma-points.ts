// The payment-to-points consumer written with Prisma: each payment-succeeded event adds 100 points to
// its user once, however often it is delivered; the handler writes with Prisma's model API on the
// claim's interactive transaction. docs/orm/prisma.md quotes the part between the region markers.
// The client is generated from test/support/prisma/postgres.prisma (model Point { userId String @id
// @map("user_id"); balance Int }, @@map("points")) into a git-ignored folder.
import { createEnvelope, createPipeline, type Outcome } from 'oncemq';
import { prismaLedger, type PrismaLedgerConfig } from 'oncemq/prisma';
import type { Prisma, PrismaClient } from '../test/support/prisma/generated/postgres/client.js';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

export function pointsConsumer(prisma: PrismaClient, options: PrismaLedgerConfig = {}) {
  return createPipeline<Prisma.TransactionClient, PaymentSucceeded>({
    ledger: prismaLedger(prisma, options), // PostgreSQL or MySQL/MariaDB, as the client's schema says
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (event, ctx) => {
      // ctx.tx is Prisma's transaction client: the ledger row and the points commit together
      await ctx.tx.point.upsert({
        where: { userId: event.userId },
        create: { userId: event.userId, balance: 100 },
        update: { balance: { increment: 100 } },
      });
    },
  });
}
// #endregion example

/** Delivers one payment three times (a redelivery, then a republish) and answers the outcomes and the balance. */
export async function run(
  prisma: PrismaClient,
  options: PrismaLedgerConfig = {},
): Promise<{ kinds: Outcome['kind'][]; balance: number }> {
  const consumer = pointsConsumer(prisma, options);
  const event: PaymentSucceeded = { eventId: 'pay-1', userId: 'alice' };
  const kinds: Outcome['kind'][] = [];
  for (const brokerId of ['m-1', 'm-1', 'm-2']) {
    kinds.push((await consumer.process(createEnvelope({ brokerId, topic: 'payments', body: event }))).kind);
  }
  const row = await prisma.point.findUnique({ where: { userId: 'alice' } });
  return { kinds, balance: row?.balance ?? 0 };
}
