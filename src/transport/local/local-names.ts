import { ConfigError } from '../../core/errors.js';

/** User topics: letters, digits and `_ . : | -`, 1 to 127 characters (`%` is kept for system topics). */
export const TOPIC_PATTERN = /^[A-Za-z0-9_.:|-]{1,127}$/;

/** The topic, when it is a valid user topic; else a `ConfigError` on `topic`. */
export function validTopic(topic: string): string {
  if (typeof topic !== 'string' || !TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      'topic',
      `${JSON.stringify(topic)} is not a valid topic; use 1 to 127 letters, digits or _ . : | -`,
    );
  }
  return topic;
}

/** Topic a group's failed messages are re-stored in when their delay is due (RocketMQ's `%RETRY%group`). */
export function retryTopic(group: string): string {
  return `%RETRY%${group}`;
}

/** Topic of half messages still undecided after the most check-backs (RocketMQ's name). */
export const CHECK_MAX_TOPIC = 'TRANS_CHECK_MAX_TIME_TOPIC';
