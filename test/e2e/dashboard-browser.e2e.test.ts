// The dashboard in headless Chromium (Debian's `chromium`, driven by playwright-core): the page shows a
// running demo's counters, a replay clicked on the page is delivered again, hostile keys and bodies
// are shown as text, a missing ledger table is shown as an error, and a request without the token is
// refused. Without Chromium the suite skips, except under CI=true, where it fails.
// ONCEMQ_SCREENSHOTS=docs/images writes the screenshots of docs/dashboard.md.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPipeline } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { buildPackage } from '../support/built-package.js';
import { testBroker, waitUntil } from '../support/local-points.js';
import { pointsRequest, scratchDir } from '../support/points.js';

const CHROMIUM = process.env.ONCEMQ_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
const available = existsSync(CHROMIUM);
const screenshots = process.env.ONCEMQ_SCREENSHOTS;

if (!available && process.env.CI === 'true') {
  describe('the dashboard in Chromium', () => {
    it('needs Chromium under CI=true', () => {
      throw new Error(`CI=true and no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
    });
  });
} else if (!available) {
  console.warn(`skipping: no Chromium at ${CHROMIUM}; apt-get install -y chromium, or set ONCEMQ_CHROMIUM`);
}

/** A CLI process that runs until stopped, with what it printed so far. */
interface Running {
  readonly child: ChildProcessWithoutNullStreams;
  stdout: string;
  stderr: string;
  readonly exited: Promise<number | null>;
}

function start(cli: string, args: readonly string[]): Running {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const running: Running = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('close', resolve)),
  };
  child.stdout.on('data', (chunk: Buffer) => (running.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (running.stderr += chunk.toString()));
  return running;
}

async function printedUrl(running: Running): Promise<string> {
  const find = (): string | undefined =>
    /http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+/.exec(running.stdout + running.stderr)?.[0];
  await waitUntil(() => find() !== undefined, 'the dashboard URL', 60_000);
  return find() ?? '';
}

async function numberAt(page: Page, selector: string): Promise<number> {
  return Number((await page.textContent(selector)) ?? Number.NaN);
}

/** Waits until the number shown at `selector` passes `test`. */
async function waitForNumber(
  page: Page,
  selector: string,
  test: (n: number) => boolean,
  what: string,
): Promise<void> {
  await waitUntil(async () => test(await numberAt(page, selector).catch(() => Number.NaN)), what, 120_000);
}

async function shoot(page: Page, name: string): Promise<void> {
  if (screenshots === undefined) return;
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, name), fullPage: true });
}

describe.skipIf(!available)('the dashboard in Chromium', () => {
  let build: ReturnType<typeof buildPackage>;
  let browser: Browser;
  const cli = (): string => join(build.dir, 'cli', 'oncemq.js');

  beforeAll(async () => {
    build = buildPackage();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  }, 60_000);

  afterAll(async () => {
    await browser.close();
    build.remove();
  });

  it('shows a running demo’s counters, and a dead letter replayed from the page is delivered again', async () => {
    const demo = start(cli(), [
      'demo',
      '--events',
      '10000',
      '--json',
      '--dashboard',
      '--dashboard-wait',
      '120',
      '--dashboard-hold',
      '120',
    ]);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      const url = await printedUrl(demo);
      expect(demo.stderr).toContain('the run starts when the page is open');
      await page.goto(url);
      expect(new URL(page.url()).search).toBe(''); // the token left the address bar
      let first = Number.NaN;
      await waitForNumber(page, '#total-deliveries', (n) => !Number.isNaN((first = n)), 'the first counters');
      expect(first).toBe(0); // the run waited for the page: its first state came before any delivery
      await waitForNumber(page, '#total-deliveries', (n) => n > 0, 'the first deliveries on the page');
      expect(demo.stdout).toBe(''); // the run was still going when the page first showed counters

      await waitUntil(() => demo.stdout.includes('\n'), 'the summary', 120_000);
      const result = JSON.parse(demo.stdout) as {
        ok: boolean;
        deliveries: number;
        effects: number;
        duplicates: Record<string, number>;
        deadLettered: number;
      };
      expect(result.ok).toBe(true);
      await waitForNumber(
        page,
        '#total-deliveries',
        (n) => n === result.deliveries,
        'the summary’s deliveries',
      );
      expect(await numberAt(page, '#total-executed')).toBeGreaterThanOrEqual(result.effects);
      expect(await numberAt(page, '#total-duplicate-redelivery')).toBe(result.duplicates.redelivery);
      expect(await numberAt(page, '#total-duplicate-republish')).toBe(result.duplicates.republish);
      expect(await numberAt(page, '#total-dead')).toBe(result.deadLettered);
      await shoot(page, 'dashboard-demo.png');

      const row = page.locator('#dead-letters tr[data-id]').first();
      const id = await row.getAttribute('data-id');
      const key = await row.locator('td.key').textContent();
      expect(key).toMatch(/^poison-\d+$/);
      await row.getByRole('button', { name: 'inspect' }).click();
      await page.waitForSelector('#dead-letters pre.body-text');
      expect(await page.textContent('#dead-letters pre.body-text')).toContain(`"eventId": "${key ?? ''}"`);
      await shoot(page, 'dashboard-dead-letter.png');

      await row.getByRole('button', { name: 'replay' }).click();
      // The poison copy comes back, is read again, and is dead-lettered again under a new id (the
      // demo's broker still injects its faults, so a lost ack may bring the copy once more).
      await waitForNumber(page, '#total-deliveries', (n) => n > result.deliveries, 'the replayed delivery');
      await waitForNumber(
        page,
        '#total-dead',
        (n) => n > result.deadLettered,
        'the replayed copy dead again',
      );
      await page.waitForSelector(`#dead-letters tr[data-id="${id ?? ''}"]`, { state: 'detached' });
      expect(await page.textContent('#status')).toContain(`replay #${id ?? ''}: 1 of 1`);
    } finally {
      await page.close();
      demo.child.kill('SIGINT');
      expect(await demo.exited).toBe(0);
    }
  }, 240_000);

  it('shows hostile keys, errors and bodies as text, a missing table as an error, and refuses a request without the token', async () => {
    const scratch = scratchDir();
    const ledgerPath = join(scratch.dir, 'ledger.db');
    const brokerPath = join(scratch.dir, 'broker.db');
    const hostileKey = '<img src=x onerror="window.__pwned=1">';
    const hostileError = '<script>window.__pwned=2</script>';
    const ledger = new SqliteLedger({ database: ledgerPath });
    const claim = await ledger.claim({ ...pointsRequest(hostileKey), group: 'billing' });
    if (claim.status !== 'acquired') throw new Error('claim not acquired');
    await ledger.fail(claim.claim, hostileError);
    const stuck = await ledger.claim({ ...pointsRequest(`stuck ${hostileKey}`, 1), group: 'billing' });
    if (stuck.status !== 'acquired') throw new Error('claim not acquired');
    await ledger.close();
    const broker = testBroker(scratch.dir, { commitInterval: '20ms' });
    const db = new Database(':memory:');
    const appLedger = new SqliteLedger<Database.Database>({ database: db });
    let dead = 0;
    const subscription = await broker.subscribe(
      'billing',
      ['invoices'],
      createPipeline({
        ledger: appLedger,
        group: 'billing',
        handler: () => undefined,
        onOutcome: (outcome) => {
          if (outcome.kind === 'dead') dead++;
        },
      }),
    );
    await broker.publish({
      topic: 'invoices',
      key: hostileKey,
      body: '<img src=y onerror="window.__pwned=3">',
    });
    await waitUntil(() => dead === 1, 'the hostile message dead-lettered');
    await subscription.close();
    await broker.close();
    await appLedger.close();
    db.close();

    const dashboard = start(cli(), [
      'dashboard',
      '--store',
      'sqlite',
      '--url',
      ledgerPath,
      '--transport',
      'local',
      '--broker-url',
      brokerPath,
      '--group',
      'billing',
    ]);
    const missing = start(cli(), ['dashboard', '--url', join(scratch.dir, 'missing.db')]);
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      const url = await printedUrl(dashboard);
      const refused = await page.goto(url.replace(/\?token=.*/, ''));
      expect(refused?.status()).toBe(401);
      expect(await page.textContent('body')).toContain('needs the access token');
      const forged = await page.goto(
        url.replace(/token=./, (t) => (t.endsWith('a') ? 'token=b' : 'token=a')),
      );
      expect(forged?.status()).toBe(401);

      await page.goto(url);
      await page.waitForSelector('#failed td.key');
      expect(await page.textContent('#failed td.key')).toBe(hostileKey);
      expect(await page.textContent('#failed tbody')).toContain(hostileError);
      await page.waitForSelector('#dead-letters td.key');
      expect(await page.textContent('#dead-letters td.key')).toBe(hostileKey);
      await page.getByRole('button', { name: 'inspect' }).last().click();
      await page.waitForSelector('#dead-letters pre.body-text');
      expect(await page.textContent('#dead-letters pre.body-text')).toBe(
        '<img src=y onerror="window.__pwned=3">',
      );
      expect(await page.locator('main img, main script').count()).toBe(0);
      expect(await page.evaluate('window.__pwned')).toBeUndefined();
      await shoot(page, 'dashboard-claims.png');

      // Reset from the page (confirmed in the dialog): the stuck claim goes; a failed one has no reset.
      expect(await page.textContent('#stuck td.key')).toBe(`stuck ${hostileKey}`);
      expect(await page.locator('#failed').getByRole('button', { name: 'reset' }).count()).toBe(0);
      page.once('dialog', (dialog) => void dialog.accept());
      await page.locator('#stuck').getByRole('button', { name: 'reset' }).click();
      await page.waitForSelector('#stuck p.empty');
      expect(await page.textContent('#status')).toContain('reset: the next delivery claims the key afresh');

      await page.goto(await printedUrl(missing));
      await page.waitForSelector('#stuck p.error');
      expect(await page.textContent('#stuck p.error')).toContain('oncemq migrate --store sqlite');
      expect(existsSync(join(scratch.dir, 'missing.db'))).toBe(false);
    } finally {
      await page.close();
      dashboard.child.kill('SIGINT');
      missing.child.kill('SIGINT');
      expect(await dashboard.exited).toBe(0);
      expect(await missing.exited).toBe(0);
      scratch.remove();
    }
  }, 120_000);
});
