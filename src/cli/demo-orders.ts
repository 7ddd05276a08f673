import { createPipeline } from '../consumer/pipeline.js';
import { PermanentError } from '../core/errors.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import { openOutboxSession, type OutboxDatabase, type OutboxSession } from '../outbox/outbox-database.js';
import { createOutbox, type Outbox } from '../outbox/outbox.js';
import { RelayCrash, type RelayFaults } from '../outbox/relay-config.js';
import { injectCommitFailures } from '../testing/commit-failure.js';
import type { EffectChecker } from '../testing/effect-checker.js';
import type { FaultInjector } from '../testing/fault-injector.js';
import type { Processor } from '../transport/transport.js';
import { DEMO_RETRY } from './demo-consumer.js';
import type { DemoStore } from './demo-store.js';
import { SILENT_LOGGER } from '../core/logger.js';
import { setTimeout as sleep } from 'node:timers/promises';

export const ORDERS_GROUP = 'shipping';
export const ORDERS_TOPIC = 'order-events';

/** The steps of an order, in the order the order service writes them. */
export const ORDER_STEPS = ['created', 'paid', 'shipped'] as const;
export type OrderStep = (typeof ORDER_STEPS)[number];

/** The state an order must be in for a step to apply (null: the order is not known yet). */
const PREVIOUS: Readonly<Record<OrderStep, OrderStep | null>> = Object.freeze({
  created: null,
  paid: 'created',
  shipped: 'paid',
});

/** The event the order service writes through the outbox. */
export interface OrderEvent {
  readonly eventId: string;
  readonly orderId: string;
  readonly step: OrderStep;
}

/**
 * The orders scenario's tables: `demo_orders` (the order service's own rows, written with the outbox
 * row), and on the consumer's side `demo_shipments` (one state per order), `demo_order_effects` (one
 * row per applied event, no unique key: a double effect shows as a second row) and
 * `demo_order_anomalies` (one row per event applied in another state than the one its step follows).
 */
const DDL = [
  'CREATE TABLE demo_orders (order_id VARCHAR(64) PRIMARY KEY, state VARCHAR(16) NOT NULL)',
  'CREATE TABLE demo_shipments (order_id VARCHAR(64) PRIMARY KEY, state VARCHAR(16) NOT NULL)',
  'CREATE TABLE demo_order_effects (event_id VARCHAR(200) NOT NULL, order_id VARCHAR(64) NOT NULL)',
  'CREATE TABLE demo_order_anomalies (event_id VARCHAR(200) NOT NULL, order_id VARCHAR(64) NOT NULL, step VARCHAR(16) NOT NULL, found VARCHAR(16))',
];

/** The orders scenario on one demo store: its tables, its outbox, and transactions of its own. */
export interface OrdersDb<Tx = unknown> {
  readonly dialect: SqlDialect<Tx>;
  readonly outbox: Outbox<Tx>;
  /** Transactions on the order service's own connection (and the checks' reads). */
  readonly session: OutboxSession<Tx>;
}

/** SQLite's "database is locked": another connection holds the write lock. */
const isBusy = (error: unknown): boolean =>
  (error as { code?: unknown } | null)?.code === 'SQLITE_BUSY' ||
  /database is locked/.test(String((error as Error | null)?.message));

/**
 * Runs `work`, and again a few milliseconds later while SQLite answers that the write lock is taken,
 * for up to 30 s: the store's SQLite connections never wait for it themselves (a synchronous wait
 * would block the event loop). Server databases wait in their driver and are never busy.
 */
async function whenFree<T>(work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (let wait = 1; ; wait = Math.min(50, wait * 2)) {
    try {
      return await work();
    } catch (error) {
      if (!isBusy(error) || Date.now() > deadline) throw error;
      await sleep(wait);
    }
  }
}

/** A session whose busy transactions are rolled back and run again ({@link whenFree}). */
function patientSession<Tx>(session: OutboxSession<Tx>): OutboxSession<Tx> {
  return { transaction: (work) => whenFree(() => session.transaction(work)) };
}

