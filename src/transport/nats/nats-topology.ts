import type {
  ConsumerConfig,
  ConsumerInfo,
  JetStreamManager,
  StreamConfig,
  StreamInfo,
} from '@nats-io/jetstream';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import type { StartPosition } from '../transport.js';
import { MAX_DELIVER_GRACE, type NatsSettings } from './nats-config.js';
import {
  deadLetterStream,
  deadLetterSubjects,
  leaseStream,
  leaseSubjects,
  orderingStream,
  orderingSubjects,
  retryStream,
  retrySubjects,
  slotSubjects,
  topicStream,
  topicSubject,
} from './nats-names.js';

const NANOS_PER_MS = 1_000_000;

/** What a pull loop reads from: a durable consumer on a stream. */
export interface ConsumerSpec {
  readonly stream: string;
  readonly name: string;
  /** Only on the shared retry stream: the group's retry subject. */
  readonly filterSubject?: string;
  readonly ackWaitMs: number;
  /**
   * A consumer made now starts at this stream sequence (`deliver_policy: by_start_sequence`) instead
   * of the first message still in the stream: the new count's consumers of a drain.
   */
  readonly startSeq?: number;
  /**
   * Where a consumer made now starts when it has no `startSeq`: `earliest`, the first message still
   * in the stream (`deliver_policy: all`), or `now`, the next one published (`deliver_policy: new`).
   * @default 'earliest'
   */
  readonly from?: StartPosition;
  /**
   * False: the consumer is only read, never made or changed, whatever the topology says (an old
   * count's consumer of a drain, which the drain deletes once it is empty). @default true
   */
  readonly create?: boolean;
}

/** True for the JetStream API's "stream not found" and "consumer not found" answers. */
export function isNotFound(error: unknown, what: 'stream' | 'consumer'): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  const message = (error as { message?: unknown } | null)?.message;
  if (what === 'stream') return name === 'StreamNotFoundError' || message === 'stream not found';
  return name === 'ConsumerNotFoundError' || message === 'consumer not found';
}

function unavailable(what: string, error: unknown): TransportUnavailableError {
  return new TransportUnavailableError(`NATS: ${what} failed: ${(error as Error).message}`, { cause: error });
}

/**
 * Creates or checks the streams and durable consumers the transport uses. With topology `check`
 * nothing is created or changed, and anything missing is a `ConfigError` naming it.
 */
export class NatsTopology {
  readonly #jsm: JetStreamManager;
  readonly #settings: NatsSettings;
  readonly #streams = new Map<string, Promise<StreamInfo>>();
  /** The shortest duplicate window of the streams seen so far. */
  duplicateWindowMs: number;

  constructor(jsm: JetStreamManager, settings: NatsSettings) {
    this.#jsm = jsm;
    this.#settings = settings;
    this.duplicateWindowMs = settings.duplicateWindowMs;
  }

  get manager(): JetStreamManager {
    return this.#jsm;
  }

