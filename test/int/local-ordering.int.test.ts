import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Outcome, type Pipeline } from 'oncemq';
import type { LocalBroker, LocalSubscription } from 'oncemq/local';
import { SqliteLedger } from 'oncemq/sqlite';
import { FaultInjector } from 'oncemq/testing';
import { testBroker, waitUntil } from '../support/local-points.js';
import { scratchDir } from '../support/points.js';

/** An order moves through create → pay → ship; each event is keyed by its own id, ordered by the order id. */
interface OrderEvent {
  readonly eventId: string;
  readonly orderId: string;
  readonly type: 'create' | 'pay' | 'ship';
}

const STEPS = ['create', 'pay', 'ship'] as const;
const BEFORE: Readonly<Record<OrderEvent['type'], string | null>> = {
  create: null,
  pay: 'created',
  ship: 'paid',
};
const AFTER: Readonly<Record<OrderEvent['type'], string>> = {
  create: 'created',
  pay: 'paid',
  ship: 'shipped',
};

/** The order service's database: the ledger and the orders in one SQLite file. */
class Orders {
  readonly db: Database.Database;
  readonly ledger: SqliteLedger<Database.Database>;
  /** Events applied to an order that was not in the state before them. */
  outOfOrder = 0;
  readonly outcomes: Outcome[] = [];

  constructor(dir: string) {
    this.db = new Database(join(dir, 'orders.db'));
    this.db.pragma('journal_mode = WAL');
    this.db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, steps INTEGER NOT NULL)');
    this.ledger = new SqliteLedger({ database: this.db });
  }

  pipeline(options: { retry?: RetryPolicy; onHandler?: (event: OrderEvent) => void } = {}): Pipeline {
    return createPipeline<Database.Database, OrderEvent>({
      ledger: this.ledger,
      group: 'fulfilment',
      key: { jsonPath: 'eventId' },
      retry: options.retry ?? new RetryPolicy({ delays: ['20ms', '20ms', '20ms', '20ms'] }),
      onOutcome: (outcome) => this.outcomes.push(outcome),
      handler: (event, ctx) => {
        options.onHandler?.(event);
        const before = BEFORE[event.type];
        const changed =
          before === null
            ? ctx.tx
                .prepare("INSERT INTO orders VALUES (?, 'created', 1) ON CONFLICT DO NOTHING")
                .run(event.orderId).changes
            : ctx.tx
                .prepare('UPDATE orders SET status = ?, steps = steps + 1 WHERE id = ? AND status = ?')
                .run(AFTER[event.type], event.orderId, before).changes;
        if (changed === 0) this.outOfOrder++;
      },
    });
  }

  status(orderId: string): string | undefined {
    return (
      this.db.prepare('SELECT status FROM orders WHERE id = ?').get(orderId) as { status: string } | undefined
    )?.status;
  }

  count(status: string): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM orders WHERE status = ?').get(status) as { n: number })
      .n;
  }
}

async function publishOrders(
  broker: LocalBroker,
  orders: number,
  poison: (id: string) => boolean = () => false,
) {
  for (const step of STEPS) {
    for (let i = 0; i < orders; i++) {
      const orderId = `order-${i}`;
      const event: OrderEvent = { eventId: `${orderId}-${step}`, orderId, type: step };
      await broker.publish({
        topic: 'orders',
        key: event.eventId,
        orderingKey: orderId,
        body: poison(event.eventId) ? '{"eventId": ' : event,
      });
    }
  }
}

