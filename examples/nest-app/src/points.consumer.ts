import { Injectable } from '@nestjs/common';
import type { HandlerContext } from 'oncemq';
import { OncemqConsumer } from 'oncemq/nest';
import type { PgClientLike } from 'oncemq/postgres';
import { POINTS_TABLE } from './database.module';

export interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy of the event
  userId: string;
  amount: number;
}

/** Credits 100 points per payment, once per event however many copies the broker delivers. */
@Injectable()
export class PointsConsumer {
  @OncemqConsumer<PaymentSucceeded>({
    group: 'points',
    topics: 'payment-succeeded',
    key: { jsonPath: 'eventId' },
  })
  async credit(event: PaymentSucceeded, ctx: HandlerContext<PgClientLike>) {
    // ctx.tx is the claim's transaction: the ledger row and the points commit together.
    await ctx.tx.query(
      `INSERT INTO ${POINTS_TABLE} (user_id, balance) VALUES ($1, 100)
       ON CONFLICT (user_id) DO UPDATE SET balance = points.balance + 100`,
      [event.userId],
    );
  }
}
