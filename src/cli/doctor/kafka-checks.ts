import type { Admin } from '@platformatic/kafka';
import { brokersOfUrl } from '../../transport/kafka/kafka-config.js';
import { loadKafkaDriver } from '../../transport/kafka/kafka-driver.js';
import { KafkaNames } from '../../transport/kafka/kafka-names.js';
import {
  absentFinding,
  brokerNeeds,
  duration,
  retentionFinding,
  unreachableFinding,
  type BrokerNeeds,
} from './broker-thresholds.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

/** `ConfigResourceTypes.TOPIC` of the Kafka protocol. */
const TOPIC_RESOURCE = 2;

/** The topic settings the checks read (`describeConfigs`). */
const TOPIC_KEYS = [
  'retention.ms',
  'retention.bytes',
  'min.insync.replicas',
  'unclean.leader.election.enable',
  'cleanup.policy',
] as const;

type TopicConfig = Readonly<Record<(typeof TOPIC_KEYS)[number], string | undefined>>;

/** The topic a group reads, the group's retry tiers and dead-letter topic, checked with the admin client. */
export async function kafkaFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  const url = target.url ?? 'kafka://127.0.0.1:9092';
  let admin: Admin | undefined;
  try {
    const driver = await loadKafkaDriver();
    const brokers = brokersOfUrl(url).map(({ host, port }) => `${host}:${port}`);
    admin = new driver.Admin({
      clientId: 'oncemq-doctor',
      bootstrapBrokers: brokers,
      retries: 2,
      timeout: 5000,
    });
    const topics = new Set(await admin.listTopics());
    return await readAll(admin, topics, target, settings);
  } catch (error) {
    return [
      unreachableFinding('kafka', url, error, 'start Kafka there, or give --broker-url kafka://host:port'),
    ];
  } finally {
    await admin?.close().catch(() => undefined);
  }
}

