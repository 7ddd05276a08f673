/**
 * The rival of the `leases` suite, a process of its own (so that its claims contend with the
 * owner's renewals the way another consumer's would): told a set of keys, it claims them in turn,
 * one claim about every millisecond, until each is won or the time is up, and answers when it won.
 *
 *   node dist-bench/bench/lease-rival.js <backend> <namespace>   (forked by bench/leases.ts)
 */
import { isWon, type ClaimRequest } from '../src/ledger/ledger.js';
import { openLeaseLedger, type LeaseBackend } from './lease-stores.js';

/** What the owner sends: the keys to hammer, until when, and the lease a won claim takes. */
export interface RivalOrder {
  readonly keys: readonly string[];
  readonly group: string;
  readonly untilMs: number;
  readonly leaseMs: number;
}

/** What the rival answers: per key, when it won (`0`: never), and the claims it made. */
export interface RivalReport {
  readonly wonAt: Readonly<Record<string, number>>;
  readonly claims: number;
}

const [backend, name] = process.argv.slice(2) as [LeaseBackend, string];
const { ledger, close } = await openLeaseLedger({ backend, name });
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function hammer(order: RivalOrder): Promise<RivalReport> {
  const wonAt: Record<string, number> = Object.fromEntries(order.keys.map((key) => [key, 0]));
  const open = new Set(order.keys);
  let claims = 0;
  while (open.size > 0 && Date.now() < order.untilMs) {
    for (const key of open) {
      const request: ClaimRequest = {
        group: order.group,
        key,
        fingerprint: null,
        brokerId: `rival-${key}`,
        topic: 'leases',
        leaseMs: order.leaseMs,
      };
      claims++;
      const answer = await ledger.claim(request).catch(() => undefined);
      if (answer !== undefined && isWon(answer)) {
        wonAt[key] = Date.now();
        open.delete(key);
      }
    }
    await pause(1);
  }
  return { wonAt, claims };
}

process.on('message', (message: RivalOrder | 'stop') => {
  if (message === 'stop') {
    void close().then(() => process.exit(0));
    return;
  }
  void hammer(message).then((report) => process.send?.(report));
});
process.send?.('ready');
