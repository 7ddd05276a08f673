/** The application's settings, from the environment. */
export const settings = {
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  /** Schema of the points table and of oncemq's ledger. */
  schema: process.env.DB_SCHEMA ?? 'public',
  /** First part of the RabbitMQ queue names (and the exchange). */
  queuePrefix: process.env.QUEUE_PREFIX ?? 'nest-app',
};
