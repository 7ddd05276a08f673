// The HTTP edge in a server process of its own (Express) over PostgreSQL, MariaDB and SQLite: the
// process killed with SIGKILL in the middle of a request, then the client's retry applies the effect
// once; a replay after a restart is the stored response byte for byte.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildPackage } from '../support/built-package.js';
import { HTTP_DATABASES, post, type HttpDb } from '../support/http.js';
import { waitUntil } from '../support/local-points.js';

/**
 * A server process: `POST /orders` behind the edge, writing an order through `ctx.tx`
 * (transactional) or a payment keyed by `ctx.downstreamKey('charge')` outside it (leased). A request
 * with `x-hang: 1` prints `effect written` once its write is done and never answers.
 */
const SERVER = `
import { randomUUID } from 'node:crypto';
import express from 'express';
import { createHttpEdge, expressIdempotency, httpContext, keepRawBody } from './http.js';

const [kind, url, schema, mode, lease] = process.argv.slice(2);
let ledger;
let insert;
let charge;
if (kind === 'postgres') {
  const pg = (await import('pg')).default;
  const { PostgresLedger } = await import('./postgres.js');
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  ledger = new PostgresLedger({ pool, schema });
  insert = (tx, key, body) => tx.query('INSERT INTO "' + schema + '".orders (idem, body) VALUES ($1, $2)', [key, body]);
  charge = (key) => pool.query('INSERT INTO "' + schema + '".payments (downstream_key) VALUES ($1) ON CONFLICT DO NOTHING', [key]);
} else if (kind === 'mariadb') {
  const mysql = await import('mysql2/promise');
  const { MysqlLedger } = await import('./mysql.js');
  const pool = mysql.createPool({ uri: url, connectionLimit: 4 });
  ledger = new MysqlLedger({ pool });
  insert = (tx, key, body) => tx.query('INSERT INTO orders (idem, body) VALUES (?, ?)', [key, body]);
} else {
  const Database = (await import('better-sqlite3')).default;
  const { SqliteLedger } = await import('./sqlite.js');
  const database = new Database(url);
  database.pragma('busy_timeout = 5000');
  ledger = new SqliteLedger({ database });
  insert = (tx, key, body) => tx.prepare('INSERT INTO orders (idem, body) VALUES (?, ?)').run(key, body);
}
const edge = createHttpEdge({ ledger, mode, lease, principal: (request) => request.headers['x-user'], telemetry: false });
const app = express();
app.post('/orders', express.json({ verify: keepRawBody }), expressIdempotency(edge), async (req, res) => {
  const ctx = httpContext(req);
  if (mode === 'transactional') await insert(ctx.tx, ctx.idempotencyKey, JSON.stringify(req.body));
  else await charge(ctx.downstreamKey('charge'));
  if (req.headers['x-hang'] === '1') {
    process.stdout.write('effect written\\n');
    await new Promise(() => undefined);
  }
  res.status(201).json({ orderId: randomUUID(), pid: process.pid, attempt: ctx.attempt });
});
const server = app.listen(0, '127.0.0.1', () => process.stdout.write('listening ' + server.address().port + '\\n'));
`;

interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves once the process printed `line`. */
  printed(line: string): Promise<void>;
  /** Kills the process with SIGKILL and waits for its end. */
  kill(): Promise<void>;
}

function startProcess(script: string, args: readonly string[]): Promise<ServerProcess> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const printed = (line: string): Promise<void> =>
    waitUntil(() => stdout.includes(line), `the server to print '${line}' (stderr: ${stderr})`, 20_000);
  return new Promise((resolve, reject) => {
    void exited.then(() => reject(new Error(`the server process ended: ${stderr}`)));
    void printed('listening ').then(() => {
      const port = /listening (\d+)/.exec(stdout)?.[1];
      resolve({
        child,
        url: `http://127.0.0.1:${port}/orders`,
        printed,
        kill: async () => {
          child.kill('SIGKILL');
          await exited;
        },
      });
    }, reject);
  });
}

