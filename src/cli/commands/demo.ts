import { FAULT_NAMES, parseFaults } from '../../testing/fault-injector.js';
import { nonNegativeOption, parseOptions, positiveOption, UsageError, type Command } from '../command.js';
import { demoDashboard } from '../dashboard/demo-dashboard.js';
import { DEMO_RETRY, runDemo, type DemoResult } from '../demo-run.js';
import { portOption, untilSignal } from './dashboard.js';
import { DEMO_STORES } from '../demo-store.js';
import { RUN_TRANSPORT_NAMES } from '../run-transports.js';
import { demoSummary } from '../demo-summary.js';
import { ordersSummary } from '../demo-orders-summary.js';
import { progressReporter } from '../progress.js';

/** The scenarios of `--scenario`. */
const SCENARIOS: readonly string[] = ['payments', 'orders', 'webhooks'];

/** Events of `--scenario webhooks` without `--events`. */
const WEBHOOKS_EVENTS = 1000;

const usage = `Usage: oncemq demo [options]

Three scenarios (--scenario). payments (default): the payment-to-points scenario on the embedded
broker (or a real one, --transport): a producer publishes payment-succeeded events (+100 points to the order's user), consumers in one group apply them on a ledger while a
seeded fault injector loses confirms and acks, crashes and rebalances consumers, crashes handlers
mid-write, fails commits after the handler succeeded and slips in poison messages. Then every
effect is checked against what was published. Exits 0 only when no effect is doubled and none is
lost; 1 when one is; 2 for a wrong option.

orders: an order service writes create, pay and ship events for --events / 3 orders, each with its
order row and its outbox row in one transaction; two outbox relays publish them, one killed now and
then between publish and mark (relay-crash) and restarted; a consumer group with per-key ordering
(ordering key: the order id) moves each order's shipment through created → paid → shipped. An event
applied in another state is counted in outOfOrder. Exits 0 only when outOfOrder, doubleEffects and
lostEffects are 0 and every order is shipped. Needs a transport with per-key ordering: local, rabbitmq,
redis-streams, kafka, rocketmq (FIFO topics made for the run) or sqs (FIFO queues made for the run).

webhooks: a webhook sender delivers one payment.succeeded event per --events (default 1000), signed
with Standard Webhooks, to --consumers node:http receivers behind the HTTP edge (oncemq/http, key:
webhook-id, the signature checked before the claim, the points written in the claim's transaction).
It retries on a timeout (400 ms), a 5xx, a 409 and a reset or refused connection, backing off from
20 ms to 640 ms, at most 12 attempts. The faults, over HTTP: crash-after-commit kills a receiver after
its commit, before its 2xx (connections reset, port closed, listening again 100 ms later; rate 0.01
here); consumer-ack-loss drops a 2xx after the commit (the sender times out); handler-crash (500) and
commit-failure (503) as in payments; producer-ack-loss makes the sender send a delivery again after
its 2xx. No broker: --transport is refused. Exits 0 only with 0 double and 0 lost effects.

  --scenario NAME  payments, orders or webhooks (default payments)
  --events N       events to publish (default 10000, webhooks 1000; orders: 3 per order)
  --users N        users the events are spread over (default events / 10; payments and webhooks)
  --consumers N    consumers in the group; webhooks: receivers (default 4)
  --faults LIST    all, none, or names with optional rates: poison,handler-crash=0.1
                   (${FAULT_NAMES.join(', ')};
                   default all)
  --seed S         seed of the fault injector (default 1); see "Same seed, same faults" below
  --store NAME     ledger and business tables: ${DEMO_STORES.join(', ')} (default sqlite);
                   postgres and mysql run in a schema/database made for the run and dropped after it;
                   tiered puts Redis in front of the SQLite ledger (keys deleted after the run)
  --url URL        server of --store postgres|mysql|tiered (default: ONCEMQ_POSTGRES_URL /
                   ONCEMQ_MYSQL_URL / ONCEMQ_REDIS_URL, else the loopback server)
  --transport NAME broker: ${RUN_TRANSPORT_NAMES.join(', ')} (default local, embedded, no server).
                   On a real broker the consumers reach it through a TCP proxy the demo cuts every
                   1.5 s; a lost confirm is resent with the same key; an ack is lost after a commit
                   (crash-after-commit, consumer-ack-loss); rebalance is the local broker's only.
                   Queues, streams or keys live under a name made for the run, deleted after it.
  --broker-url URL the broker of --transport (default: ONCEMQ_RABBITMQ_URL / ONCEMQ_NATS_URL /
                   ONCEMQ_REDIS_URL / ONCEMQ_SQS_ENDPOINT, else the loopback server)
  --naive          consume without oncemq, to see what the faults do to a plain consumer (payments;
                   webhooks: receivers that check the signature and apply every delivery)
  --json           print one JSON object on stdout instead of the table; orders adds outOfOrder,
                   outboxPublished, relayDuplicates, relayCrashes, orders and ordersNotShipped
                   (and has no users or usersWithWrongPoints); webhooks has its own fields
                   (docs/webhooks.md): receivers, sender, receiverRestarts, deliveriesPerSecond
  --dashboard      open the dashboard (oncemq dashboard) on the run (payments only): its URL with the
                   access token goes to stderr; after the run it stays open, one consumer still
                   subscribed, for --dashboard-hold seconds or until Ctrl-C
  --dashboard-port N      its port on 127.0.0.1 (default 0: a free one)
  --dashboard-wait S      seconds the run waits for the page to be open before it publishes
                          (default 60; 0 starts at once)
  --dashboard-hold S      seconds it stays open after the run (default 300)

Same seed, same faults: each fault is decided from the seed and the event it hits (its key, the
stored copy, the handler run), so a seed repeats the counts of producer-ack-loss, consumer-ack-loss,
crash-after-commit, handler-crash, commit-failure and poison. What varies with timing: rebalance
(asked at the middle of each pulled batch, and batches form with timing), a few relay-crash
decisions (rows sent again after a crash depend on how the relay's rounds formed); how much a crash or a
rebalance replays, hence the deliveries, the duplicates and the dead letters counted; and with
--naive the handler-crash count (a naive consumer runs its handler again for every replayed copy).

Dead letters are shown by reason, with the messages behind them: a poison message whose copy was
resent by the producer or replayed after a crash is dead-lettered once per copy.

Progress goes to stderr: a bar on a terminal, else one line per tenth of the events consumed.
Retries use a demo schedule (${DEMO_RETRY.delaysMs.map((ms) => `${ms}ms`).join(', ')}, then the dead-letter queue).`;

