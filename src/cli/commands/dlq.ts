import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULT_LOCAL_BROKER_CONFIG, LocalBroker } from '../../transport/local/local-broker.js';
import { positiveOption, UsageError, type Command } from '../command.js';

const usage = `Usage: oncemq dlq list [--broker PATH] [--group G] [--replayed] [--limit N] [--json]
       oncemq dlq replay [--broker PATH] ID...
       oncemq dlq replay [--broker PATH] --group G --all

Dead letters of the local broker. 'list' shows them oldest first with their reason and last
error; 'replay' publishes each again to its topic (a new copy under a new broker id, the same
business key), so a consumer with oncemq applies it at most once.

  --broker PATH  the broker's SQLite file (default ${DEFAULT_LOCAL_BROKER_CONFIG.path})
  --group G      only this consumer group
  --replayed     list replayed dead letters too
  --limit N      list at most N (default 100)
  --all          replay every dead letter of --group not replayed yet
  --json         print JSON`;

async function openBroker(path: string): Promise<LocalBroker> {
  if (path !== ':memory:' && !existsSync(path)) throw new UsageError(`no broker file at ${path}`);
  const broker = new LocalBroker({ path });
  await broker.init();
  return broker;
}

export const dlqCommand: Command = {
  name: 'dlq',
  summary: 'list and replay dead letters of the local broker',
  usage,
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: {
        broker: { type: 'string', default: DEFAULT_LOCAL_BROKER_CONFIG.path },
        group: { type: 'string' },
        replayed: { type: 'boolean', default: false },
        limit: { type: 'string', default: '100' },
        all: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    const [action, ...rest] = positionals;
    if (action !== 'list' && action !== 'replay') throw new UsageError("expected 'list' or 'replay'");
    const limit = positiveOption(values.limit, 'limit', 100);
    const broker = await openBroker(values.broker);
    try {
      if (action === 'list') {
        const letters = await broker.deadLetters({
          group: values.group,
          includeReplayed: values.replayed,
          limit,
        });
        if (values.json) {
          console.log(
            JSON.stringify(
              letters.map(({ body, ...letter }) => ({ ...letter, body: Buffer.from(body).toString('utf8') })),
            ),
          );
        } else if (letters.length === 0) {
          console.log('no dead letters');
        } else {
          for (const letter of letters) {
            const replayed =
              letter.replayedAt === null ? '' : ` (replayed as ${letter.replayBrokerId ?? '?'})`;
            console.log(
              `#${letter.id}  ${letter.group}  ${letter.topic}  key ${letter.key ?? '-'}  ${letter.reason}  ${letter.deadAt.toISOString()}${replayed}`,
            );
            if (letter.error !== null) console.log(`      ${letter.error.slice(0, 200)}`);
          }
        }
        return 0;
      }
      let ids: number[];
      if (values.all) {
        if (values.group === undefined) throw new UsageError('--all needs --group');
        ids = (await broker.deadLetters({ group: values.group, limit: Number.MAX_SAFE_INTEGER })).map(
          (l) => l.id,
        );
      } else {
        if (rest.length === 0) throw new UsageError('name the dead letters to replay, or --group G --all');
        ids = rest.map((id) => {
          const n = Number(id.replace(/^#/, ''));
          if (!Number.isInteger(n) || n < 1) throw new UsageError(`'${id}' is not a dead-letter id`);
          return n;
        });
      }
      const results = [];
      for (const id of ids) {
        const receipt = await broker.replayDeadLetter(id);
        results.push({ id, replayed: receipt !== undefined, brokerId: receipt?.brokerId ?? null });
      }
      if (values.json) console.log(JSON.stringify(results));
      else {
        for (const result of results) {
          console.log(
            result.replayed
              ? `#${result.id} replayed as ${result.brokerId ?? ''}`
              : `#${result.id} not replayed: unknown or already replayed`,
          );
        }
      }
      return results.every((result) => result.replayed) ? 0 : 1;
    } finally {
      await broker.close();
    }
  },
};
