import { parseArgs } from 'node:util';
import { validateGroup } from '../../core/group.js';
import type { DeadLetter, DeadLetters } from '../../transport/dead-letters.js';
import { DEFAULT_LOCAL_BROKER_CONFIG } from '../../transport/local/local-config.js';
import { positiveOption, UsageError, type Command } from '../command.js';
import { openToolQueue, openToolTransport, TRANSPORT_NAMES } from '../transports.js';

const usage = `Usage: oncemq dlq list   --group G [--transport T] [--url URL] [--reason R] [--limit N] [--json]
       oncemq dlq replay --group G [--transport T] [--url URL] (ID... | --all) [--json]
       oncemq dlq purge  --group G [--transport T] [--url URL] (ID... | --all) [--json]
       oncemq dlq list|replay|purge --transport sqs --queue Q [--url URL] ...

The dead-letter queue of a consumer group, on any transport that keeps dead letters.
'list' shows them oldest first with their reason and last error; 'replay' delivers each again to
this group only (a new copy with the same business key and a delivery count of 1), so a consumer
with oncemq applies it at most once; 'purge' deletes them for good. Nothing is created: a broker
file, queue or stream that is not there is an error.

  --transport T  ${TRANSPORT_NAMES.join(', ')} (default local)
  --url URL      the broker; for local, its SQLite file (default ${DEFAULT_LOCAL_BROKER_CONFIG.path})
  --group G      the consumer group (required, unless --queue)
  --queue Q      sqs only: the dead-letter queue Q that a redrive policy fills, instead of the group's;
                 replay sends each message back to the queue it was moved from
  --reason R     list only dead letters with this reason
  --limit N      list at most N (default 100)
  --all          replay or purge every dead letter of the group
  --replayed     local only: list replayed dead letters too
  --json         print JSON`;

function toJson(letter: DeadLetter): Record<string, unknown> {
  const { body, ...rest } = letter;
  return { ...rest, deadAt: letter.deadAt.toISOString(), body: Buffer.from(body).toString('utf8') };
}

function printLetters(letters: readonly DeadLetter[]): void {
  if (letters.length === 0) {
    console.log('no dead letters');
    return;
  }
  for (const letter of letters) {
    console.log(
      `#${letter.id}  ${letter.topic}  key ${letter.key ?? '-'}  ${letter.reason}  attempt ${letter.deliveryCount}  ${letter.deadAt.toISOString()}`,
    );
    if (letter.error !== null) console.log(`      ${letter.error.slice(0, 200)}`);
    const { cut } = letter;
    if (cut !== undefined) {
      console.log(
        `      stored cut, too large for the broker: ${cut.keptBodyBytes} of ${cut.bodyBytes} body bytes kept, ${cut.droppedHeaders} of its own headers left out; not replayable`,
      );
    }
  }
}

/** Every dead letter's id of a group, page by page. */
async function allIds(deadLetters: DeadLetters, group: string): Promise<string[]> {
  return (await deadLetters.list({ group, limit: Number.MAX_SAFE_INTEGER })).map((letter) => letter.id);
}

export const dlqCommand: Command = {
  name: 'dlq',
  summary: 'list, replay and purge the dead letters of a consumer group',
  usage,
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: {
        transport: { type: 'string', default: 'local' },
        url: { type: 'string' },
        group: { type: 'string' },
        queue: { type: 'string' },
        reason: { type: 'string' },
        replayed: { type: 'boolean', default: false },
        limit: { type: 'string', default: '100' },
        all: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    const [action, ...ids] = positionals;
    if (action !== 'list' && action !== 'replay' && action !== 'purge') {
      throw new UsageError("expected 'list', 'replay' or 'purge'");
    }
    if (values.group === undefined && values.queue === undefined) {
      throw new UsageError('--group is required (or --queue for an SQS redrive queue)');
    }
    let group: string;
    try {
      group = values.group === undefined ? '' : validateGroup(values.group, '--group');
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    const limit = positiveOption(values.limit, 'limit', 100);
    if (action !== 'list' && values.all === ids.length > 0) {
      throw new UsageError(`name the dead letters to ${action}, or --all (not both)`);
    }
    if (values.replayed && values.transport !== 'local') {
      throw new UsageError('--replayed is for the local transport only');
    }
    const transport =
      values.queue === undefined
        ? await openToolTransport(values.transport, { url: values.url })
        : await openToolQueue(values.transport, { url: values.url, queue: values.queue });
    try {
      const { deadLetters } = transport;
      if (action === 'list') {
        const letters = await deadLetters.list({
          group,
          limit,
          ...(values.reason === undefined ? {} : { reason: values.reason }),
          ...(values.replayed ? { includeReplayed: true } : {}),
        });
        if (values.json) console.log(JSON.stringify(letters.map(toJson)));
        else printLetters(letters);
        return 0;
      }
      const chosen = values.all ? await allIds(deadLetters, group) : ids.map((id) => id.replace(/^#/, ''));
      const done =
        action === 'replay'
          ? await deadLetters.replay(group, chosen)
          : await deadLetters.purge(group, chosen);
      if (values.json) console.log(JSON.stringify({ action, requested: chosen.length, done }));
      else console.log(`${action === 'replay' ? 'replayed' : 'purged'} ${done} of ${chosen.length}`);
      return done === chosen.length ? 0 : 1;
    } finally {
      await transport.close();
    }
  },
};
