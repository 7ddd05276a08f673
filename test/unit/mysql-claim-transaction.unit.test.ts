import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError } from 'oncemq';
import type { MysqlConnectionLike } from 'oncemq/mysql';
import { runClaimTransaction } from '../support/internal.js';

/** A connection that records transaction control and reports whether a transaction is open. */
function recordingConnection(inTransaction = false): MysqlConnectionLike & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    query: (sql: string) => {
      log.push(sql);
      return Promise.resolve([
        { affectedRows: 0, insertId: 0, serverStatus: inTransaction ? 3 : 2 },
        undefined,
      ]);
    },
    execute: () => Promise.reject(new Error('not used')),
  };
}

const deadlock = Object.assign(new Error('Deadlock found when trying to get lock'), { errno: 1213 });
const lockWait = Object.assign(new Error('Lock wait timeout exceeded'), { errno: 1205 });

describe('claim transaction on MySQL', () => {
  it('runs the claim again in a fresh transaction after a deadlock, then commits once', async () => {
    const conn = recordingConnection();
    let claims = 0;
    const result = await runClaimTransaction(conn, {
      joinable: false,
      lockRetries: 3,
      claim: () => (++claims === 1 ? Promise.reject(deadlock) : Promise.resolve('won')),
      won: () => true,
      finish: (_conn, claimed) => Promise.resolve(claimed),
      lost: (claimed) => claimed,
    });
    expect(result).toBe('won');
    expect(claims).toBe(2);
    expect(conn.log).toEqual(['START TRANSACTION', 'ROLLBACK', 'START TRANSACTION', 'COMMIT']);
  });

  it('gives up after lockRetries with LedgerUnavailableError carrying the lock error', async () => {
    const conn = recordingConnection();
    let claims = 0;
    const error: unknown = await runClaimTransaction(conn, {
      joinable: false,
      lockRetries: 2,
      claim: () => {
        claims++;
        return Promise.reject(lockWait);
      },
      won: () => true,
      finish: () => Promise.resolve(),
      lost: () => undefined,
    }).catch((e: unknown) => e);
    expect(claims).toBe(3);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).cause).toBe(lockWait);
  });

  it("does not retry a deadlock inside the caller's open transaction: InnoDB rolled all of it back", async () => {
    const conn = recordingConnection(true);
    let claims = 0;
    await expect(
      runClaimTransaction(conn, {
        joinable: true,
        lockRetries: 3,
        claim: () => {
          claims++;
          return Promise.reject(deadlock);
        },
        won: () => true,
        finish: () => Promise.resolve(),
        lost: () => undefined,
      }),
    ).rejects.toBeInstanceOf(LedgerUnavailableError);
    expect(claims).toBe(1);
    expect(conn.log).toEqual(['DO 0', 'SAVEPOINT oncemq_claim', 'ROLLBACK TO SAVEPOINT oncemq_claim']);
  });

  it("rolls back and passes the handler's own error unchanged, and rolls back a claim not won", async () => {
    const conn = recordingConnection();
    const boom = new Error('handler failed');
    await expect(
      runClaimTransaction(conn, {
        joinable: false,
        lockRetries: 3,
        claim: () => Promise.resolve('won'),
        won: () => true,
        finish: () => Promise.reject(boom),
        lost: () => 'lost',
      }),
    ).rejects.toBe(boom);
    expect(
      await runClaimTransaction(conn, {
        joinable: false,
        lockRetries: 3,
        claim: () => Promise.resolve('duplicate'),
        won: () => false,
        finish: () => Promise.reject(new Error('must not run')),
        lost: (claimed) => claimed,
      }),
    ).toBe('duplicate');
    expect(conn.log).toEqual(['START TRANSACTION', 'ROLLBACK', 'START TRANSACTION', 'ROLLBACK']);
  });
});
