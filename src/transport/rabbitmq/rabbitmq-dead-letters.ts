import {
  DEAD_LETTER_HEADERS,
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  refuseCutReplay,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import { ORDERING_KEY_HEADER } from '../../core/envelope.js';
import type { AmqpMessageLike } from './rabbitmq-driver.js';
import type { RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import {
  brokerIdOf,
  copyOptions,
  ORIGINAL_QUEUE_HEADER,
  RETRY_DUE_HEADER,
  textHeaders,
} from './rabbitmq-message.js';
import type { RabbitTopology } from './rabbitmq-topology.js';

/** Headers a replayed copy leaves behind: why it died, and the broker's record of its hops. */
const NOT_REPLAYED: ReadonlySet<string> = new Set([
  ...Object.values(DEAD_LETTER_HEADERS),
  RETRY_DUE_HEADER,
  ORIGINAL_QUEUE_HEADER,
  'x-death',
  'x-first-death-exchange',
  'x-first-death-queue',
  'x-first-death-reason',
  'x-last-death-exchange',
  'x-last-death-queue',
  'x-last-death-reason',
]);

/** One message of a dead-letter queue, fetched and not acked yet. */
interface Fetched {
  readonly message: AmqpMessageLike;
  readonly letter: DeadLetter;
}

function toDeadLetter(message: AmqpMessageLike, queue: string): DeadLetter {
  const { headers } = textHeaders(message.properties.headers);
  return readDeadLetter(brokerIdOf(message), headers, new Uint8Array(message.content), {
    queue,
    originalQueue: headers[ORIGINAL_QUEUE_HEADER] ?? null,
    xDeath: message.properties.headers?.['x-death'] ?? null,
  });
}

/**
 * The group's dead-letter queue (`oncemq.<group>@dead`). A dead letter's id is the broker id of its
 * copy there. Listing fetches messages without acking them and hands them all back when done (the
 * queue is unchanged, though their `redelivered` flag is set); replay and purge fetch the whole
 * queue, act on the chosen ones and hand back the rest. Nothing is created: a queue that is not
 * there is a `ConfigError`.
 */
export class RabbitDeadLetters implements DeadLetters {
  readonly #settings: RabbitSettings;
  readonly #connection: RabbitConnection;
  readonly #topology: RabbitTopology;

  constructor(settings: RabbitSettings, connection: RabbitConnection, topology: RabbitTopology) {
    this.#settings = settings;
    this.#connection = connection;
    this.#topology = topology;
  }

  list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    return this.#scan(query.group, (fetched, letters: DeadLetter[]) => {
      if (query.reason === undefined || fetched.letter.reason === query.reason) letters.push(fetched.letter);
      return letters.length < limit;
    });
  }

  /** The dead-letter queue's message count (a passive declare: nothing is created). */
  async depth(group: string): Promise<number> {
    const queue = await this.#topology.deadQueue(group, false);
    const channel = await this.#connection.channel('dead letters', this.#settings.publishTimeoutMs);
    try {
      return (await channel.call('checkQueue', (raw) => raw.checkQueue(queue))).messageCount;
    } finally {
      await channel.close();
    }
  }

  /**
   * Puts the chosen letters back on the queue they were taken from: the group's work queue, or for
   * an ordered group the partition queue of their key.
   */
  replay(group: string, ids: readonly string[]): Promise<number> {
    const work = this.#topology.names.work(group);
    return this.#acting(group, ids, async (channel, { message, letter }) => {
      refuseCutReplay(letter);
      const { headers } = textHeaders(message.properties.headers);
      const original = headers[ORIGINAL_QUEUE_HEADER];
      const queue =
        /@p\d+(of\d+)?$/.test(original ?? '') && original?.startsWith(`${work}@p`) === true
          ? await this.#topology.ordered.replayQueue(group, original, headers[ORDERING_KEY_HEADER])
          : work;
      await channel.publish('', queue, message.content, copyOptions(message, {}, NOT_REPLAYED));
    });
  }

  purge(group: string, ids: readonly string[]): Promise<number> {
    return this.#acting(group, ids, () => Promise.resolve());
  }

  /** Fetches the whole queue; for each chosen id, `act` (confirmed) and then the ack. */
  async #acting(
    group: string,
    ids: readonly string[],
    act: (channel: RabbitChannel, fetched: Fetched) => Promise<void>,
  ): Promise<number> {
    const chosen = new Set(ids);
    let done = 0;
    await this.#scan(group, async (fetched, _letters, channel) => {
      if (!chosen.delete(fetched.letter.id)) return true;
      await act(channel, fetched);
      channel.ack(fetched.message);
      done++;
      return chosen.size > 0;
    });
    return done;
  }

  /**
   * Fetches the group's dead letters oldest first, one at a time, until the queue is empty or
   * `visit` answers false; then closes the channel, which hands back every one not acked.
   */
  async #scan<T extends unknown[]>(
    group: string,
    visit: (fetched: Fetched, found: T, channel: RabbitChannel) => boolean | Promise<boolean>,
  ): Promise<T> {
    const queue = await this.#topology.deadQueue(group, false);
    const channel = await this.#connection.channel('dead letters', this.#settings.publishTimeoutMs);
    const found = [] as unknown[] as T;
    try {
      for (;;) {
        const message = await channel.call('get', (raw) => raw.get(queue, { noAck: false }));
        if (message === false) break;
        if (!(await visit({ message, letter: toDeadLetter(message, queue) }, found, channel))) break;
      }
      return found;
    } finally {
      await channel.close();
    }
  }
}
