/**
 * The load side of `npm run bench -- http`: autocannon against the bench server's routes, the rows
 * side by side in rounds (ABBA), every slice checked in the database before the next one runs.
 */
import { availableParallelism, loadavg } from 'node:os';
import autocannon from 'autocannon';
import { median, type BenchResult } from './harness.js';
import { ORDER_TABLES, type HttpPeer } from './http-server.js';
import { cpuBetween, cpuSnapshot } from './proc-cpu.js';

/** The part of a pg pool the checks use. */
export interface CountingPool {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

export interface HttpLoadOptions {
  /** The bench server's base URL. */
  readonly url: string;
  /** The pool the checks count rows with, and the schema of the server's tables. */
  readonly pool: CountingPool;
  readonly schema: string;
  /** HTTP connections of the load generator (one request in flight on each). */
  readonly connections: number;
  /** Measured time of the whole run, cut into `rounds × rows` slices (at least 1 s each). */
  readonly seconds: number;
  readonly rounds: number;
  /** Unmeasured run of each row before the rounds, in seconds (0: none). */
  readonly warmupSeconds: number;
  readonly peers: readonly HttpPeer[];
  /** Every key sent starts with it (the peers' Redis keys are the keys themselves). */
  readonly keyPrefix: string;
  /** Only these rows (by name); all when absent. */
  readonly rows?: readonly string[];
}

type Phase = 'new' | 'replay';

/** One row: a route, new keys or replays of keys it already completed. */
interface HttpRow {
  readonly name: string;
  readonly path: string;
  readonly table: string;
  readonly phase: Phase;
  /** The header the route sets on a replay, when it sets one. */
  readonly replayHeader?: string;
  readonly baseline?: string;
  readonly peer?: string;
  readonly note: string;
}

export const RAW_ROW = 'raw:http';

function httpRows(peers: readonly HttpPeer[]): HttpRow[] {
  const pair = (
    prefix: string,
    path: string,
    table: string,
    note: string,
    extra: { replayHeader?: string; peer?: (phase: Phase) => string | undefined } = {},
  ): HttpRow[] =>
    (['new', 'replay'] as const).map((phase) => {
      const peer = extra.peer?.(phase);
      return {
        name: `${prefix}:${phase}`,
        path,
        table,
        phase,
        baseline: RAW_ROW,
        ...(extra.replayHeader === undefined ? {} : { replayHeader: extra.replayHeader }),
        ...(peer === undefined ? {} : { peer }),
        note: `${note}; ${phase === 'new' ? 'a new key per request' : 'keys already completed'}`,
      };
    });
  const peerOf = (phase: Phase): string | undefined =>
    peers.includes('express-idempotency') ? `peer:express-idempotency:${phase}` : undefined;
  return [
    {
      name: RAW_ROW,
      path: '/raw/orders',
      table: ORDER_TABLES.raw,
      phase: 'new',
      note: 'the bare route: one INSERT, autocommit',
    },
    ...pair(
      'hand:http',
      '/hand/orders',
      ORDER_TABLES.hand,
      'by hand: read the stored response, else BEGIN, INSERT key ON CONFLICT DO NOTHING, the INSERT, store the response, COMMIT',
      { replayHeader: 'idempotent-replayed' },
    ),
    ...pair(
      'oncemq:http',
      '/oncemq/orders',
      ORDER_TABLES.oncemq,
      'expressIdempotency over PostgresLedger, transactional: the INSERT through ctx.tx',
      { replayHeader: 'idempotent-replayed', peer: peerOf },
    ),
    ...(peers.includes('express-idempotency')
      ? pair(
          'peer:express-idempotency',
          '/peer/express-idempotency/orders',
          ORDER_TABLES['express-idempotency'],
          'express-idempotency 1.0 + its Redis adapter; the INSERT autocommit, not with the claim',
        )
      : []),
    ...(peers.includes('node-idempotency')
      ? pair(
          'peer:@node-idempotency/core',
          '/peer/node-idempotency/orders',
          ORDER_TABLES['node-idempotency'],
          '@node-idempotency/core 1.0 + its Redis adapter, Express glue in the bench; the INSERT autocommit',
        )
      : []),
  ];
}

const BODY = JSON.stringify({ item: 'book' });

/** What one slice of a row measured. */
interface Slice {
  readonly ok: number;
  readonly seconds: number;
  readonly p50: number;
  readonly p99: number;
  /** CPU of the server process over the slice, in microseconds. */
  readonly serverCpu: number;
  /** Statements the server sent to PostgreSQL over the slice. */
  readonly statements: number;
  readonly others: ReadonlyMap<string, number>;
}

interface ServerState {
  readonly inFlight: number;
  readonly cpu: NodeJS.CpuUsage;
  readonly statements: number;
}

const turn = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function serverState(url: string): Promise<ServerState> {
  const response = await fetch(`${url}/bench/state`);
  return (await response.json()) as ServerState;
}

/** Waits until the server has no request in flight (autocannon leaves some behind when it stops). */
async function idle(url: string): Promise<ServerState> {
  const deadline = performance.now() + 30_000;
  for (;;) {
    const state = await serverState(url);
    if (state.inFlight <= 0) return state;
    if (performance.now() > deadline)
      throw new Error(`the bench server still has ${state.inFlight} requests in flight`);
    await turn(20);
  }
}

interface RowCount {
  readonly rows: number;
  readonly keys: number;
}

/** Processes of the machine whose CPU a row reports: the database and the peers' store. */
const WATCHED = ['postgres', 'redis-server'];

class HttpLoad {
  readonly #options: HttpLoadOptions;
  #sequence = 0;

