import { ConfigError } from '../../core/errors.js';

/** RocketMQ's dead-letter topic of a group, where the broker moves what it gave up on and oncemq writes its own. */
export function deadLetterTopic(group: string): string {
  return `%DLQ%${group}`;
}

/** Topic names RocketMQ accepts (`TopicValidator`): letters, digits, `%`, `|`, `_`, `-`, at most 127. */
export const ROCKETMQ_TOPIC_PATTERN = /^[%|a-zA-Z0-9_-]{1,127}$/;

/** Consumer group names RocketMQ accepts. */
export const ROCKETMQ_GROUP_PATTERN = /^[%|a-zA-Z0-9_-]{1,255}$/;

export function validRocketMQTopic(topic: string): string {
  if (!ROCKETMQ_TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      'topic',
      `'${topic}' is not a RocketMQ topic name (${String(ROCKETMQ_TOPIC_PATTERN)})`,
    );
  }
  return topic;
}

export function validRocketMQGroup(group: string): string {
  if (!ROCKETMQ_GROUP_PATTERN.test(group)) {
    throw new ConfigError(
      'group',
      `'${group}' is not a RocketMQ group name (${String(ROCKETMQ_GROUP_PATTERN)})`,
    );
  }
  return group;
}

/**
 * Property of a replayed copy naming the one group it is for: it goes to the topic, and every other
 * group's members ack it without processing it.
 */
export const REPLAY_GROUP_PROPERTY = 'oncemq-replay-group';

/** Property of a marker appended to `%DLQ%<group>`: the id of a dead letter replayed or purged. */
export const REMOVED_PROPERTY = 'oncemq-dead-removed';

/** Reason of a dead letter the broker moved on its own after `retryMaxTimes` redeliveries. */
export const MAX_DELIVERIES_REASON = 'max-deliveries';
