/**
 * What the tests need from src/ beyond the package's entry points: helpers, name builders and internal
 * classes a user never imports. Tests import users' names from `oncemq` and `oncemq/<entry>`, and
 * everything else from here, so this file is the one list of internals the tests depend on.
 */
export { dlqCommand } from '../../src/cli/commands/dlq.js';
export { doctorCommand, runDoctor } from '../../src/cli/commands/doctor.js';
export { parseLedgerDdl } from '../../src/cli/doctor/expected-schema.js';
export { clockFinding, sizeFinding } from '../../src/cli/doctor/ledger-checks.js';
export { parseRetryOption } from '../../src/cli/doctor/retry-option.js';
export { mysqlMigrations } from '../../src/ledger/mysql/mysql-schema.js';
export { pgMigrations } from '../../src/ledger/postgres/postgres-ledger-sql.js';
export { migrations as sqliteMigrations } from '../../src/ledger/sqlite/sqlite-ledger-sql.js';
export { ConnectionCuts, cutGaps } from '../../src/cli/connection-cuts.js';
export { resolveServiceUrl, SERVICE_CONNECTIONS } from '../../src/cli/connection.js';
export { openDashboardSources } from '../../src/cli/dashboard/cli-sources.js';
export type { DashboardTargets } from '../../src/cli/dashboard/cli-sources.js';
export type { DashboardState, ResetAnswer } from '../../src/cli/dashboard/dashboard-api.js';
export { startDashboard } from '../../src/cli/dashboard/dashboard-server.js';
export type { Dashboard } from '../../src/cli/dashboard/dashboard-server.js';
export { totalsOfScrape } from '../../src/cli/dashboard/prometheus-totals.js';
export { brokerNeeds } from '../../src/cli/doctor/broker-thresholds.js';
export { brokerFindings } from '../../src/cli/doctor/brokers.js';
export { groupQueueFindings } from '../../src/cli/doctor/sqs-checks.js';
export type { BrokerTarget, DoctorSettings, Finding } from '../../src/cli/doctor/findings.js';
export { runDemo } from '../../src/cli/demo-run.js';
export { progressReporter } from '../../src/cli/progress.js';
export { redactedLocation, storeOfUrl } from '../../src/cli/stores.js';
export { formatDuration, parseDuration } from '../../src/core/duration.js';
export { errorText } from '../../src/core/errors.js';
export { sha256Hex } from '../../src/core/fingerprint.js';
export { validateGroup } from '../../src/core/group.js';
export { HeaderText, NON_KEY } from '../../src/core/header-text.js';
export { compileKeySource, HASHED_KEY_PREFIX, normalizeKey, parseJsonPath } from '../../src/core/key.js';
export { LogRateLimit, MAX_LOG_KINDS } from '../../src/core/log-rate-limit.js';
export { logsDebug, toLogger } from '../../src/core/logger.js';
export { checkRetention } from '../../src/core/retry-policy.js';
export { redactUrl, unreachableCause, unreachableMessage } from '../../src/core/unreachable.js';
export { resolveHttpEdgeConfig } from '../../src/http/http-edge-config.js';
export { decodeStoredResponse, encodeStoredResponse } from '../../src/http/http-response.js';
export { idempotencyKeyProblem, parseIdempotencyKey } from '../../src/http/idempotency-key.js';
export { planBatch } from '../../src/ledger/batch-claim.js';
export { fitMetadata, MAX_OWNER_LENGTH } from '../../src/ledger/claim-request.js';
export { runClaimTransaction } from '../../src/ledger/mysql/mysql-transaction.js';
export { ownerToken } from '../../src/ledger/owner-token.js';
export { liveRowsSelect } from '../../src/ledger/postgres/postgres-partitions.js';
export { RedisBatcher } from '../../src/ledger/redis/redis-batch.js';
export { CallDeadlines } from '../../src/ledger/redis/redis-like.js';
export { redisKey } from '../../src/ledger/redis/redis-record.js';
export { RedisScript } from '../../src/ledger/redis/redis-scripts.js';
export { sqlIdentifier } from '../../src/ledger/sql-identifier.js';
export { CircuitBreaker } from '../../src/ledger/tiered/circuit-breaker.js';
export { drizzleStatement } from '../../src/orm/drizzle-statement.js';
export { prismaTransactionOptions } from '../../src/orm/prisma-bridge.js';
export { statementKind } from '../../src/orm/statement-kind.js';
export {
  keyOf,
  outcomeFor,
  sleep,
  unique,
  waitFor,
} from '../../src/testing/transport-conformance-fixture.js';
export type { Answer } from '../../src/testing/transport-conformance-fixture.js';
export {
  DEAD_LETTER_SIZE_RESERVE,
  fitDeadLetter,
  refuseCutReplay,
  sendDeadLetterThenAck,
} from '../../src/transport/dead-letters.js';
export { checkDeliveryCount, checkRetryDue, guardHeaders } from '../../src/transport/header-guard.js';
export { brokersOfUrl, resolveKafkaSettings } from '../../src/transport/kafka/kafka-config.js';
export { createAdmin, loadKafkaDriver, openRecordStream } from '../../src/transport/kafka/kafka-driver.js';
export { KafkaNames } from '../../src/transport/kafka/kafka-names.js';
export { PartitionOffsets } from '../../src/transport/kafka/kafka-partition-offsets.js';
export { KafkaTopology } from '../../src/transport/kafka/kafka-topology.js';
export { allocateQueues } from '../../src/transport/local/local-queue-allocation.js';
export { stableHash } from '../../src/transport/local/local-queue-selector.js';
export { CHECK_MAX_TOPIC } from '../../src/transport/local/local-names.js';
export { LocalSubscription } from '../../src/transport/local/local-subscription.js';
export { TransportNamespace } from '../../src/transport/namespace.js';
export { resolveNatsSettings } from '../../src/transport/nats/nats-config.js';
export { NatsConfirms } from '../../src/transport/nats/nats-confirms.js';
export { CountWatch } from '../../src/transport/nats/nats-count-watch.js';
export { loadNatsDriver } from '../../src/transport/nats/nats-driver.js';
export {
  leaseStream,
  leaseSubject,
  partitionConsumer,
  RETRY_DUE_HEADER as NATS_RETRY_DUE_HEADER,
  RETRY_TOPIC_HEADER as NATS_RETRY_TOPIC_HEADER,
} from '../../src/transport/nats/nats-names.js';
export { readOrderingRecord } from '../../src/transport/nats/nats-partition-count.js';
export { PartitionLease } from '../../src/transport/nats/nats-partition-lease.js';
export { NatsTopology } from '../../src/transport/nats/nats-topology.js';
export { JETSTREAM_MAX_HEADER_BYTES } from '../../src/transport/nats/nats-transport.js';
export { GateClosedError, OrderingGate } from '../../src/transport/ordered/ordering-gate.js';
export { NOT_RENEWED, PartitionLeases, TAKEN_OVER } from '../../src/transport/ordered/partition-leases.js';
export type { LeaseRound, LeaseStore } from '../../src/transport/ordered/partition-leases.js';
export { RabbitChannel } from '../../src/transport/rabbitmq/rabbitmq-channel.js';
export { rabbitSettings } from '../../src/transport/rabbitmq/rabbitmq-config.js';
export { RabbitConnection } from '../../src/transport/rabbitmq/rabbitmq-connection.js';
export {
  RETRY_DUE_HEADER as RABBIT_RETRY_DUE_HEADER,
  TOPIC_HEADER as RABBIT_TOPIC_HEADER,
} from '../../src/transport/rabbitmq/rabbitmq-message.js';
export { delayLevel, RabbitNames } from '../../src/transport/rabbitmq/rabbitmq-names.js';
export { AMQP_MAX_HEADER_BYTES } from '../../src/transport/rabbitmq/rabbitmq-settler.js';
export { toStreamConnection } from '../../src/transport/redis-streams/redis-streams-driver.js';
export { RocketMQAdmin } from '../../src/transport/rocketmq/rocketmq-admin.js';
export { parseRocketMQUrl, resolveRocketMQSettings } from '../../src/transport/rocketmq/rocketmq-config.js';
export { invisibleMs, ROCKETMQ_MAX_PROPERTY_BYTES } from '../../src/transport/rocketmq/rocketmq-delivery.js';
export { clientLogger, loadRocketMQDriver } from '../../src/transport/rocketmq/rocketmq-driver.js';
export { checkSubscribe } from '../../src/transport/subscribe-options.js';
export {
  BODY_ENCODING_HEADER,
  fifoId,
  PACKED_HEADERS_ATTRIBUTE,
  SQS_MAX_MESSAGE_BYTES,
  sqsPublishInput,
  sqsSendInput,
} from '../../src/transport/sqs/sqs-message.js';
export { sqsEnvelope, sqsRecordOf } from '../../src/transport/sqs/sqs-record.js';
export type { SqsRecord } from '../../src/transport/sqs/sqs-record.js';
export { sqsSettings } from '../../src/transport/sqs/sqs-config.js';
export { SqsNames } from '../../src/transport/sqs/sqs-names.js';
export { SqsTopology } from '../../src/transport/sqs/sqs-topology.js';
export { SqsBatchSends, SQS_BATCH_ATTEMPTS } from '../../src/transport/sqs/sqs-send-batch.js';
export {
  SQS_LAMBDA_MAX_RETRY_SECONDS,
  SqsLambdaRetryDelays,
} from '../../src/transport/sqs/sqs-lambda-retry-delay.js';
export { startPosition } from '../../src/transport/transport.js';
export { UnchargedRetries } from '../../src/transport/uncharged-retries.js';
export { auditedLedger, CREATE_AUDIT, leasedAudit } from '../../src/cli/chaos-leased.js';
export { openDemoStore } from '../../src/cli/demo-store.js';
