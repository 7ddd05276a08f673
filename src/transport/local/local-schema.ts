/**
 * Tables of the local broker's SQLite file. The commit log is `oncemq_messages`: its rowid is the
 * commit-log offset, so every stored copy gets a new one (and a new broker id).
 */

/** Migrations in order; version n is `BROKER_MIGRATIONS[n - 1]`. */
export const BROKER_MIGRATIONS: readonly string[] = [
  `CREATE TABLE oncemq_topics (
     topic TEXT PRIMARY KEY,
     queues INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   );
   CREATE TABLE oncemq_queues (
     topic TEXT NOT NULL,
     queue_id INTEGER NOT NULL,
     next_offset INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (topic, queue_id)
   );
   CREATE TABLE oncemq_messages (
     commit_offset INTEGER PRIMARY KEY AUTOINCREMENT,
     topic TEXT NOT NULL,
     queue_id INTEGER NOT NULL,
     queue_offset INTEGER NOT NULL,
     unique_id TEXT NOT NULL,
     headers TEXT NOT NULL,
     body BLOB NOT NULL,
     born_at INTEGER NOT NULL,
     stored_at INTEGER NOT NULL,
     reconsume_times INTEGER NOT NULL DEFAULT 0,
     origin_topic TEXT,
     origin_broker_id TEXT,
     UNIQUE (topic, queue_id, queue_offset)
   );
   CREATE TABLE oncemq_offsets (
     consumer_group TEXT NOT NULL,
     topic TEXT NOT NULL,
     queue_id INTEGER NOT NULL,
     next_offset INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (consumer_group, topic, queue_id)
   );
   CREATE TABLE oncemq_members (
     consumer_group TEXT NOT NULL,
     member_id TEXT NOT NULL,
     heartbeat_at INTEGER NOT NULL,
     joined_at INTEGER NOT NULL,
     PRIMARY KEY (consumer_group, member_id)
   );
   CREATE TABLE oncemq_schedule (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     consumer_group TEXT NOT NULL,
     topic TEXT NOT NULL,
     deliver_at INTEGER NOT NULL,
     unique_id TEXT NOT NULL,
     headers TEXT NOT NULL,
     body BLOB NOT NULL,
     born_at INTEGER NOT NULL,
     reconsume_times INTEGER NOT NULL,
     origin_broker_id TEXT NOT NULL
   );
   CREATE INDEX oncemq_schedule_due ON oncemq_schedule (consumer_group, deliver_at);
   CREATE TABLE oncemq_dead_letters (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     consumer_group TEXT NOT NULL,
     topic TEXT NOT NULL,
     broker_id TEXT NOT NULL,
     unique_id TEXT NOT NULL,
     headers TEXT NOT NULL,
     body BLOB NOT NULL,
     born_at INTEGER NOT NULL,
     reconsume_times INTEGER NOT NULL,
     reason TEXT NOT NULL,
     error TEXT,
     dead_at INTEGER NOT NULL,
     replayed_at INTEGER,
     replay_broker_id TEXT
   );
   CREATE INDEX oncemq_dead_letters_group ON oncemq_dead_letters (consumer_group, id);
   CREATE TABLE oncemq_half_messages (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     producer_group TEXT NOT NULL,
     topic TEXT NOT NULL,
     queue_id INTEGER NOT NULL,
     unique_id TEXT NOT NULL,
     headers TEXT NOT NULL,
     body BLOB NOT NULL,
     born_at INTEGER NOT NULL,
     checks INTEGER NOT NULL DEFAULT 0,
     next_check_at INTEGER NOT NULL
   );
   CREATE INDEX oncemq_half_messages_due ON oncemq_half_messages (producer_group, next_check_at);`,
];
