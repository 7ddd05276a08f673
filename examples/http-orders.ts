// The HTTP edge in an Express app on PostgreSQL: POST /orders with an Idempotency-Key creates one order
// however often the client retries it, and every retry gets the first response back. docs/http.md
// quotes the part between the region markers.
import express from 'express';
import { createHttpEdge, expressIdempotency, httpContext, keepRawBody } from 'oncemq/http';
import { PostgresLedger, type PgClientLike, type PgPoolLike } from 'oncemq/postgres';

// #region example
export function ordersApp(pool: PgPoolLike, schema = 'public') {
  const edge = createHttpEdge<PgClientLike>({
    ledger: new PostgresLedger({ pool, schema }), // the ledger lives in the business database
    principal: (request) => request.headers['x-api-client'], // whose keys: never another client's
  });
  const app = express();
  app.post(
    '/orders',
    express.json({ verify: keepRawBody }), // the parsed body for the handler, the raw bytes for the edge
    expressIdempotency(edge), // 400 without a key, the stored response for a key seen before, …
    async (req, res) => {
      const ctx = httpContext<PgClientLike>(req);
      // ctx.tx is the claim's transaction: the order, the claim and the stored response commit together
      const { rows } = await ctx.tx.query(`INSERT INTO "${schema}".orders (item) VALUES ($1) RETURNING id`, [
        (req.body as { item: string }).item,
      ]);
      const { id } = rows[0] as { id: number };
      res.status(201).location(`/orders/${id}`).json({ id });
    },
  );
  return app;
}
// #endregion example
