import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLedger } from 'oncemq/sqlite';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { scratchDir } from '../support/points.js';

beforeAll(buildCli, 120_000);
afterAll(removeCli);

interface DoctorJson {
  readonly findings: readonly { check: string; status: string; summary: string; fix?: string }[];
  readonly summary: Record<'ok' | 'warn' | 'fail' | 'skip', number>;
  readonly exitCode: number;
}

describe('oncemq doctor', () => {
  const scratch = scratchDir();
  let ledgerFile = '';
  beforeAll(async () => {
    ledgerFile = join(scratch.dir, 'ledger.db');
    const ledger = new SqliteLedger({ database: ledgerFile });
    await ledger.init();
    await ledger.close();
  });
  afterAll(() => {
    scratch.remove();
  });

  it('is listed by oncemq --help', async () => {
    expect((await oncemq(['--help'])).stdout).toMatch(/doctor +read the deployment/);
  });

  it('exits 0 on a healthy ledger, one line per finding with its mark', async () => {
    const result = await oncemq(['doctor', '--store', 'sqlite', '--url', ledgerFile]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^✔ ok {4}ledger\.retention: /m);
    expect(result.stdout).toMatch(/^- skip {2}ledger\.clock: /m);
    expect(result.stdout).toMatch(/^\d+ ok, 0 warn, 0 fail, \d+ skip$/m);
  });

  it('exits 1 on a failed check, prints its fix under it, and answers one JSON object with --json', async () => {
    const human = await oncemq(['doctor', '--url', ledgerFile, '--retention', '1h']);
    expect(human.code).toBe(1);
    expect(human.stdout).toMatch(
      /^✘ fail {2}ledger\.retention: .*\n {10}fix: keep finished rows at least 1d4h45m40s/m,
    );
    const result = await oncemq(['doctor', '--url', ledgerFile, '--retention', '1h', '--json']);
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as DoctorJson;
    expect(report.exitCode).toBe(1);
    expect(report.summary.fail).toBe(1);
    const counted = report.findings.filter((finding) => finding.status === 'fail').length;
    expect(counted).toBe(report.summary.fail);
    expect(report.findings.find((finding) => finding.check === 'ledger.retention')).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(/1d4h45m40s/) as unknown,
    });
  });

  it('exits 1 on a missing ledger file and creates none', async () => {
    const missing = join(scratch.dir, 'missing.db');
    const result = await oncemq(['doctor', '--url', missing, '--json']);
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as DoctorJson;
    expect(report.findings.find((finding) => finding.check === 'ledger.schema')?.status).toBe('fail');
    expect(existsSync(missing)).toBe(false);
  });

  it('runs the broker checks alone when only --transport is given', async () => {
    const result = await oncemq(['doctor', '--transport', 'rabbitmq', '--json']);
    const report = JSON.parse(result.stdout) as DoctorJson;
    expect(result.code).toBe(report.exitCode);
    expect(report.findings.length).toBeGreaterThan(0);
    expect(report.findings.some((finding) => finding.check.startsWith('ledger.'))).toBe(false);
  });

  it('exits 2 on wrong options, naming them', async () => {
    const cases: readonly [readonly string[], RegExp][] = [
      [[], /name what to check/],
      [['--url', ledgerFile, '--retry', 'weekly'], /--retry 'weekly' is not a retry policy/],
      [['--url', ledgerFile, '--retention', 'soon'], /--retention takes a duration/],
      [['--url', ledgerFile, '--schema', 'x'], /--schema is for --store postgres/],
      [['--topic', 'orders'], /--topic needs --transport/],
      [['--store', 'oracle'], /unknown store 'oracle'/],
    ];
    for (const [args, message] of cases) {
      const result = await oncemq(['doctor', ...args]);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });
});