describe('per-key ordered consumption on the local broker', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  let orders: Orders;
  const subscriptions: LocalSubscription[] = [];

  beforeEach(() => {
    scratch = scratchDir();
    orders = new Orders(scratch.dir);
  });

  afterEach(async () => {
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await broker.close();
    await orders.ledger.close();
    orders.db.close();
    scratch.remove();
  });

  it('applies create → pay → ship in order for every order, exactly once, under every fault', async () => {
    const injector = new FaultInjector({
      seed: 7,
      faults: ['producer-ack-loss', 'consumer-ack-loss', 'crash-after-commit', 'rebalance', 'handler-crash'],
      rates: { 'handler-crash': 0.1, rebalance: 0.05 },
    });
    broker = testBroker(scratch.dir, { faults: injector, pullBatchSize: 16 });
    const ORDERS = 120;
    await publishOrders(broker, ORDERS);
    for (const name of ['a', 'b']) {
      subscriptions.push(
        await broker.subscribe(
          'fulfilment',
          ['orders'],
          orders.pipeline({ onHandler: (event) => injector.handlerCrash(event.eventId) }),
          { consumerName: name, ordering: {}, concurrency: 4 },
        ),
      );
    }
    await waitUntil(() => orders.count('shipped') === ORDERS, 'every order shipped', 60_000);
    expect(orders.outOfOrder).toBe(0);
    const steps = orders.db.prepare('SELECT DISTINCT steps FROM orders').all() as { steps: number }[];
    expect(steps).toEqual([{ steps: 3 }]);
    expect(injector.counts()['handler-crash']).toBeGreaterThan(0);
    // Retries happened in place: nothing went through the group's retry topic.
    expect(await broker.messages('%RETRY%fulfilment')).toEqual([]);
  });

  it('dead-letters a message that used up its retries, and its key goes on', async () => {
    broker = testBroker(scratch.dir);
    await publishOrders(broker, 3);
    subscriptions.push(
      await broker.subscribe(
        'fulfilment',
        ['orders'],
        orders.pipeline({
          retry: new RetryPolicy({ delays: ['10ms', '10ms'] }),
          onHandler: (event) => {
            if (event.eventId === 'order-1-pay') throw new Error('payment service down');
          },
        }),
        { ordering: {} },
      ),
    );
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'fulfilment' })).length === 1,
      'the dead letter',
    );
    await waitUntil(() => orders.count('shipped') === 2, 'the other orders shipped');
    const [dead] = await broker.deadLetters.list({ group: 'fulfilment' });
    expect(dead).toMatchObject({ key: 'order-1-pay', reason: 'retries-exhausted', deliveryCount: 3 });
    // order-1's ship ran after its pay was dead-lettered: the key went on (and found the order unpaid).
    await waitUntil(() => orders.outcomes.some((o) => o.key === 'order-1-ship'), 'order-1 ship');
    expect(orders.status('order-1')).toBe('created');
  });

  it("with onExhausted 'block', keeps the key blocked behind its failing message while other keys go on", async () => {
    broker = testBroker(scratch.dir);
    await publishOrders(broker, 3);
    let healed = false;
    subscriptions.push(
      await broker.subscribe(
        'fulfilment',
        ['orders'],
        orders.pipeline({
          retry: new RetryPolicy({ delays: ['10ms'] }),
          onHandler: (event) => {
            if (event.eventId === 'order-1-pay' && !healed) throw new Error('payment service down');
          },
        }),
        { ordering: { onExhausted: 'block', blockedRetryEvery: '50ms' } },
      ),
    );
    await waitUntil(() => orders.count('shipped') === 2, 'the other orders shipped');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(orders.status('order-1')).toBe('created');
    expect(orders.outcomes.some((o) => o.key === 'order-1-ship')).toBe(false);
    expect(await broker.deadLetters.list({ group: 'fulfilment' })).toEqual([]);
    healed = true;
    await waitUntil(() => orders.status('order-1') === 'shipped', 'order-1 shipped once the cause is fixed');
    expect(orders.outOfOrder).toBe(0);
  });

  it('dead-letters a poison message of a key and goes on with the key', async () => {
    broker = testBroker(scratch.dir);
    await publishOrders(broker, 2, (id) => id === 'order-0-create');
    subscriptions.push(await broker.subscribe('fulfilment', ['orders'], orders.pipeline(), { ordering: {} }));
    await waitUntil(() => orders.count('shipped') === 1, 'order-1 shipped');
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'fulfilment' })).length === 1,
      'the poison',
    );
    const [dead] = await broker.deadLetters.list({ group: 'fulfilment' });
    expect(dead).toMatchObject({ reason: 'malformed' });
  });

  it('refuses a broker configured with another queue count on an existing topic, naming both', async () => {
    broker = testBroker(scratch.dir, { queues: 2 });
    await broker.publish({ topic: 'orders', key: 'order-1-create', orderingKey: 'order-1', body: {} });
    const four = testBroker(scratch.dir, { queues: 4 });
    try {
      await expect(
        four.publish({ topic: 'orders', key: 'order-1-pay', orderingKey: 'order-1', body: {} }),
      ).rejects.toThrow(/topic 'orders' has 2 queues, .* configured with 4/);
      await expect(
        four.subscribe('fulfilment', ['orders'], orders.pipeline(), {
          ordering: { onPartitionChange: 'drain' },
        }),
      ).rejects.toThrow(/topic 'orders' has 2 queues/);
    } finally {
      await four.close();
    }
    // Left unset, the count is the topic's own.
    const unset = testBroker(scratch.dir);
    try {
      const receipt = await unset.publish({
        topic: 'orders',
        key: 'order-1-pay',
        orderingKey: 'order-1',
        body: {},
      });
      expect(receipt.position).toEqual({
        queue: (
          await broker.publish({ topic: 'orders', key: 'order-1-ship', orderingKey: 'order-1', body: {} })
        ).position?.queue,
      });
    } finally {
      await unset.close();
    }
  });
});