  constructor(options: HttpLoadOptions) {
    this.#options = options;
  }

  async #count(table: string): Promise<RowCount> {
    const { rows } = await this.#options.pool.query(
      `SELECT count(*)::int AS rows, count(DISTINCT idem_key)::int AS keys FROM "${this.#options.schema}".${table}`,
    );
    return rows[0] as RowCount;
  }

  async #completedKeys(table: string): Promise<string[]> {
    const { rows } = await this.#options.pool.query(
      `SELECT idem_key FROM "${this.#options.schema}".${table} ORDER BY id DESC LIMIT 100000`,
    );
    return rows.map((row) => (row as { idem_key: string }).idem_key);
  }

  /** Runs one row for `seconds` and checks its table: one row per key; replays wrote nothing. */
  async slice(row: HttpRow, seconds: number): Promise<Slice> {
    const { url, connections, keyPrefix } = this.#options;
    const state = await idle(url);
    const before = await this.#count(row.table);
    let replayKeys: string[] = [];
    if (row.phase === 'replay') {
      replayKeys = await this.#completedKeys(row.table);
      if (replayKeys.length === 0) throw new Error(`${row.name}: no completed key to replay`);
    }
    let issued = 0;
    let replayed = 0;
    const nextKey = (): string => {
      issued++;
      if (row.phase === 'replay') return replayKeys[issued % replayKeys.length] ?? '';
      return `${keyPrefix}-${(this.#sequence++).toString(36)}`;
    };
    const cpu = cpuSnapshot();
    const result = await autocannon({
      url,
      connections,
      pipelining: 1,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: row.path,
          body: BODY,
          setupRequest: (request) => ({
            ...request,
            headers: { 'content-type': 'application/json', 'idempotency-key': nextKey() },
          }),
          ...(row.replayHeader === undefined
            ? {}
            : {
                onResponse: (_status, _body, _context, headers) => {
                  if (headers?.[row.replayHeader ?? ''] === 'true') replayed++;
                },
              }),
        },
      ],
    });
    const after = await idle(url);
    const others = cpu === undefined ? undefined : cpuSnapshot();
    const count = await this.#count(row.table);
    const ok = result['2xx'];
    const wrong = (what: string): Error =>
      new Error(
        `${row.name}: ${what} (2xx ${ok}, non-2xx ${result.non2xx}, errors ${result.errors}, rows ${before.rows} → ${count.rows}, keys ${count.keys}, keys issued ${issued})`,
      );
    if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) throw wrong('a request failed');
    if (ok === 0) throw wrong('no request completed');
    if (count.rows !== count.keys) throw wrong('a key has more than one row: an effect ran twice');
    if (row.phase === 'new') {
      const added = count.rows - before.rows;
      // Each 2xx is a row; autocannon may leave requests unanswered when it stops, whose rows count too.
      if (added < ok || added > issued) throw wrong(`${added} rows added for ${ok} answered requests`);
    } else {
      if (count.rows !== before.rows) throw wrong('a replay wrote a row');
      if (row.replayHeader !== undefined && replayed !== ok)
        throw wrong(`${replayed} answers marked replayed`);
    }
    const serverCpu = after.cpu.user + after.cpu.system - (state.cpu.user + state.cpu.system);
    const watched = new Map<string, number>();
    if (cpu !== undefined && others !== undefined) {
      for (const [name, micros] of cpuBetween(cpu, others).others) {
        if (WATCHED.includes(name)) watched.set(name, micros);
      }
    }
    return {
      ok,
      seconds: result.duration,
      p50: result.latency.p50,
      p99: result.latency.p99,
      serverCpu,
      statements: after.statements - state.statements,
      others: watched,
    };
  }
}