/** Creates the scenario's tables and the outbox on the store, with a connection for the order service. */
export async function openOrdersDb(store: DemoStore): Promise<OrdersDb> {
  const dialect = store.ledger.dialect;
  if (dialect === undefined) {
    throw new PermanentError('invalid', `the ${store.name} store has no SQL dialect for the outbox`);
  }
  const outbox = createOutbox<unknown>({ ledger: store.ledger });
  const database: OutboxDatabase = await store.openDatabase();
  await whenFree(() => outbox.migrate(database));
  const session = patientSession(openOutboxSession(dialect, database, true));
  for (const statement of DDL) await session.transaction((tx) => dialect.execute(tx, statement, []));
  return { dialect, outbox, session };
}

const count = async (db: OrdersDb, sql: string): Promise<number> =>
  Number((await db.session.transaction((tx) => db.dialect.query(tx, sql, [])))[0]?.n ?? 0);

/** Reads of the scenario's results. */
export const ordersChecks = {
  /** Effect rows per event id. */
  async effectsPerEvent(db: OrdersDb): Promise<Map<string, number>> {
    const rows = await db.session.transaction((tx) =>
      db.dialect.query(tx, 'SELECT event_id, COUNT(*) AS n FROM demo_order_effects GROUP BY event_id', []),
    );
    return new Map(rows.map((row) => [String(row.event_id), Number(row.n)]));
  },
  /** Events with at least one effect row. */
  effectedEvents: (db: OrdersDb): Promise<number> =>
    count(db, 'SELECT COUNT(DISTINCT event_id) AS n FROM demo_order_effects'),
  outOfOrder: (db: OrdersDb): Promise<number> => count(db, 'SELECT COUNT(*) AS n FROM demo_order_anomalies'),
  /** Orders the order service wrote whose shipment is not in state `shipped`. */
  notShipped: (db: OrdersDb): Promise<number> =>
    count(
      db,
      `SELECT COUNT(*) AS n FROM demo_orders o LEFT JOIN demo_shipments s ON s.order_id = o.order_id
        WHERE s.state IS NULL OR s.state <> 'shipped'`,
    ),
  /** Outbox rows not yet marked sent. */
  pending: (db: OrdersDb): Promise<number> =>
    count(db, `SELECT COUNT(*) AS n FROM ${db.outbox.config.messages} WHERE sent_at IS NULL`),
};

/**
 * The order service: for each order, three business transactions (created, paid, shipped), each
 * writing the `demo_orders` row and the event's outbox row together. The steps of neighbouring orders
 * interleave (order i is created, then i-1 paid, then i-2 shipped), so the topic mixes keys. A poison
 * message (a body that does not decode) goes through the outbox too, after the creation the injector
 * picks. Every committed event is announced to the checker.
 */
