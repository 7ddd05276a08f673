import { Module } from '@nestjs/common';
import { OncemqModule } from 'oncemq/nest';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { RabbitTransport } from 'oncemq/rabbitmq';
import type { Pool } from 'pg';
import { AppController } from './app.controller';
import { DatabaseModule, PG_POOL } from './database.module';
import { PointsConsumer } from './points.consumer';
import { settings } from './settings';

@Module({
  imports: [
    DatabaseModule,
    OncemqModule.forRootAsync<PgClientLike>({
      imports: [DatabaseModule],
      inject: [PG_POOL],
      useFactory: (pool: Pool) => ({
        // Functions: the module creates the ledger and the transport, and closes them at shutdown.
        // The pool stays the application's (DatabaseModule ends it).
        ledger: () => new PostgresLedger({ pool, schema: settings.schema }),
        transport: () =>
          new RabbitTransport({
            url: settings.amqpUrl,
            prefix: settings.queuePrefix,
            exchange: settings.queuePrefix,
          }),
      }),
    }),
  ],
  controllers: [AppController],
  providers: [PointsConsumer],
})
export class AppModule {}