describe.each(HTTP_DATABASES)('the HTTP edge in a server process on $name', (factory) => {
  let script: string;
  let db: HttpDb | undefined;
  const processes: ServerProcess[] = [];

  beforeAll(() => {
    script = join(buildPackage().dir, `http-server-${process.pid}.mjs`);
    writeFileSync(script, SERVER);
  });

  beforeEach(async () => {
    db = await factory.open();
  });

  afterEach(async () => {
    for (const server of processes.splice(0)) await server.kill();
    await db?.close();
  });

  async function start(mode = 'transactional', lease = '30s'): Promise<ServerProcess> {
    const server = await startProcess(script, [...(db as HttpDb).childArgs, mode, lease]);
    processes.push(server);
    return server;
  }

  it('a server killed with SIGKILL in the middle of a request: the client retries and the effect is applied once', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const first = await start();
    const lost = post(first.url, { item: 'bike' }, { 'idempotency-key': 'crash-1', 'x-hang': '1' }).catch(
      (error: unknown) => error,
    );
    await first.printed('effect written');
    await first.kill();
    expect(await lost).toBeInstanceOf(Error);
    expect(await db.count()).toBe(0);
    const second = await start();
    const retried = await post(second.url, { item: 'bike' }, { 'idempotency-key': 'crash-1' });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(await db.count('crash-1')).toBe(1);
    const again = await post(second.url, { item: 'bike' }, { 'idempotency-key': 'crash-1' });
    expect(again.bytes.equals(retried.bytes)).toBe(true);
    expect(await db.count('crash-1')).toBe(1);
  });

  it('a replay after the server restarted is the stored response, byte for byte', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const first = await start();
    const answered = await post(first.url, { item: 'kite' }, { 'idempotency-key': 'restart-1' });
    expect(answered.status).toBe(201);
    await first.kill();
    const second = await start();
    const replayed = await post(second.url, { item: 'kite' }, { 'idempotency-key': 'restart-1' });
    expect(replayed.status).toBe(201);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.headers.get('content-type')).toBe(answered.headers.get('content-type'));
    expect(replayed.bytes.equals(answered.bytes)).toBe(true);
    expect(await db.count('restart-1')).toBe(1);
  });

  it.runIf(factory.name === 'postgres')(
    'leased: after a SIGKILL the key is in flight (409) until its lease ends; the retry runs again and the downstream key absorbs the second charge',
    async (ctx) => {
      if (db === undefined) return ctx.skip();
      const [, url, schema] = db.childArgs;
      const pg = (await import('pg')).default;
      const admin = new pg.Pool({ connectionString: url, max: 1 });
      try {
        await admin.query(`CREATE TABLE "${schema}".payments (downstream_key text PRIMARY KEY)`);
        const first = await start('leased', '8s');
        const lost = post(first.url, { item: 'boat' }, { 'idempotency-key': 'lease-1', 'x-hang': '1' }).catch(
          (error: unknown) => error,
        );
        await first.printed('effect written');
        await first.kill();
        await lost;
        const second = await start('leased', '8s');
        const busy = await post(second.url, { item: 'boat' }, { 'idempotency-key': 'lease-1' });
        expect(busy.status).toBe(409);
        // Answered 409 (Retry-After: 1) until the dead process's lease of 8 s ends.
        let retried = busy;
        for (let i = 0; retried.status === 409 && i < 60; i++) {
          await new Promise((resolve) => setTimeout(resolve, 250));
          retried = await post(second.url, { item: 'boat' }, { 'idempotency-key': 'lease-1' });
        }
        expect(retried.status).toBe(201);
        expect(retried.json).toMatchObject({ attempt: 2 }); // the dead process's attempt was the first
        const { rows } = await admin.query<{ n: number }>(
          `SELECT COUNT(*)::int AS n FROM "${schema}".payments`,
        );
        expect(rows[0]?.n).toBe(1);
      } finally {
        await admin.end();
      }
    },
  );
});