  topicStream(topic: string): Promise<StreamInfo> {
    return this.#stream({
      name: topicStream(this.#settings, topic),
      subjects: [topicSubject(this.#settings, topic), slotSubjects(this.#settings, topic)],
      retention: 'limits',
      max_age: this.#settings.maxAgeMs * NANOS_PER_MS,
    });
  }

  /** Partition leases of ordered groups: the last entry of a subject is its owner, gone after `max_age`. */
  leaseStream(): Promise<StreamInfo> {
    return this.#stream({
      name: leaseStream(this.#settings),
      subjects: [leaseSubjects(this.#settings)],
      retention: 'limits',
      max_age: this.#settings.partitionLeaseMs * NANOS_PER_MS,
      duplicate_window: this.#settings.partitionLeaseMs * NANOS_PER_MS,
      max_msgs_per_subject: 1,
    });
  }

  /** The partition count each ordered group recorded: the last entry of the group's subject. */
  orderingStream(): Promise<StreamInfo> {
    return this.#stream({
      name: orderingStream(this.#settings),
      subjects: [orderingSubjects(this.#settings)],
      retention: 'limits',
      max_msgs_per_subject: 1,
    });
  }

  /** The retry stream: a work queue (a copy is gone once acked); one filtered consumer per group. */
  retryStream(): Promise<StreamInfo> {
    return this.#stream({
      name: retryStream(this.#settings),
      subjects: [retrySubjects(this.#settings)],
      retention: 'workqueue',
    });
  }

  deadLetterStream(): Promise<StreamInfo> {
    return this.#stream({
      name: deadLetterStream(this.#settings),
      subjects: [deadLetterSubjects(this.#settings)],
      retention: 'limits',
    });
  }

  /** Forgets what is known of a stream (it was deleted under the transport): the next use checks again. */
  forget(stream: string): void {
    this.#streams.delete(stream);
  }

  #stream(
    wanted: Pick<StreamConfig, 'name' | 'subjects' | 'retention'> & Partial<StreamConfig>,
  ): Promise<StreamInfo> {
    let known = this.#streams.get(wanted.name);
    if (known === undefined) {
      known = this.#ensureStream(wanted);
      known.catch(() => this.#streams.delete(wanted.name));
      this.#streams.set(wanted.name, known);
    }
    return known;
  }

  async #ensureStream(
    wanted: Pick<StreamConfig, 'name' | 'subjects' | 'retention'> & Partial<StreamConfig>,
  ): Promise<StreamInfo> {
    const settings = this.#settings;
    const { name } = wanted;
    let info = await this.#streamInfo(name);
    if (info === null) {
      if (settings.topology === 'check') {
        throw new ConfigError(
          'topology',
          `NATS stream ${name} does not exist (topology 'check' creates nothing); create it, or use topology 'create'`,
        );
      }
      try {
        info = await this.#jsm.streams.add({
          ...wanted,
          storage: settings.storage,
          num_replicas: settings.replicas,
          duplicate_window: settings.duplicateWindowMs * NANOS_PER_MS,
          ...wanted,
        });
        settings.logger.info('oncemq: created NATS stream', { stream: name, subjects: wanted.subjects });
      } catch (error) {
        // Another member may have created it at the same moment.
        info = await this.#streamInfo(name);
        if (info === null && /subjects overlap/i.test(errorText(error))) {
          // Another stream has these subjects: another namespace with the same subject prefix.
          throw new ConfigError(
            'subjectPrefix',
            `NATS stream ${name} cannot take subjects ${wanted.subjects.join(', ')}: another stream on the server has them ` +
              `(another application with subject prefix '${settings.subjectPrefix}'); give each application a subjectPrefix of its own, as well as a streamPrefix`,
            { cause: error },
          );
        }
        if (info === null) throw unavailable(`creating stream ${name}`, error);
      }
    }
    const subjects = info.config.subjects;
    const missing = wanted.subjects.filter((subject) => !subjects.includes(subject));
    if (missing.length > 0 && settings.topology === 'create' && subjects.includes(wanted.subjects[0] ?? '')) {
      // A topic stream made before producers published on slot subjects: it gains them.
      try {
        info = await this.#jsm.streams.update(name, { subjects: [...subjects, ...missing] });
        missing.length = 0;
      } catch (error) {
        throw unavailable(`adding subjects ${missing.join(', ')} to stream ${name}`, error);
      }
    }
    if (missing.length > 0) {
      throw new ConfigError(
        'topology',
        `NATS stream ${name} exists without subject ${missing.join(', ')} (it has ${subjects.join(', ')})`,
      );
    }
    if (info.config.retention !== wanted.retention) {
      throw new ConfigError(
        'topology',
        `NATS stream ${name} has retention ${info.config.retention}, oncemq needs ${wanted.retention}`,
      );
    }
    // A stream with a window of its own (the lease stream: no larger than its max age) keeps it.
    if (wanted.duplicate_window !== undefined) return info;
    const windowMs = info.config.duplicate_window / NANOS_PER_MS;
    if (windowMs !== settings.duplicateWindowMs && settings.topology === 'create') {
      try {
        info = await this.#jsm.streams.update(name, {
          duplicate_window: settings.duplicateWindowMs * NANOS_PER_MS,
        });
      } catch (error) {
        throw unavailable(`updating the duplicate window of stream ${name}`, error);
      }
    }
    this.duplicateWindowMs = Math.min(this.duplicateWindowMs, info.config.duplicate_window / NANOS_PER_MS);
    return info;
  }