/** Prints a run's result: one JSON object (the keys doubled and lost last), or its summary table. */
function printScenario<R extends { doubleKeys: readonly string[]; lostKeys: readonly string[] }>(
  result: R,
  json: boolean,
  table: (result: R) => string,
): void {
  if (json) {
    const { doubleKeys, lostKeys, ...shown } = result;
    console.log(JSON.stringify({ ...shown, doubleKeys, lostKeys }));
  } else {
    console.log(table(result));
  }
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'payment-to-points (or orders through the outbox) under injected faults, checked effect by effect',
  usage,
  async run(args) {
    const { values } = parseOptions(args, {
      events: { type: 'string' },
      users: { type: 'string' },
      consumers: { type: 'string' },
      faults: { type: 'string', default: 'all' },
      seed: { type: 'string', default: '1' },
      scenario: { type: 'string', default: 'payments' },
      store: { type: 'string', default: 'sqlite' },
      url: { type: 'string' },
      transport: { type: 'string', default: 'local' },
      'broker-url': { type: 'string' },
      naive: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      dashboard: { type: 'boolean', default: false },
      'dashboard-port': { type: 'string' },
      'dashboard-wait': { type: 'string' },
      'dashboard-hold': { type: 'string' },
    });
    // A webhook is one HTTP request: its scenario's default run is shorter.
    const events = positiveOption(
      values.events,
      'events',
      values.scenario === 'webhooks' ? WEBHOOKS_EVENTS : 10_000,
    );
    const users = positiveOption(values.users, 'users', Math.max(1, Math.ceil(events / 10)));
    const consumers = positiveOption(values.consumers, 'consumers', 4);
    if (!RUN_TRANSPORT_NAMES.includes(values.transport)) {
      throw new UsageError(
        `--transport '${values.transport}' is not available; use ${RUN_TRANSPORT_NAMES.join(', ')}`,
      );
    }
    if (!(DEMO_STORES as readonly string[]).includes(values.store)) {
      throw new UsageError(
        `--store '${values.store}' is not available in this build; use ${DEMO_STORES.join(', ')}`,
      );
    }
    if (!SCENARIOS.includes(values.scenario)) {
      throw new UsageError(
        `--scenario '${values.scenario}' is not a scenario; use payments, orders or webhooks`,
      );
    }
    if (values.scenario === 'orders' && values.naive) {
      throw new UsageError(
        '--naive is for --scenario payments or webhooks (the orders scenario needs the ledger)',
      );
    }
    if (values.scenario === 'webhooks' && values.transport !== 'local') {
      throw new UsageError(
        '--transport is not for --scenario webhooks (its deliveries go over HTTP, not a broker)',
      );
    }
    let faults;
    try {
      faults = parseFaults(values.faults);
    } catch (error) {
      throw new UsageError(`--${(error as Error).message}`); // 'faults: unknown fault …'
    }
    if (
      !values.dashboard &&
      (values['dashboard-port'] ?? values['dashboard-wait'] ?? values['dashboard-hold']) !== undefined
    ) {
      throw new UsageError('--dashboard-port, --dashboard-wait and --dashboard-hold go with --dashboard');
    }
    const dashboardPort = portOption(values['dashboard-port'], 'dashboard-port');
    const waitSeconds = nonNegativeOption(values['dashboard-wait'], 'dashboard-wait', 60);
    const holdSeconds = positiveOption(values['dashboard-hold'], 'dashboard-hold', 300);
    const print = (result: DemoResult): void => {
      printScenario({ scenario: 'payments', ...result }, values.json, demoSummary);
    };
    const progress = progressReporter(values.scenario === 'webhooks' ? 'delivered' : 'consumed');
    const demoOptions = {
      events,
      users,
      consumers,
      faults: faults.faults,
      rates: faults.rates,
      seed: values.seed,
      store: values.store,
      ...(values.url === undefined ? {} : { url: values.url }),
      transport: values.transport,
      ...(values['broker-url'] === undefined ? {} : { brokerUrl: values['broker-url'] }),
      naive: values.naive,
      onProgress: (done: number, total: number) => {
        progress.update(done, total);
      },
    };
    if (values.scenario === 'webhooks') {
      if (values.dashboard) throw new UsageError('--dashboard goes with the payments scenario');
      const { runWebhooksDemo } = await import('../demo-webhooks-run.js');
      const { webhooksSummary } = await import('../demo-webhooks-summary.js');
      const webhooks = await runWebhooksDemo(demoOptions);
      progress.end();
      printScenario(webhooks, values.json, webhooksSummary);
      return webhooks.ok ? 0 : 1;
    }
    if (values.scenario === 'orders') {
      if (values.dashboard) throw new UsageError('--dashboard goes with the payments scenario');
      const { runOrdersDemo } = await import('../demo-orders-run.js');
      const orders = await runOrdersDemo(demoOptions);
      progress.end();
      printScenario(orders, values.json, ordersSummary);
      return orders.ok ? 0 : 1;
    }
    const live = values.dashboard
      ? demoDashboard({
          port: dashboardPort,
          waitMs: waitSeconds * 1000,
          holdMs: holdSeconds * 1000,
          untilStop: untilSignal,
          say: (line) => {
            console.error(line);
          },
          summary: (result) => {
            progress.end();
            print(result);
          },
        })
      : undefined;
    let result: DemoResult;
    try {
      result = await runDemo({ ...demoOptions, ...(live === undefined ? {} : { live }) });
    } finally {
      await live?.close();
    }
    if (live === undefined) {
      progress.end();
      print(result);
    }
    return result.ok ? 0 : 1;
  },
};
