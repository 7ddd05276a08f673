import { describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createRelay } from 'oncemq';
import { mysqlDialect } from 'oncemq/mysql';
import { postgresDialect } from 'oncemq/postgres';
import { sqliteDialect } from 'oncemq/sqlite';

describe('outbox and relay configuration', () => {
  it('needs a SQL dialect or a SQL ledger', () => {
    expect(() => createOutbox({})).toThrow(ConfigError);
    expect(() =>
      createOutbox({ dialect: postgresDialect, ledger: { dialect: postgresDialect } as never }),
    ).toThrow(/either dialect or ledger/);
  });

  it('refuses hostile, long or misplaced names instead of escaping them', () => {
    expect(() => createOutbox({ dialect: postgresDialect, table: 'x; DROP TABLE y' })).toThrow(ConfigError);
    expect(() => createOutbox({ dialect: postgresDialect, schema: 'a"b' })).toThrow(ConfigError);
    expect(() => createOutbox({ dialect: mysqlDialect, schema: 'billing' })).toThrow(
      /schemas are PostgreSQL's/,
    );
    expect(() => createOutbox({ dialect: sqliteDialect, table: 't'.repeat(41) })).toThrow(/longer than 40/);
  });

  it('quotes the names per database and sets the NOTIFY channel on PostgreSQL only', () => {
    const pg = createOutbox({ dialect: postgresDialect, schema: 'billing', table: 'out' });
    expect(pg.config.messages).toBe('"billing"."out"');
    expect(pg.config.channel).toBe('oncemq_outbox_out');
    const my = createOutbox({ dialect: mysqlDialect, table: 'out' });
    expect(my.config.messages).toBe('`out`');
    expect(my.config.channel).toBeUndefined();
  });

  it('refuses a relay with a database of another kind, a bad batch size or backoffs in the wrong order', () => {
    const outbox = createOutbox({ dialect: postgresDialect });
    const transport = { name: 't', publish: () => Promise.reject(new Error('unused')) };
    const pool = {
      connect: () => Promise.reject(new Error('unused')),
      query: () => Promise.reject(new Error('unused')),
    };
    expect(() =>
      createRelay({ outbox, transport, database: { getConnection: () => undefined } as never }),
    ).toThrow(/needs a pg Pool/);
    expect(() => createRelay({ outbox, transport, database: pool, batchSize: 0 })).toThrow(ConfigError);
    expect(() =>
      createRelay({ outbox, transport, database: pool, minBackoff: '1s', maxBackoff: '10ms' }),
    ).toThrow(/shorter than minBackoff/);
    expect(() => createRelay({ outbox, transport: {} as never, database: pool })).toThrow(ConfigError);
  });
});