  async #streamInfo(name: string): Promise<StreamInfo | null> {
    try {
      return await this.#jsm.streams.info(name);
    } catch (error) {
      if (isNotFound(error, 'stream')) return null;
      throw unavailable(`reading stream ${name}`, error);
    }
  }

  /**
   * Creates the durable pull consumer, or updates the settings oncemq owns (ack wait, max deliver,
   * max ack pending) when they differ; with topology `check`, only reads it.
   */
  async consumer(spec: ConsumerSpec): Promise<ConsumerInfo> {
    const settings = this.#settings;
    const where = `NATS consumer ${spec.name} on stream ${spec.stream}`;
    const wanted = {
      ack_wait: spec.ackWaitMs * NANOS_PER_MS,
      max_deliver: settings.maxDeliver + MAX_DELIVER_GRACE,
      max_ack_pending: settings.maxAckPending,
    };
    const create = settings.topology === 'create' && spec.create !== false;
    let info = await this.#consumerInfo(spec);
    if (info === null) {
      if (!create) {
        throw new ConfigError(
          'topology',
          spec.create === false
            ? `${where} does not exist`
            : `${where} does not exist (topology 'check' creates nothing); create it, or use topology 'create'`,
        );
      }
      const config: Partial<ConsumerConfig> = {
        durable_name: spec.name,
        ack_policy: 'explicit',
        ...(spec.startSeq === undefined
          ? { deliver_policy: spec.from === 'now' ? ('new' as const) : ('all' as const) }
          : { deliver_policy: 'by_start_sequence' as const, opt_start_seq: spec.startSeq }),
        ...wanted,
        ...(spec.filterSubject === undefined ? {} : { filter_subject: spec.filterSubject }),
      };
      try {
        info = await this.#jsm.consumers.add(spec.stream, config);
        settings.logger.info('oncemq: created NATS consumer', { stream: spec.stream, consumer: spec.name });
      } catch (error) {
        info = await this.#consumerInfo(spec);
        if (info === null) throw unavailable(`creating ${where}`, error);
      }
    }
    if (info.config.ack_policy !== 'explicit') {
      throw new ConfigError(
        'topology',
        `${where} has ack policy ${info.config.ack_policy}; oncemq needs explicit acks`,
      );
    }
    if (spec.filterSubject !== undefined && info.config.filter_subject !== spec.filterSubject) {
      throw new ConfigError(
        'topology',
        `${where} filters ${String(info.config.filter_subject)}, not ${spec.filterSubject}`,
      );
    }
    const differs =
      info.config.ack_wait !== wanted.ack_wait ||
      info.config.max_deliver !== wanted.max_deliver ||
      (info.config.max_ack_pending ?? -1) !== wanted.max_ack_pending;
    if (differs && create) {
      try {
        info = await this.#jsm.consumers.update(spec.stream, spec.name, wanted);
      } catch (error) {
        throw unavailable(`updating ${where}`, error);
      }
    }
    return info;
  }

  async #consumerInfo(spec: ConsumerSpec): Promise<ConsumerInfo | null> {
    try {
      return await this.#jsm.consumers.info(spec.stream, spec.name);
    } catch (error) {
      if (isNotFound(error, 'consumer')) return null;
      if (isNotFound(error, 'stream')) {
        this.forget(spec.stream);
        throw new ConfigError('topology', `NATS stream ${spec.stream} does not exist`, { cause: error });
      }
      throw unavailable(`reading consumer ${spec.name} on ${spec.stream}`, error);
    }
  }
}
