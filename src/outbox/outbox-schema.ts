import type { ResolvedOutboxConfig } from './outbox-config.js';

/** Longest ordering key and topic the outbox stores (they are indexed). */
export const MAX_OUTBOX_NAME_LENGTH = 255;

/**
 * The DDL of the outbox on its database (see each database's file under `dialects/`): the messages
 * (one row per outgoing message, `sent_at` NULL while pending) and one row per ordering key holding
 * its last sequence number.
 */
export function outboxDdl(config: ResolvedOutboxConfig<unknown>): readonly string[] {
  return config.sql.ddl(config);
}