async function readAll(
  admin: Admin,
  topics: ReadonlySet<string>,
  target: BrokerTarget,
  settings: DoctorSettings,
): Promise<Finding[]> {
  const needs = brokerNeeds(settings);
  const names = new KafkaNames(target.prefix ?? 'oncemq');
  const findings: Finding[] = [];
  if (target.topic === undefined) {
    findings.push({
      check: 'kafka.topic',
      status: 'skip',
      summary: 'no --topic given: the topic is not checked',
    });
  } else if (!topics.has(target.topic)) {
    findings.push(
      absentFinding(
        'kafka.topic',
        `topic ${target.topic}`,
        'start a consumer once with topology create, or check --topic (with the namespace)',
      ),
    );
  } else {
    findings.push(...(await topicFindings(admin, target.topic, needs)));
  }
  if (settings.group === undefined) {
    findings.push({
      check: 'kafka.group-topics',
      status: 'skip',
      summary: 'no --group given: the retry and dead-letter topics are not checked',
    });
    return findings;
  }
  const dead = names.deadLetterTopic(settings.group);
  if (!topics.has(dead)) {
    findings.push(
      absentFinding(
        'kafka.dead-letter-topic',
        `dead-letter topic ${dead}`,
        'start the group once with topology create',
      ),
    );
  } else {
    const config = await topicConfig(admin, dead);
    const retentionMs = Number(config['retention.ms'] ?? -1);
    findings.push(
      retentionMs > 0 && retentionMs < needs.replayMarginMs
        ? {
            check: 'kafka.dead-letter-topic',
            status: 'warn',
            summary: `dead-letter topic ${dead} keeps records ${duration(retentionMs)}, less than the replay margin ${duration(needs.replayMarginMs)}`,
            fix: `kafka-configs --alter --entity-type topics --entity-name ${dead} --add-config retention.ms=${needs.replayMarginMs}`,
            detail: { topic: dead, retentionMs },
          }
        : {
            check: 'kafka.dead-letter-topic',
            status: 'ok',
            summary: `dead-letter topic ${dead} keeps records ${duration(retentionMs)}`,
            detail: { topic: dead, retentionMs },
          },
    );
  }
  for (const topic of [...topics]
    .filter((name) => names.retryDelayOf(settings.group as string, name) !== null)
    .sort()) {
    const delayMs = names.retryDelayOf(settings.group, topic) ?? 0;
    const retentionMs = Number((await topicConfig(admin, topic))['retention.ms'] ?? -1);
    const detail = { topic, retentionMs, delayMs };
    findings.push(
      retentionMs > 0 && retentionMs <= delayMs
        ? {
            check: 'kafka.retry-topic',
            status: 'fail',
            summary: `retry topic ${topic} keeps records ${duration(retentionMs)}, not longer than its delay ${duration(delayMs)}: a retry can be deleted before it is due`,
            fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config retention.ms=${Math.max(delayMs * 2, needs.keepMs)}`,
            detail,
          }
        : {
            check: 'kafka.retry-topic',
            status: 'ok',
            summary: `retry topic ${topic} keeps records ${duration(retentionMs)}, longer than its delay ${duration(delayMs)}`,
            detail,
          },
    );
  }
  return findings;
}

async function topicConfig(admin: Admin, topic: string): Promise<TopicConfig> {
  const [description] = await admin.describeConfigs({
    resources: [{ resourceType: TOPIC_RESOURCE, resourceName: topic, configurationKeys: [...TOPIC_KEYS] }],
  });
  const values: Record<string, string | undefined> = {};
  for (const entry of description?.configs ?? []) values[entry.name] = entry.value ?? undefined;
  return values as TopicConfig;
}

async function topicFindings(admin: Admin, topic: string, needs: BrokerNeeds): Promise<Finding[]> {
  const config = await topicConfig(admin, topic);
  const metadata = await admin.metadata({ topics: [topic] });
  const partitions = metadata.topics.get(topic)?.partitions ?? [];
  const replicationFactor = Math.min(...partitions.map((partition) => partition.replicas.length));
  const minInsync = Number(config['min.insync.replicas'] ?? 1);
  const cleanup = (config['cleanup.policy'] ?? 'delete').split(',').map((word) => word.trim());
  const detail = { topic };
  const retentionMs = Number(config['retention.ms'] ?? -1);
  const fix = `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config retention.ms=${needs.keepMs}`;
  const findings: Finding[] = [
    cleanup.includes('delete')
      ? retentionFinding('kafka.retention', `topic ${topic}`, retentionMs, needs, fix, detail)
      : {
          check: 'kafka.retention',
          status: 'ok',
          summary: `topic ${topic} deletes nothing by age (cleanup.policy ${cleanup.join(',')})`,
          detail,
        },
  ];
  const retentionBytes = Number(config['retention.bytes'] ?? -1);
  if (cleanup.includes('delete') && retentionBytes > 0) {
    findings.push({
      check: 'kafka.retention-bytes',
      status: 'warn',
      summary: `topic ${topic} keeps at most ${retentionBytes} bytes per partition: a backlog past it is deleted whatever its age, unconsumed or not`,
      fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config retention.bytes=-1`,
      detail: { ...detail, retentionBytes },
    });
  }
  if (cleanup.includes('compact')) {
    findings.push({
      check: 'kafka.cleanup-policy',
      status: 'warn',
      summary: `topic ${topic} is compacted (cleanup.policy ${cleanup.join(',')}): records of one Kafka key are dropped once a newer one is written, even unconsumed`,
      fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config cleanup.policy=delete`,
      detail: { ...detail, cleanupPolicy: cleanup.join(',') },
    });
  }
  if (config['unclean.leader.election.enable'] === 'true') {
    findings.push({
      check: 'kafka.unclean-leader-election',
      status: 'fail',
      summary: `topic ${topic} allows unclean leader election: an out-of-sync replica can become leader and lose confirmed records`,
      fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config unclean.leader.election.enable=false`,
      detail,
    });
  } else {
    findings.push({
      check: 'kafka.unclean-leader-election',
      status: 'ok',
      summary: `topic ${topic} elects only in-sync leaders`,
      detail,
    });
  }
  findings.push(replicationFinding(topic, replicationFactor, minInsync));
  return findings;
}

/**
 * Replication factor against `min.insync.replicas`: with 1 in sync required and more replicas, a
 * confirmed record may sit on one node; with all of them required, one node down stops writes.
 */
function replicationFinding(topic: string, replicationFactor: number, minInsync: number): Finding {
  const detail = { topic, replicationFactor, minInsyncReplicas: minInsync };
  const said = `topic ${topic} has replication factor ${replicationFactor} and min.insync.replicas ${minInsync}`;
  if (replicationFactor <= 1) {
    return {
      check: 'kafka.replication',
      status: 'warn',
      summary: `${said}: one copy, a lost broker loses the topic`,
      fix: 'on a cluster, recreate or reassign the topic with 3 replicas',
      detail,
    };
  }
  if (minInsync <= 1) {
    return {
      check: 'kafka.replication',
      status: 'warn',
      summary: `${said}: a record confirmed with acks=all may sit on one node only, and is lost with it`,
      fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config min.insync.replicas=${replicationFactor - 1}`,
      detail,
    };
  }
  if (minInsync >= replicationFactor) {
    return {
      check: 'kafka.replication',
      status: 'warn',
      summary: `${said}: one broker down stops every write to the topic`,
      fix: `kafka-configs --alter --entity-type topics --entity-name ${topic} --add-config min.insync.replicas=${replicationFactor - 1}`,
      detail,
    };
  }
  return { check: 'kafka.replication', status: 'ok', summary: said, detail };
}
