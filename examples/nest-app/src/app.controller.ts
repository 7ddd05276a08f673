import { Body, Controller, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import type { Transport } from 'oncemq';
import { InjectTransport } from 'oncemq/nest';
import { Pool } from 'pg';
import { PG_POOL, POINTS_TABLE } from './database.module';
import type { PaymentSucceeded } from './points.consumer';

@Controller()
export class AppController {
  constructor(
    @InjectTransport() private readonly transport: Transport,
    @Inject(PG_POOL) private readonly pool: Pool,
  ) {}

  /** Publishes a payment event; the broker's confirm is awaited. */
  @Post('payments')
  @HttpCode(202)
  async pay(@Body() payment: PaymentSucceeded) {
    const receipt = await this.transport.publish({
      topic: 'payment-succeeded',
      key: payment.eventId,
      body: payment,
    });
    return { brokerId: receipt.brokerId };
  }

  @Get('points/:userId')
  async points(@Param('userId') userId: string) {
    const { rows } = await this.pool.query<{ balance: number }>(
      `SELECT balance FROM ${POINTS_TABLE} WHERE user_id = $1`,
      [userId],
    );
    return { userId, balance: rows[0]?.balance ?? 0 };
  }
}