export async function runOrderService(
  db: OrdersDb,
  orders: number,
  injector: FaultInjector,
  checker: EffectChecker,
): Promise<{ events: number; poisonKeys: string[] }> {
  const { dialect, outbox, session } = db;
  const p = (n: number): string => dialect.placeholder(n);
  const poisonKeys: string[] = [];
  let events = 0;
  const write = async (index: number, step: OrderStep): Promise<void> => {
    const orderId = `order-${index}`;
    const eventId = `${orderId}-${step}`;
    const event: OrderEvent = { eventId, orderId, step };
    await session.transaction(async (tx) => {
      if (step === 'created') {
        await dialect.execute(tx, `INSERT INTO demo_orders (order_id, state) VALUES (${p(1)}, ${p(2)})`, [
          orderId,
          step,
        ]);
      } else {
        await dialect.execute(tx, `UPDATE demo_orders SET state = ${p(1)} WHERE order_id = ${p(2)}`, [
          step,
          orderId,
        ]);
      }
      await outbox.add(tx, { topic: ORDERS_TOPIC, key: eventId, orderingKey: orderId, body: event });
    });
    events++;
    checker.published(eventId);
    if (step === 'created' && injector.poison(eventId)) {
      const key = `poison-${index}`;
      const body = `{"eventId": "${key}", "orderId": `;
      await session.transaction((tx) => outbox.add(tx, { topic: ORDERS_TOPIC, key, body }));
      poisonKeys.push(key);
      checker.published(key, 'dead-letter');
    }
  };
  for (let index = 0; index < orders + ORDER_STEPS.length - 1; index++) {
    for (let lag = 0; lag < ORDER_STEPS.length; lag++) {
      const order = index - lag;
      const step = ORDER_STEPS[lag];
      if (step !== undefined && order >= 0 && order < orders) await write(order, step);
    }
    if (index % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
  }
  return { events, poisonKeys };
}

/**
 * The consumer group's state machine, in the ledger's transaction: an event moves its order's
 * shipment from the state its step follows to the step. An event that finds another state is still
 * applied, and recorded in `demo_order_anomalies`: out of order is counted, never silently fixed.
 */
async function applyStep<Tx>(dialect: SqlDialect<Tx>, tx: Tx, event: OrderEvent): Promise<void> {
  const p = (n: number): string => dialect.placeholder(n);
  if (!(ORDER_STEPS as readonly string[]).includes(event.step) || typeof event.orderId !== 'string') {
    throw new PermanentError('invalid', `not an order event: ${JSON.stringify(event)}`);
  }
  const rows = await dialect.query(tx, `SELECT state FROM demo_shipments WHERE order_id = ${p(1)}`, [
    event.orderId,
  ]);
  const found = rows[0] === undefined ? null : String(rows[0].state);
  if (found !== PREVIOUS[event.step]) {
    await dialect.execute(
      tx,
      `INSERT INTO demo_order_anomalies (event_id, order_id, step, found) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)})`,
      [event.eventId, event.orderId, event.step, found],
    );
  }
  if (rows[0] === undefined) {
    await dialect.execute(tx, `INSERT INTO demo_shipments (order_id, state) VALUES (${p(1)}, ${p(2)})`, [
      event.orderId,
      event.step,
    ]);
  } else {
    await dialect.execute(tx, `UPDATE demo_shipments SET state = ${p(1)} WHERE order_id = ${p(2)}`, [
      event.step,
      event.orderId,
    ]);
  }
  await dialect.execute(tx, `INSERT INTO demo_order_effects (event_id, order_id) VALUES (${p(1)}, ${p(2)})`, [
    event.eventId,
    event.orderId,
  ]);
}

/** The orders consumer: claim and state machine in one transaction, handler crashes and commit failures injected. */
export function ordersConsumer(
  store: DemoStore,
  db: OrdersDb,
  injector: FaultInjector,
  checker: EffectChecker,
): { processor: Processor; deliveries(): number } {
  const pipeline = createPipeline<unknown, OrderEvent>({
    ledger: injector.enabled('commit-failure') ? injectCommitFailures(store.ledger, injector) : store.ledger,
    group: ORDERS_GROUP,
    retry: DEMO_RETRY,
    // The demo's faults fail handlers and commits on purpose: their lines would drown the summary.
    logger: SILENT_LOGGER,
    handler: async (event, ctx) => {
      await applyStep(db.dialect, ctx.tx, event);
      injector.handlerCrash(ctx.key, ctx.attempt);
    },
    onOutcome: (outcome) => {
      checker.observe(outcome);
    },
  });
  return { processor: pipeline, deliveries: () => pipeline.metrics().deliveries };
}

/** The `relay-crash` fault of one relay: its fault hook, and the check its transport runs after a confirm. */
export interface RelayCrashFault {
  readonly faults: RelayFaults;
  /** Throws {@link RelayCrash} after the confirm of a row picked as the first of its round. */
  afterPublish(outboxId: string): void;
}

/**
 * The relay's `relay-crash` fault: the relay dies as `kill -9` would between publish and mark. For a
 * row the injector picks, it dies before publishing it, after the earlier rows of its round went out
 * (none of them is marked sent, the row and the later ones are never sent); when the picked row is
 * the first of its round, right after its confirm instead, so that every crash leaves at least one
 * row published and unmarked. The hook is called for every row of a round in one synchronous pass,
 * so a round is the run of calls before the next microtask.
 */
export function relayCrashFault(injector: FaultInjector): RelayCrashFault {
  let inRound = false;
  let position = 0;
  let picked = false;
  const crashAfter = new Set<string>();
  return {
    faults: {
      beforePublish(row) {
        if (!inRound) {
          inRound = true;
          position = 0;
          picked = false;
          queueMicrotask(() => {
            inRound = false;
          });
        }
        // One crash per round: the rows after a pick of the first row are not asked.
        if (picked || !injector.relayCrash(row.key)) {
          position++;
          return;
        }
        picked = true;
        if (position++ === 0) crashAfter.add(row.id);
        else
          throw new RelayCrash(`relay-crash before ${row.key}, ${position - 1} rows published, none marked`);
      },
    },
    afterPublish(outboxId) {
      if (crashAfter.delete(outboxId)) throw new RelayCrash('relay-crash after a publish, before its mark');
    },
  };
}
