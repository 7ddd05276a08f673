import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLedger } from 'oncemq/sqlite';
import { doctor } from '../support/doctor.js';
import { scratchDir } from '../support/points.js';
import { OwnRedisServer } from '../support/redis-server.js';

describe('oncemq doctor on SQLite', () => {
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
  });

  async function migrated(name: string): Promise<string> {
    const path = join(scratch.dir, name);
    const ledger = new SqliteLedger({ database: path });
    await ledger.init();
    await ledger.close();
    return path;
  }

  it('finds a migrated file as expected; the clock is this process’s own', async () => {
    const run = await doctor(['--store', 'sqlite', '--url', await migrated('ok.db')]);
    expect(run.of('ledger.schema').status).toBe('ok');
    expect(run.of('ledger.clock').status).toBe('skip');
    expect(run.of('ledger.size').status).toBe('ok');
    expect(run.failed).toEqual([]);
  });

  it('fails a missing file, naming oncemq migrate, and creates no file', async () => {
    const path = join(scratch.dir, 'missing.db');
    const run = await doctor(['--url', path]);
    expect(run.of('ledger.schema').status).toBe('fail');
    expect(run.of('ledger.schema').fix).toMatch(`oncemq migrate --store sqlite --url ${path}`);
    expect(existsSync(path)).toBe(false);
  });

  it('fails a table that lost its primary key, and warns on a dropped index', async () => {
    const path = await migrated('broken.db');
    const db = new Database(path);
    db.exec('DROP INDEX oncemq_ledger_status_lease');
    expect((await doctor(['--url', path])).of('ledger.schema').status).toBe('warn');
    // SQLite cannot drop a primary key: the table is made again without it, as a hand-made copy would be.
    db.exec(`ALTER TABLE oncemq_ledger RENAME TO old_ledger;
      CREATE TABLE oncemq_ledger AS SELECT * FROM old_ledger; DROP TABLE old_ledger;`);
    db.close();
    const finding = (await doctor(['--url', path])).of('ledger.schema');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/no unique key on \(consumer_group, msg_key\)/);
  });

  it('counts stuck rows in a file', async () => {
    const path = await migrated('stuck.db');
    const db = new Database(path);
    const now = Date.now();
    db.prepare(
      `INSERT INTO oncemq_ledger (consumer_group, msg_key, status, owner, lease_until, created_at, updated_at)
       VALUES ('g', 'k', 'PROCESSING', 'o', ?, ?, ?)`,
    ).run(now - 1_000, now, now);
    db.close();
    expect((await doctor(['--url', path])).of('ledger.stuck')).toMatchObject({
      status: 'warn',
      detail: { stuck: 1 },
    });
  });
});

describe('oncemq doctor on Redis (private servers, never the shared one)', () => {
  let evicting: OwnRedisServer;
  let volatile: OwnRedisServer;
  let durable: OwnRedisServer;
  const aof = scratchDir();
  beforeAll(async () => {
    evicting = await OwnRedisServer.start(['--maxmemory-policy', 'allkeys-lru']);
    volatile = await OwnRedisServer.start(['--maxmemory-policy', 'volatile-ttl', '--maxmemory', '64mb']);
    durable = await OwnRedisServer.start([
      '--maxmemory-policy',
      'noeviction',
      '--appendonly',
      'yes',
      '--dir',
      aof.dir,
    ]);
  });
  afterAll(async () => {
    await Promise.all([evicting.stop(), volatile.stop(), durable.stop()]);
    aof.remove();
  });

  it('fails an allkeys eviction policy, and warns without persistence', async () => {
    const run = await doctor(['--store', 'redis', '--url', evicting.url]);
    expect(run.of('redis.maxmemory-policy').status).toBe('fail');
    expect(run.of('redis.maxmemory-policy').summary).toMatch(/allkeys-lru/);
    expect(run.of('redis.persistence').status).toBe('warn');
    expect(run.failed).toEqual(['redis.maxmemory-policy']);
  });

  it('fails a volatile policy too: the ledger’s keys all carry a TTL', async () => {
    const finding = (await doctor(['--url', volatile.url])).of('redis.maxmemory-policy');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/volatile-ttl .*carry a TTL/);
  });

  it('passes noeviction with AOF, and checks the key TTL against the horizon', async () => {
    const run = await doctor(['--url', durable.url, '--lease', '30s']);
    expect(run.of('redis.maxmemory-policy').status).toBe('ok');
    expect(run.of('redis.persistence').status).toBe('ok');
    expect(run.of('ledger.clock').status).toBe('ok');
    expect(run.failed).toEqual([]);
    const short = await doctor(['--url', durable.url, '--retention', '1d']);
    expect(short.of('ledger.retention')).toMatchObject({ status: 'fail' });
    expect(short.of('ledger.retention').summary).toMatch(/^key TTL 1d/);
  });
});
