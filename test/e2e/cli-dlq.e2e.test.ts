import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope, Outcome } from 'oncemq';
import { buildPackage, runNode } from '../support/built-package.js';
import { ackOutcome, outcomeBase, testBroker, waitUntil } from '../support/local-points.js';
import { scratchDir } from '../support/points.js';

let build: ReturnType<typeof buildPackage>;
const cli = (): string => join(build.dir, 'cli', 'oncemq.js');

beforeAll(() => {
  build = buildPackage();
});

afterAll(() => {
  build.remove();
});

const dead = (envelope: Envelope): Promise<Outcome> =>
  Promise.resolve({
    ...outcomeBase(envelope, 'points'),
    kind: 'dead',
    action: 'dead-letter',
    reason: 'malformed',
    error: new Error('not JSON'),
  });

interface LetterJson {
  id: string;
  group: string;
  key: string;
  reason: string;
  error: string;
  body: string;
  deliveryCount: number;
}

describe('oncemq dlq on the local broker', () => {
  it('lists dead letters with reason and error, replays one to its group only, and purges', async () => {
    const scratch = scratchDir();
    const path = join(scratch.dir, 'broker.db');
    const broker = testBroker(scratch.dir);
    await broker.publish({ topic: 'payments', key: 'evt-1', body: 'garbage' });
    await broker.publish({ topic: 'payments', key: 'evt-2', body: 'garbage' });
    await broker.subscribe('points', ['payments'], dead);
    const other: string[] = [];
    await broker.subscribe('audit', ['payments'], (envelope) => {
      other.push(envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(ackOutcome(envelope, outcomeBase(envelope, 'audit'), 'leased'));
    });
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'points' })).length === 2 && other.length === 2,
      'the dead letters',
    );
    await broker.close();

    const list = await runNode(cli(), ['dlq', 'list', '--group', 'points', '--url', path, '--json']);
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.stdout) as LetterJson[];
    expect(letters.map((letter) => letter.key)).toEqual(['evt-1', 'evt-2']);
    expect(letters[0]).toMatchObject({
      group: 'points',
      reason: 'malformed',
      body: 'garbage',
      deliveryCount: 1,
    });
    expect(letters[0]?.error).toMatch(/not JSON/);

    const [first, second] = letters;
    const replay = await runNode(cli(), [
      'dlq',
      'replay',
      '--group',
      'points',
      '--url',
      path,
      String(first?.id),
    ]);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/replayed 1 of 1/);
    const again = await runNode(cli(), [
      'dlq',
      'replay',
      '--group',
      'points',
      '--url',
      path,
      String(first?.id),
    ]);
    expect(again.code).toBe(1);

    // The replay went to the group's retry topic: the points group gets it again, the audit group does not.
    const reopened = testBroker(scratch.dir);
    const replayed: string[] = [];
    await reopened.subscribe('points', ['payments'], (envelope) => {
      replayed.push(envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(ackOutcome(envelope, outcomeBase(envelope, 'points'), 'leased'));
    });
    await reopened.subscribe('audit', ['payments'], (envelope) => {
      other.push(envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(ackOutcome(envelope, outcomeBase(envelope, 'audit'), 'leased'));
    });
    await waitUntil(() => Promise.resolve(replayed.length === 1), 'the replayed copy');
    expect(replayed).toEqual(['evt-1']);
    expect(other).toEqual(['evt-1', 'evt-2']);
    await reopened.close();

    const purge = await runNode(cli(), ['dlq', 'purge', '--group', 'points', '--url', path, '--all']);
    expect(purge.stdout).toMatch(/purged 1 of 1/);
    expect(second?.id).toBeDefined();
    const empty = await runNode(cli(), ['dlq', 'list', '--group', 'points', '--url', path]);
    expect(empty.stdout).toMatch(/no dead letters/);
    scratch.remove();
  });

  it('refuses a broker file that does not exist, and creates none', async () => {
    const scratch = scratchDir();
    const path = join(scratch.dir, 'missing', 'broker.db');
    const run = await runNode(cli(), ['dlq', 'list', '--group', 'points', '--url', path]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/broker\.db/);
    expect(existsSync(path)).toBe(false);
    expect(existsSync(join(scratch.dir, 'missing'))).toBe(false);
    scratch.remove();
  });

  it('refuses a file without the broker tables, and adds none', async () => {
    const scratch = scratchDir();
    const path = join(scratch.dir, 'other.db');
    writeFileSync(path, '');
    const run = await runNode(cli(), ['dlq', 'list', '--group', 'points', '--url', path]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/holds no local broker/);
    const db = new Database(path);
    expect(db.prepare("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({
      n: 0,
    });
    db.close();
    scratch.remove();
  });

  it('needs a group, and says so in one line', async () => {
    const run = await runNode(cli(), ['dlq', 'list']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--group is required/);
  });
});
