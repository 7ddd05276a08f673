import type { DeadLetters } from '../transport/dead-letters.js';
import type { Transport } from '../transport/transport.js';

/** The broker's name of a run's topic or group: `<namespace>-<name>`. */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}-${name}`;
}

/**
 * A transport whose topics and groups are `<namespace>-<name>` at the broker, for brokers where topic
 * and group names are global to the cluster (Kafka, RocketMQ): a run's `payment-succeeded` topic and
 * `points` group are its own, whatever other runs or programs use the same broker. Dead letters are
 * listed, replayed and purged by the run's group name and listed under it.
 */
export function namespacedTransport(inner: Transport, namespace: string): Transport {
  const named = (name: string): string => namespacedName(namespace, name);
  const letters = inner.deadLetters;
  const depth = letters.depth?.bind(letters);
  const deadLetters: DeadLetters = {
    list: async (query) =>
      (await letters.list({ ...query, group: named(query.group) })).map((letter) => ({
        ...letter,
        group: query.group,
      })),
    replay: (group, ids) => letters.replay(named(group), ids),
    purge: (group, ids) => letters.purge(named(group), ids),
    ...(depth === undefined ? {} : { depth: (group: string) => depth(named(group)) }),
  };
  return {
    name: inner.name,
    get capabilities() {
      return inner.capabilities;
    },
    publish: (message) => inner.publish({ ...message, topic: named(message.topic) }),
    subscribe: (group, topics, processor, options) =>
      inner.subscribe(named(group), topics.map(named), processor, options),
    deadLetters,
    close: () => inner.close(),
  };
}
