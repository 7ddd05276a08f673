/**
 * The HTTP edge under load: one Express server on PostgreSQL doing the same write per request bare
 * (`raw:http`), by hand with its own claim (`hand:http:*`), behind `expressIdempotency` in
 * transactional mode (`oncemq:http:new`, `oncemq:http:replay`) and behind the peer libraries on Redis
 * (`peer:*`), measured by autocannon side by side. docs/bench.md#http.
 *
 *   npm run bench -- http [--json] [--seconds N] [--flag connections=16] [--flag rounds=3]
 *     [--flag warmup=2] [--flag peers=express-idempotency,node-idempotency|none] [--flag rows=NAME,…] [--flag server=child|in-process]
 *     [--flag profile=DIR]  (a V8 CPU profile of the server process, written to DIR when it stops)
 *
 * ONCEMQ_POSTGRES_URL and ONCEMQ_REDIS_URL, else the loopback defaults.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { resolveServiceUrl } from '../src/cli/connection.js';
import { listFlag, wholeFlag } from './flags.js';
import type { Suite } from './harness.js';
import { httpRowNames, measureHttp } from './http-load.js';
import {
  HTTP_PEERS,
  httpBenchTables,
  startHttpBenchServer,
  type HttpBenchServer,
  type HttpBenchServerOptions,
  type HttpPeer,
} from './http-server.js';

/** What the server says once it listens. */
type Started = Pick<HttpBenchServer, 'url' | 'peers' | 'skipped'>;

/**
 * The server in a process of its own (the default), so that the load generator's CPU is not the
 * server's: its `close` stops it with SIGTERM and waits for it to exit.
 */
async function serverProcess(
  options: HttpBenchServerOptions,
  profileDir: string | undefined,
): Promise<HttpBenchServer> {
  const child = fork(fileURLToPath(new URL('./http-server.js', import.meta.url)), [JSON.stringify(options)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const started = await Promise.race([
    new Promise<Started>((resolve) => child.once('message', (message) => resolve(message as Started))),
    exited.then((code) => {
      throw new Error(`the bench server exited (code ${String(code)}) before it listened`);
    }),
  ]);
  return {
    ...started,
    async close() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export const suite: Suite = {
  name: 'http',
  description:
    'an Express route on PostgreSQL, bare, by hand, behind oncemq (new keys, replays) and the peers on Redis; autocannon',
  async run({ seconds, flags }) {
    const connections = wholeFlag(flags, 'connections', 16);
    const rounds = wholeFlag(flags, 'rounds', 3);
    const warmupSeconds = wholeFlag(flags, 'warmup', 2, 0);
    const peers = (
      flags.peers === 'none' ? [] : listFlag(flags, 'peers', HTTP_PEERS, HTTP_PEERS)
    ) as HttpPeer[];
    const [where] = listFlag(flags, 'server', ['child', 'in-process'], ['child']);
    const postgresUrl = resolveServiceUrl('postgres').url;
    const tag = randomBytes(4).toString('hex');
    const schema = `oncemq_bench_http_${tag}`;
    const pool = new pg.Pool({ connectionString: postgresUrl, max: 2 });
    let server: HttpBenchServer | undefined;
    try {
      await pool.query(`CREATE SCHEMA "${schema}"`);
      for (const ddl of httpBenchTables(schema)) await pool.query(ddl);
      const options: HttpBenchServerOptions = {
        postgresUrl,
        schema,
        connections,
        redisUrl: resolveServiceUrl('redis').url,
        peers,
        redisPrefix: `oncemq-bench-http-${tag}`,
      };
      server =
        where === 'in-process'
          ? await startHttpBenchServer(options)
          : await serverProcess(options, flags.profile);
      for (const [peer, reason] of Object.entries(server.skipped)) {
        console.error(`http: peer ${peer} left out: ${reason}`);
      }
      return await measureHttp({
        url: server.url,
        pool,
        schema,
        connections,
        seconds,
        rounds,
        warmupSeconds,
        peers: server.peers,
        keyPrefix: options.redisPrefix,
        ...(flags.rows === undefined
          ? {}
          : { rows: listFlag(flags, 'rows', httpRowNames(server.peers), httpRowNames(server.peers)) }),
      });
    } finally {
      await server?.close();
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    }
  },
};
