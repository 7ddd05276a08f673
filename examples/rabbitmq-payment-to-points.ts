// The payment-to-points consumer on RabbitMQ with a PostgreSQL ledger: each payment-succeeded event
// adds 100 points to its user once, however often RabbitMQ delivers it. docs/transports/rabbitmq.md
// quotes the part between the region markers.
import pg from 'pg';
import { createPipeline } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { RabbitTransport } from 'oncemq/rabbitmq';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

export async function startPointsConsumer(pool: pg.Pool, transport: RabbitTransport, schema = 'public') {
  await pool.query(
    `CREATE TABLE IF NOT EXISTS "${schema}".points (user_id text PRIMARY KEY, balance int NOT NULL)`,
  );
  const ledger = new PostgresLedger({ pool, schema }); // the ledger lives in the business database
  const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
    ledger,
    group: 'points', // one RabbitMQ queue per group: oncemq.points
    key: { jsonPath: 'eventId' },
    handler: async (event, ctx) => {
      // ctx.tx is the claim's transaction: the ledger row and the points commit together
      await ctx.tx.query(
        `INSERT INTO "${schema}".points VALUES ($1, 100)
         ON CONFLICT (user_id) DO UPDATE SET balance = points.balance + 100`,
        [event.userId],
      );
    },
  });
  // Acks after the commit, retries through the delay queues, dead-letters to oncemq.points@dead.
  return transport.subscribe('points', ['payment-succeeded'], pipeline, { concurrency: 16 });
}
// #endregion example

/** Publishes one payment three times (a producer retry and a resend) and reads alice's balance. */
export async function run(options: {
  readonly databaseUrl: string;
  readonly rabbitUrl: string;
  readonly schema?: string;
  /** Names of the exchange and queues, so that a run never meets another's. @default 'oncemq' */
  readonly prefix?: string;
}): Promise<{ balance: number; transport: RabbitTransport }> {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 4 });
  const prefix = options.prefix ?? 'oncemq';
  const transport = new RabbitTransport({ url: options.rabbitUrl, prefix, exchange: prefix });
  try {
    await startPointsConsumer(pool, transport, options.schema);
    const event: PaymentSucceeded = { eventId: 'pay-1', userId: 'alice' };
    for (let copy = 0; copy < 3; copy++) {
      await transport.publish({ topic: 'payment-succeeded', key: event.eventId, body: event });
    }
    const schema = options.schema ?? 'public';
    let balance = 0;
    for (let wait = 0; wait < 100 && balance === 0; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const { rows } = await pool.query<{ balance: number }>(
        `SELECT balance FROM "${schema}".points WHERE user_id = 'alice'`,
      );
      balance = rows[0]?.balance ?? 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 300)); // the two duplicates arrive and are acked
    return { balance, transport };
  } finally {
    await transport.close();
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { balance } = await run({
    databaseUrl: process.env.ONCEMQ_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    rabbitUrl: process.env.ONCEMQ_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  });
  console.log({ balance });
}
