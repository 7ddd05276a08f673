import type { ConsumerInfo, JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import { parseDuration } from '../../core/duration.js';
import { DEFAULT_NATS_TRANSPORT_CONFIG, MAX_DELIVER_GRACE } from '../../transport/nats/nats-config.js';
import { loadNatsDriver } from '../../transport/nats/nats-driver.js';
import {
  consumerName,
  deadLetterStream,
  retryStream,
  topicStream,
  type NatsNames,
} from '../../transport/nats/nats-names.js';
import { isNotFound } from '../../transport/nats/nats-topology.js';
import {
  absentFinding,
  brokerNeeds,
  duration,
  retentionFinding,
  timerFinding,
  unlessAbsent,
  unreachableFinding,
  type BrokerNeeds,
} from './broker-thresholds.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

const NANOS_PER_MS = 1_000_000;
const ms = (nanos: number | undefined): number => Math.round((nanos ?? 0) / NANOS_PER_MS);

/**
 * How long a publisher sends the same `Nats-Msg-Id` again while the server does not confirm
 * (`publishTimeout`'s default): a duplicate window shorter than it lets a resend be stored twice.
 */
export const NATS_PUBLISH_RETRY_WINDOW_MS = parseDuration(
  DEFAULT_NATS_TRANSPORT_CONFIG.publishTimeout,
  'publishTimeout',
);

/** The least `max_deliver` the transport ever sets (`maxDeliver` 2 plus the grace): below, it cannot dead-letter. */
export const NATS_LEAST_MAX_DELIVER = 2 + MAX_DELIVER_GRACE;

/** The streams and consumers a group of the deployment reads, checked on a JetStream server. */
export async function natsFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  const url = target.url ?? DEFAULT_NATS_TRANSPORT_CONFIG.servers;
  const names: NatsNames = {
    streamPrefix: target.prefix ?? DEFAULT_NATS_TRANSPORT_CONFIG.streamPrefix,
    subjectPrefix: DEFAULT_NATS_TRANSPORT_CONFIG.subjectPrefix,
  };
  let connection;
  try {
    const driver = await loadNatsDriver();
    connection = await driver.connect({ servers: url, reconnect: false, timeout: 5000 });
    const jsm = await driver.jetstreamManager(connection, { timeout: 5000 });
    return await readAll(jsm, names, target, settings);
  } catch (error) {
    return [
      unreachableFinding(
        'nats',
        url,
        error,
        'start nats-server with JetStream (-js) there, or give --broker-url',
      ),
    ];
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

async function readAll(
  jsm: JetStreamManager,
  names: NatsNames,
  target: BrokerTarget,
  settings: DoctorSettings,
): Promise<Finding[]> {
  const needs = brokerNeeds(settings);
  const stream = (name: string): Promise<StreamInfo | undefined> =>
    unlessAbsent(
      () => jsm.streams.info(name),
      (error) => isNotFound(error, 'stream'),
    );
  const consumer = (name: string, group: string): Promise<ConsumerInfo | undefined> =>
    unlessAbsent(
      () => jsm.consumers.info(name, consumerName(group)),
      (error) => isNotFound(error, 'consumer') || isNotFound(error, 'stream'),
    );
  const findings: Finding[] = [];
  if (target.topic === undefined) {
    findings.push({
      check: 'nats.stream',
      status: 'skip',
      summary: 'no --topic given: the topic stream is not checked',
    });
  } else {
    const name = topicStream(names, target.topic);
    const info = await stream(name);
    if (info === undefined) {
      findings.push(
        absentFinding(
          'nats.stream',
          `stream ${name} (topic ${target.topic})`,
          'start a consumer or publisher with topology create, or check --topic and the stream prefix',
        ),
      );
    } else {
      findings.push(...topicStreamFindings(info, needs));
      if (settings.group !== undefined) {
        const info = await consumer(name, settings.group);
        findings.push(
          ...consumerFindings(`consumer ${consumerName(settings.group)} on ${name}`, info, needs),
        );
      }
    }
  }
  const retry = await stream(retryStream(names));
  findings.push(retryStreamFinding(retryStream(names), retry, needs));
  if (retry !== undefined && settings.group !== undefined) {
    const info = await consumer(retryStream(names), settings.group);
    const where = `consumer ${consumerName(settings.group)} on ${retryStream(names)}`;
    findings.push(
      ...consumerFindings(where, info, needs).map((finding) => ({
        ...finding,
        check: `${finding.check}.retry`,
      })),
    );
  }
  const dead = await stream(deadLetterStream(names));
  findings.push(deadLetterFinding(deadLetterStream(names), dead, needs));
  if (settings.group === undefined) {
    findings.push({
      check: 'nats.consumer',
      status: 'skip',
      summary: 'no --group given: the durable consumers are not checked',
    });
  }
  return findings;
}

function topicStreamFindings(info: StreamInfo, needs: BrokerNeeds): Finding[] {
  const { config } = info;
  const name = config.name;
  const detail = { stream: name };
  const findings: Finding[] = [
    retentionFinding(
      'nats.max-age',
      `stream ${name}`,
      ms(config.max_age),
      needs,
      `nats stream edit ${name} --max-age ${duration(needs.keepMs)} (or the transport's maxAge)`,
      detail,
    ),
  ];
  const windowMs = ms(config.duplicate_window);
  findings.push(
    windowMs === 0 || windowMs < NATS_PUBLISH_RETRY_WINDOW_MS
      ? {
          check: 'nats.duplicate-window',
          status: 'warn',
          summary:
            windowMs === 0
              ? `stream ${name} has no duplicate window: every resend of a publish is stored again (the ledger absorbs it, at the cost of a delivery)`
              : `stream ${name}'s duplicate window ${duration(windowMs)} is shorter than the ${duration(NATS_PUBLISH_RETRY_WINDOW_MS)} a publisher resends the same Nats-Msg-Id: a late resend is stored twice`,
          fix: `nats stream edit ${name} --dupe-window ${duration(Math.max(NATS_PUBLISH_RETRY_WINDOW_MS, 120_000))} (the transport's duplicateWindow)`,
          detail: {
            ...detail,
            duplicateWindowMs: windowMs,
            publishRetryWindowMs: NATS_PUBLISH_RETRY_WINDOW_MS,
          },
        }
      : {
          check: 'nats.duplicate-window',
          status: 'ok',
          summary: `stream ${name}'s duplicate window is ${duration(windowMs)}`,
          detail: { ...detail, duplicateWindowMs: windowMs },
        },
  );
  findings.push(
    config.num_replicas <= 1
      ? {
          check: 'nats.replicas',
          status: 'warn',
          summary: `stream ${name} has ${config.num_replicas} replica: a lost server loses its messages, or stops the topic until it is back`,
          fix: `on a cluster: nats stream edit ${name} --replicas 3 (the transport's replicas)`,
          detail: { ...detail, replicas: config.num_replicas },
        }
      : {
          check: 'nats.replicas',
          status: 'ok',
          summary: `stream ${name} has ${config.num_replicas} replicas`,
          detail,
        },
  );
  if (config.storage === 'memory') {
    findings.push({
      check: 'nats.storage',
      status: 'warn',
      summary: `stream ${name} is kept in memory: a server restart loses every message not yet consumed`,
      fix: 'recreate the stream with file storage (the transport\u2019s storage: file)',
      detail,
    });
  }
  findings.push(limitsFinding(info));
  return findings;
}

/** Count and size limits: with discard `old`, a full stream drops its oldest messages, consumed or not. */
function limitsFinding(info: StreamInfo): Finding {
  const { config } = info;
  const limits = {
    maxMsgs: config.max_msgs,
    maxBytes: config.max_bytes,
    maxMsgsPerSubject: config.max_msgs_per_subject,
    discard: config.discard,
  };
  const set = Object.entries({
    max_msgs: config.max_msgs,
    max_bytes: config.max_bytes,
    max_msgs_per_subject: config.max_msgs_per_subject,
  }).filter(([, value]) => value > 0);
  const detail = { stream: config.name, ...limits };
  if (set.length === 0) {
    return {
      check: 'nats.limits',
      status: 'ok',
      summary: `stream ${config.name} has no count or size limit`,
      detail,
    };
  }
  const listed = set.map(([key, value]) => `${key} ${value}`).join(', ');
  if (config.discard === 'new' && config.max_msgs_per_subject <= 0) {
    return {
      check: 'nats.limits',
      status: 'warn',
      summary: `stream ${config.name} is limited (${listed}) with discard new: once full, publishes are refused (nothing stored is lost)`,
      fix: 'size the limits for the backlog you must absorb, or rely on max_age alone',
      detail,
    };
  }
  return {
    check: 'nats.limits',
    status: 'warn',
    summary: `stream ${config.name} is limited (${listed}) and drops its oldest messages when full, consumed or not: a backlog past the limit is lost`,
    fix: `nats stream edit ${config.name} with the limits removed (-1), or --discard new so a full stream refuses publishes instead`,
    detail,
  };
}

function consumerFindings(where: string, info: ConsumerInfo | undefined, needs: BrokerNeeds): Finding[] {
  if (info === undefined) {
    return [
      absentFinding('nats.consumer', where, 'start the group once with topology create, or check --group'),
    ];
  }
  const { config } = info;
  const detail = { consumer: config.durable_name, stream: info.stream_name };
  const findings: Finding[] = [];
  if (config.ack_policy !== 'explicit') {
    findings.push({
      check: 'nats.ack-policy',
      status: 'fail',
      summary: `${where} has ack policy ${config.ack_policy}: a message counts as done before its outcome is stored`,
      fix: 'recreate the consumer with ack policy explicit (the transport refuses it too)',
      detail,
    });
  }
  findings.push(maxDeliverFinding(where, config.max_deliver ?? -1, needs, detail));
  findings.push(
    timerFinding(
      'nats.ack-wait',
      `${where}'s ack wait`,
      ms(config.ack_wait),
      needs,
      {
        status: 'warn',
        consequence:
          'the copy stays with this member only while every keep-alive (+WPI, a third of the ack wait apart) lands; one lost renewal delivers it again while the handler runs',
        fix: 'subscribe with a visibility above the handler timeout (it sets ack_wait)',
      },
      detail,
    ),
  );
  return findings;
}

/**
 * `max_deliver`: the server's last delivery of one copy. A charged retry is a new copy, so what adds
 * up on a copy are the deliveries that end unsettled; still, fewer than the policy's deliveries, or
 * fewer than the transport's own backstop needs, and a failing message stops coming back before
 * anything dead-letters it: it stays in the stream, seen by no one.
 */
function maxDeliverFinding(
  where: string,
  maxDeliver: number,
  needs: BrokerNeeds,
  detail: Record<string, unknown>,
): Finding {
  const figures = {
    ...detail,
    maxDeliver,
    policyDeliveries: needs.deliveries,
    leastMaxDeliver: NATS_LEAST_MAX_DELIVER,
  };
  if (maxDeliver <= 0) {
    return {
      check: 'nats.max-deliver',
      status: 'ok',
      summary: `${where} delivers without limit`,
      detail: figures,
    };
  }
  const needed = Math.max(needs.deliveries, NATS_LEAST_MAX_DELIVER);
  if (maxDeliver < needed) {
    return {
      check: 'nats.max-deliver',
      status: 'fail',
      summary: `${where} has max_deliver ${maxDeliver}, less than ${needed} (the policy's ${needs.deliveries} deliveries, and at least ${NATS_LEAST_MAX_DELIVER}): the server stops delivering a failing message before it is dead-lettered, and it stays in the stream unseen`,
      fix: `nats consumer edit ${String(detail.stream)} ${String(detail.consumer)} --max-deliver ${Math.max(needed, 64 + MAX_DELIVER_GRACE)} (the transport's maxDeliver + ${MAX_DELIVER_GRACE})`,
      detail: figures,
    };
  }
  return {
    check: 'nats.max-deliver',
    status: 'ok',
    summary: `${where} has max_deliver ${maxDeliver}, at least the policy's ${needs.deliveries} deliveries`,
    detail: figures,
  };
}

/** The shared retry stream: copies wait in it for their delay, so it must keep them at least that long. */
function retryStreamFinding(name: string, info: StreamInfo | undefined, needs: BrokerNeeds): Finding {
  if (info === undefined) {
    return absentFinding(
      'nats.retry-stream',
      `retry stream ${name}`,
      'start a consumer once with topology create',
    );
  }
  const maxAgeMs = ms(info.config.max_age);
  const detail = { stream: name, maxAgeMs, longestDelayMs: needs.longestDelayMs };
  if (maxAgeMs > 0 && maxAgeMs < needs.longestDelayMs) {
    return {
      check: 'nats.retry-stream',
      status: 'fail',
      summary: `retry stream ${name} keeps copies ${duration(maxAgeMs)}, less than the policy's longest delay ${duration(needs.longestDelayMs)}: a retry copy expires before it is due`,
      fix: `nats stream edit ${name} --max-age 0`,
      detail,
    };
  }
  return {
    check: 'nats.retry-stream',
    status: 'ok',
    summary: `retry stream ${name} keeps copies ${duration(maxAgeMs)}`,
    detail,
  };
}

/** The dead-letter stream: dead letters must stay for the replay margin. */
function deadLetterFinding(name: string, info: StreamInfo | undefined, needs: BrokerNeeds): Finding {
  if (info === undefined) {
    return absentFinding(
      'nats.dead-letter-stream',
      `dead-letter stream ${name}`,
      'start a consumer once with topology create',
    );
  }
  const maxAgeMs = ms(info.config.max_age);
  const detail = { stream: name, maxAgeMs, replayMarginMs: needs.replayMarginMs };
  if (maxAgeMs > 0 && maxAgeMs < needs.replayMarginMs) {
    return {
      check: 'nats.dead-letter-stream',
      status: 'warn',
      summary: `dead-letter stream ${name} keeps dead letters ${duration(maxAgeMs)}, less than the replay margin ${duration(needs.replayMarginMs)}`,
      fix: `nats stream edit ${name} --max-age ${duration(needs.replayMarginMs)}`,
      detail,
    };
  }
  return {
    check: 'nats.dead-letter-stream',
    status: 'ok',
    summary: `dead-letter stream ${name} keeps dead letters ${duration(maxAgeMs)}`,
    detail,
  };
}
