// examples/nest-app as an application of its own: its files copied into a scratch folder whose
// node_modules holds the packed oncemq (from the dist that `npm run build` made: `npm test` builds
// it first) beside the project's Nest, pg and amqplib; compiled with tsc and its own tsconfig (a
// CommonJS project, as `nest new` makes it), then run against RabbitMQ and PostgreSQL.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RABBITMQ_DELAY_LEVELS } from 'oncemq/rabbitmq';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';
import { deleteTopology, findRabbit, scratchPrefix } from '../support/rabbitmq.js';
import { parseDuration, RabbitNames, waitFor } from '../support/internal.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const example = join(root, 'examples', 'nest-app');
/** What the example needs at run time and to compile, taken from the project's own install. */
const LINKED = ['@nestjs', '@types', 'amqplib', 'pg', 'reflect-metadata', 'rxjs'];

const rabbit = await findRabbit();
const postgres = await findPostgres();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address === null || typeof address === 'string') reject(new Error('no port'));
        else resolve(address.port);
      });
    });
  });
}

/** Why `require('oncemq')` fails from the app's folder, or undefined when it works. */
async function requireFailure(cwd: string): Promise<string | undefined> {
  try {
    await run(process.execPath, ['-e', "require('oncemq'); require('oncemq/nest')"], { cwd });
    return undefined;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? String(error);
    return /Error[^\n]*/.exec(stderr)?.[0] ?? stderr.slice(0, 300);
  }
}

describe.skipIf(!rabbit.available || !postgres.available)('the Nest example app (examples/nest-app)', () => {
  let dir = '';
  let app = '';
  const schema = scratchSchema('nest_app');
  const prefix = scratchPrefix();

  beforeAll(async () => {
    if (!existsSync(join(root, 'dist', 'esm', 'nest.js'))) {
      throw new Error(
        'dist/esm/nest.js is missing: run `npm run build` first (the example builds against the built package)',
      );
    }
    dir = mkdtempSync(join(tmpdir(), 'oncemq-nest-app-'));
    const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], {
      cwd: root,
    });
    const [packed] = JSON.parse(stdout) as { filename: string }[];
    if (packed === undefined) throw new Error('npm pack reported nothing');
    app = join(dir, 'app');
    const modules = join(app, 'node_modules');
    mkdirSync(join(modules, 'oncemq'), { recursive: true });
    await run('tar', [
      '-xzf',
      join(dir, packed.filename),
      '-C',
      join(modules, 'oncemq'),
      '--strip-components=1',
    ]);
    for (const name of LINKED) symlinkSync(join(root, 'node_modules', name), join(modules, name));
    for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'nest-cli.json', 'src']) {
      cpSync(join(example, file), join(app, file), { recursive: true });
    }
  }, 120_000);

  afterAll(async () => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    const pool = newPool(postgres.url, 1);
    await dropSchema(pool, schema);
    await pool.end();
    const names = new RabbitNames(prefix);
    await deleteTopology(rabbit.url, {
      queues: [
        names.work('points'),
        names.dead('points'),
        names.log('payment-succeeded'),
        ...DEFAULT_RABBITMQ_DELAY_LEVELS.map((level) => names.retry('points', parseDuration(level, 'level'))),
      ],
      exchanges: [prefix, names.ready('points', 'payment-succeeded')],
    });
  });

  it('compiles with tsc and its own tsconfig into CommonJS', async () => {
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const compiled = await run(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: app }).catch(
      (error: unknown) => error as { stdout: string; code: number },
    );
    expect('code' in compiled ? compiled.stdout : '').toBe('');
    const main = readFileSync(join(app, 'dist', 'app.module.js'), 'utf8');
    expect(main).toContain('require("oncemq/nest")');
    expect(main).not.toMatch(/^import /m);
  }, 120_000);

  it('consumes the payments it is sent once each into PostgreSQL, and drains on SIGTERM', async (ctx) => {
    const failure = await requireFailure(app);
    if (failure !== undefined) {
      ctx.skip(
        `require('oncemq') fails from CommonJS (${failure}): the compiled example runs once the package has a CommonJS entry`,
      );
    }
    const port = await freePort();
    const child: ChildProcess = spawn(process.execPath, [join('dist', 'main.js')], {
      cwd: app,
      env: {
        ...process.env,
        PORT: String(port),
        DATABASE_URL: postgres.url,
        AMQP_URL: rabbit.url,
        DB_SCHEMA: schema,
        QUEUE_PREFIX: prefix,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => {
        resolve({ code, signal });
      }),
    );
    try {
      const url = `http://127.0.0.1:${port}`;
      await waitFor(
        () => output.includes('Nest application successfully started'),
        'the app started',
        30_000,
      );
      const payments = Array.from({ length: 12 }, (_, i) => ({
        eventId: `pay-${i}`,
        userId: `user-${i % 3}`,
        amount: 1,
      }));
      for (const payment of payments) {
        // Each payment twice: a client retrying a request whose answer it lost.
        for (let copy = 0; copy < 2; copy++) {
          const answer = await fetch(`${url}/payments`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(payment),
          });
          expect(answer.status).toBe(202);
        }
      }
      const balance = async (userId: string): Promise<number> => {
        const answer = await fetch(`${url}/points/${userId}`);
        return ((await answer.json()) as { balance: number }).balance;
      };
      await waitFor(
        async () => (await balance('user-0')) + (await balance('user-1')) + (await balance('user-2')) >= 1200,
        'every payment credited',
        30_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect([await balance('user-0'), await balance('user-1'), await balance('user-2')]).toEqual([
        400, 400, 400,
      ]);
    } finally {
      child.kill('SIGTERM');
    }
    const { code, signal } = await exited;
    // Nest's shutdown hooks close the application, then re-raise the signal.
    expect(code === 0 || signal === 'SIGTERM').toBe(true);
    expect(output).toContain('PointsConsumer.credit drained (group points)');
    expect(output).not.toMatch(/\bERROR\b/);

    const connection = await amqplib.connect(rabbit.url);
    try {
      const channel = await connection.createChannel();
      const queue = await channel.checkQueue(new RabbitNames(prefix).work('points'));
      expect({ messages: queue.messageCount, consumers: queue.consumerCount }).toEqual({
        messages: 0,
        consumers: 0,
      });
      await channel.close();
    } finally {
      await connection.close();
    }
    const pool = newPool(postgres.url, 1);
    try {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT COUNT(*)::int AS n FROM "${schema}".oncemq_ledger WHERE consumer_group = 'points' AND status = 'SUCCESS'`,
      );
      expect(rows[0]?.n).toBe(12);
    } finally {
      await pool.end();
    }
  }, 120_000);
});
