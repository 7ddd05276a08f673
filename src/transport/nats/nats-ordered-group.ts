import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ConfigError } from '../../core/errors.js';
import { partitionCountError } from '../ordered/partition-count.js';
import type { OrderingOptions, Processor, StartPosition } from '../transport.js';
import type { NatsSettings } from './nats-config.js';
import type { DeliveryContext } from './nats-delivery.js';
import type { NatsDriver } from './nats-driver.js';
import { orderingStream, partitionConsumer, partitionFilter, topicStream } from './nats-names.js';
import { NatsOrderedSubscription, type NatsPartition } from './nats-ordered-subscription.js';
import {
  drainInProgressError,
  orderingRecord,
  readOrderingRecord,
  recordDrain,
  type OrderingRecord,
} from './nats-partition-count.js';
import { NatsDrainingSubscription, type DrainRecord } from './nats-partition-drain.js';
import { isNotFound, type NatsTopology } from './nats-topology.js';

/** What starting an ordered member needs from the open transport and the subscribe call. */
export interface OrderedGroupParts {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly driver: NatsDriver;
  readonly topology: NatsTopology;
  readonly settings: NatsSettings;
  readonly ctx: DeliveryContext;
  readonly group: string;
  readonly topics: readonly string[];
  readonly processor: Processor;
  readonly concurrency: number;
  readonly ackWaitMs: number;
  readonly ordering: OrderingOptions;
  /** Where the group's partition consumers start when they are made (a drain's start after its bounds). */
  readonly from: StartPosition;
}

/** Where a member refused for its partition count reads how to drain to it. */
const DRAIN_DOCS = 'docs/transports/nats.md#changing-the-partition-count-onpartitionchange-drain';

/** How a member builds one count's partitions. */
interface Generation {
  readonly count: number;
  /** For each topic stream, where a consumer made now starts (a drain's new count: after its bound). */
  readonly startSeqs?: Readonly<Record<string, number>>;
  /** False for a drain's old count: its consumers are only read, and one already deleted is left out. */
  readonly create: boolean;
}

/**
 * Starts a member of an ordered group: checks the group's recorded partition count and, when it
 * differs and `ordering.onPartitionChange` is `'drain'`, records a switch to this member's count
 * (or joins the one recorded), see docs/transports/nats.md#per-key-ordering.
 */
export async function subscribeOrderedGroup(
  parts: OrderedGroupParts,
): Promise<NatsOrderedSubscription | NatsDrainingSubscription> {
  const { settings, group, topics } = parts;
  const count = settings.partitions;
  const stream = orderingStream(settings);
  let record = await orderingRecord(parts, group, count);
  for (;;) {
    const { drain } = record;
    if (drain === undefined) {
      if (record.count === count) return start(parts, await partitions(parts, { count, create: true }));
      if ((parts.ordering.onPartitionChange ?? 'refuse') === 'refuse' || settings.topology === 'check') {
        throw partitionCountError(
          `stream ${stream}`,
          {
            group,
            count,
            ordering: parts.ordering,
            canDrain: settings.topology !== 'check',
            docs: DRAIN_DOCS,
          },
          record.count,
        );
      }
      const switched = await recordSwitch(parts, record);
      if (switched !== null) return draining(parts, switched, Date.now());
      record = await orderingRecord(parts, group, count);
      continue;
    }
    if (record.count !== count) throw drainInProgressError(group, { ...record, drain }, count, stream);
    if (settings.topology === 'check') {
      throw new ConfigError(
        'topology',
        `group '${group}' is moving from ${drain.from} to ${record.count} partitions, and topology 'check' ` +
          'changes nothing, so it neither joins nor finishes a drain: start it again once the drain is finished',
      );
    }
    const missing = topics.filter((topic) => drain.bounds[topicStream(settings, topic)] === undefined);
    if (missing.length > 0) {
      throw new ConfigError(
        'topics',
        `group '${group}' is moving from ${drain.from} to ${record.count} partitions on the topics it had ` +
          `then (streams ${Object.keys(drain.bounds).join(', ')}); ${missing.join(', ')} joins it once the drain is finished`,
      );
    }
    return draining(parts, { ...record, drain }, Date.now());
  }
}

/**
 * Records the switch from `record`'s count to this member's: first any consumer of the new count
 * left from before is deleted (nobody pulls from it: the record names another count), then each topic
 * stream's last sequence is taken as its bound. Null when another member wrote the record first.
 */