function toResult(
  row: HttpRow,
  slices: readonly Slice[],
  raw: readonly Slice[],
  connections: number,
): BenchResult {
  const ok = slices.reduce((sum, s) => sum + s.ok, 0);
  const seconds = slices.reduce((sum, s) => sum + s.seconds, 0);
  const rate = (s: readonly Slice[]): number =>
    s.reduce((sum, x) => sum + x.ok, 0) / s.reduce((sum, x) => sum + x.seconds, 0);
  const ratios =
    row.name === RAW_ROW || raw.length === 0
      ? undefined
      : slices.map((s, i) => rate([s]) / rate([raw[i] ?? s]));
  const others: Record<string, number> = {};
  for (const slice of slices) {
    for (const [name, micros] of slice.others) others[name] = (others[name] ?? 0) + micros;
  }
  return {
    name: row.name,
    concurrency: connections,
    messagesPerSecond: Math.round(ok / seconds),
    // autocannon's percentiles per slice (whole milliseconds); the median over the slices
    p50Ms: median(slices.map((s) => s.p50)),
    p99Ms: median(slices.map((s) => s.p99)),
    messages: ok,
    repetitions: slices.length,
    ...(row.baseline === undefined ? {} : { baseline: row.baseline }),
    ...(row.peer === undefined ? {} : { peer: row.peer }),
    ...(ratios === undefined
      ? {}
      : {
          ratio: Number((rate(slices) / rate(raw)).toFixed(3)),
          ratios: ratios.map((r) => Number(r.toFixed(3))),
        }),
    cpuMicrosPerMessage: Number((slices.reduce((sum, s) => sum + s.serverCpu, 0) / ok).toFixed(1)),
    statementsPerMessage: Number((slices.reduce((sum, s) => sum + s.statements, 0) / ok).toFixed(2)),
    otherProcessesCpuMicrosPerMessage: Object.fromEntries(
      Object.entries(others).map(([name, micros]) => [name, Number((micros / ok).toFixed(1))]),
    ),
    loadAverage: Number((loadavg()[0] ?? 0).toFixed(2)),
    cores: availableParallelism(),
    note: row.note,
  };
}

/**
 * Runs every row against the server: a warm-up of each, then `rounds` rounds in which every row runs
 * one slice, in reverse order every other round. Every slice is checked (one row per key, replays
 * write nothing, every answer 2xx); a failed check throws.
 */
export async function measureHttp(options: HttpLoadOptions): Promise<BenchResult[]> {
  const all = httpRows(options.peers);
  const rows = options.rows === undefined ? all : all.filter((row) => options.rows?.includes(row.name));
  const load = new HttpLoad(options);
  if (options.warmupSeconds > 0) {
    for (const row of rows) await load.slice(row, options.warmupSeconds);
  }
  const sliceSeconds = Math.max(1, options.seconds / (options.rounds * rows.length));
  const slices = rows.map((): Slice[] => []);
  for (let round = 0; round < options.rounds; round++) {
    const order = [...rows.entries()];
    if (round % 2 === 1) order.reverse();
    for (const [i, row] of order) slices[i]?.push(await load.slice(row, sliceSeconds));
  }
  const raw = slices[rows.findIndex((row) => row.name === RAW_ROW)] ?? [];
  return rows.map((row, i) => toResult(row, slices[i] ?? [], raw, options.connections));
}

/** The names of the rows `measureHttp` runs with these peers, in order. */
export const httpRowNames = (peers: readonly HttpPeer[]): string[] => httpRows(peers).map((row) => row.name);
