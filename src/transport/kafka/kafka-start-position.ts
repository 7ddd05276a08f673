import type { Admin } from '@platformatic/kafka';
import { errorText, TransportUnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

/**
 * Starts a Kafka group at `now` on the partitions of `topics` where it has no committed offset: their
 * end offsets are committed for it before its first member joins, so whichever member gets a partition
 * later reads from there (a partition with no offset would otherwise start wherever the reset policy
 * says at the moment it is assigned, after messages published since `subscribe()` resolved). A
 * partition with an offset keeps it. Kafka takes such a commit only from a group with no member: a
 * group that has one already started (another member did this before it joined), and a running group
 * adding a topic starts on it from the earliest offset, which is logged.
 */
export async function startGroupNow(
  admin: Admin,
  groupId: string,
  topics: readonly string[],
  logger: Logger,
): Promise<void> {
  const metadata = await call('read topic metadata', () =>
    admin.metadata({ topics: [...topics], forceUpdate: true }),
  );
  const wanted = topics.map((name) => ({
    name,
    partitionIndexes: Array.from(
      { length: metadata.topics.get(name)?.partitions.length ?? 0 },
      (_, index) => index,
    ),
  }));
  const missing = await withoutOffsets(admin, groupId, wanted);
  if (missing.length === 0) return;
  const ends = await call('list end offsets', () =>
    admin.listOffsets({
      topics: missing.map(({ name, partitionIndexes }) => ({
        name,
        partitions: partitionIndexes.map((partitionIndex) => ({ partitionIndex, timestamp: -1n })),
      })),
    }),
  );
  try {
    await admin.alterConsumerGroupOffsets({
      groupId,
      topics: ends.map((topic) => ({
        name: topic.name,
        partitionOffsets: topic.partitions.map((p) => ({ partition: p.partitionIndex, offset: p.offset })),
      })),
    });
  } catch (error) {
    // Refused for a group with members: fine when one of them started it meanwhile.
    const left = await withoutOffsets(admin, groupId, missing);
    if (left.length === 0) return;
    logger.warn(
      'oncemq: cannot start the Kafka group at now on partitions without an offset (the group has members); they start at the earliest offset',
      { group: groupId, topics: left.map(({ name }) => name), error: errorText(error) },
    );
  }
}

interface TopicPartitions {
  readonly name: string;
  readonly partitionIndexes: readonly number[];
}

/** The partitions among `wanted` that the group has no committed offset on. */
async function withoutOffsets(
  admin: Admin,
  groupId: string,
  wanted: readonly TopicPartitions[],
): Promise<TopicPartitions[]> {
  const committed = await call('read committed offsets', () =>
    admin.listConsumerGroupOffsets({
      groups: [
        {
          groupId,
          topics: wanted.map((topic) => ({ ...topic, partitionIndexes: [...topic.partitionIndexes] })),
        },
      ],
    }),
  );
  return wanted
    .map(({ name, partitionIndexes }) => {
      const found = committed[0]?.topics.find((topic) => topic.name === name)?.partitions ?? [];
      const have = new Set(found.filter((p) => p.committedOffset >= 0n).map((p) => p.partitionIndex));
      return { name, partitionIndexes: partitionIndexes.filter((index) => !have.has(index)) };
    })
    .filter(({ partitionIndexes }) => partitionIndexes.length > 0);
}

async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new TransportUnavailableError(`kafka: cannot ${what}: ${errorText(error)}`, { cause: error });
  }
}