async function recordSwitch(parts: OrderedGroupParts, record: OrderingRecord): Promise<DrainRecord | null> {
  const { settings, group, topics, jsm, topology } = parts;
  const count = settings.partitions;
  const bounds: Record<string, number> = {};
  for (const topic of topics) {
    const stream = topicStream(settings, topic);
    await topology.topicStream(topic);
    for (let index = 0; index < count; index++) {
      await jsm.consumers.delete(stream, partitionConsumer(group, index, count)).catch((error: unknown) => {
        if (!isNotFound(error, 'consumer')) throw error;
      });
    }
    bounds[stream] = (await jsm.streams.info(stream)).state.last_seq;
  }
  const switched = await recordDrain(parts, group, record, count, bounds);
  if (switched?.drain === undefined) return null;
  settings.logger.info('oncemq: recorded a drain of a NATS ordered group to a new partition count', {
    group,
    from: record.count,
    to: count,
    bounds,
  });
  return { ...switched, drain: switched.drain };
}

/** A member that joins `record`'s drain: it makes the new count's consumers, and runs the old count's first. */
async function draining(
  parts: OrderedGroupParts,
  record: DrainRecord,
  seenAt: number,
): Promise<NatsDrainingSubscription> {
  const { settings } = parts;
  const startSeqs = Object.fromEntries(
    Object.entries(record.drain.bounds).map(([stream, bound]) => [stream, bound + 1]),
  );
  const next: Generation = { count: record.count, startSeqs, create: true };
  // The new count's consumers exist (starting after the bounds) before anyone may finish the drain.
  await partitions(parts, next);
  const old = start(
    parts,
    await partitions(parts, { count: record.drain.from, create: false }),
    record.count,
  );
  const subscription = new NatsDrainingSubscription(parts.group, parts.topics, {
    js: parts.js,
    jsm: parts.jsm,
    settings,
    record,
    seenAt,
    old,
    startNew: async () => start(parts, await partitions(parts, next)),
  });
  subscription.start();
  return subscription;
}

function start(parts: OrderedGroupParts, generation: Built, drainsTo?: number): NatsOrderedSubscription {
  const { settings, jsm, group } = parts;
  const subscription = new NatsOrderedSubscription(group, parts.topics, {
    ctx: parts.ctx,
    js: parts.js,
    jsm,
    driver: parts.driver,
    partitions: generation.partitions,
    count: generation.count,
    processor: parts.processor,
    concurrency: parts.concurrency,
    ackWaitMs: parts.ackWaitMs,
    ordering: parts.ordering,
    record: () => readOrderingRecord({ jsm, settings }, group),
    ...(drainsTo === undefined ? {} : { drainsTo }),
  });
  subscription.start();
  return subscription;
}

interface Built {
  readonly count: number;
  readonly partitions: readonly NatsPartition[];
}

/**
 * Makes (or checks) a count's partition consumers on every topic's stream. After a failed pull a
 * consumer is made again only while the record still names this count with no drain: a consumer a
 * drain deleted is never made again (it would start at the stream's first message).
 */
async function partitions(parts: OrderedGroupParts, generation: Generation): Promise<Built> {
  const { settings, topology, group, topics, ackWaitMs, from } = parts;
  const { count } = generation;
  const mayCreate = async (): Promise<boolean> => {
    if (!generation.create) return false;
    const record = await readOrderingRecord(parts, group);
    return record === null || (record.count === count && record.drain === undefined);
  };
  const built: NatsPartition[] = [];
  for (let index = 0; index < count; index++) {
    const specs = topics.map((topic) => {
      const stream = topicStream(settings, topic);
      const startSeq = generation.startSeqs?.[stream];
      return {
        topic,
        stream,
        name: partitionConsumer(group, index, count),
        ackWaitMs,
        filterSubject: partitionFilter(settings, topic, index, count),
        from,
        ...(startSeq === undefined ? {} : { startSeq }),
      };
    });
    const ensure = async (create: boolean): Promise<(number | null)[]> => {
      const waits: (number | null)[] = [];
      for (const spec of specs) {
        await topology.topicStream(spec.topic);
        try {
          const info = await topology.consumer({ ...spec, create });
          waits.push((info.config.ack_wait ?? ackWaitMs * 1_000_000) / 1_000_000);
        } catch (error) {
          // An old count's consumer already drained and deleted: nothing of it is left to run.
          if (create || !(error instanceof ConfigError)) throw error;
          waits.push(null);
        }
      }
      return waits;
    };
    const waits = await ensure(generation.create);
    built.push({
      index,
      sources: specs.flatMap((spec, i) => {
        const wait = waits[i];
        if (wait === null || wait === undefined) return [];
        return [
          {
            stream: spec.stream,
            consumer: spec.name,
            topic: spec.topic,
            keepAliveEveryMs: Math.max(1, Math.floor(wait / 3)),
          },
        ];
      }),
      ensure: async () => {
        for (const spec of specs) topology.forget(spec.stream);
        await ensure(await mayCreate());
      },
    });
  }
  return { count, partitions: built };
}
