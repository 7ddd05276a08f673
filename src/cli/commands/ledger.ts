import { parseArgs } from 'node:util';
import { validateGroup } from '../../core/group.js';
import type { Ledger, LedgerRecord } from '../../ledger/ledger.js';
import { positiveOption, UsageError, type Command } from '../command.js';
import { openStore, STORE_ARGS, storeTarget, storeUsage } from '../stores.js';

const usage = `Usage: oncemq ledger stuck|failed|show KEY|reset KEY [options]

Inspects the ledger and releases claims on purpose. Read-only towards the schema: it never creates
or migrates a file, schema or table; a missing one is an error (exit 1) naming the migrate command.

  stuck        PROCESSING rows whose lease ended: their owner died or hangs
  failed       FAIL rows with the error of the last attempt
  show KEY     the row of KEY (needs --group)
  reset KEY    deletes the stuck or failed row of KEY so the next delivery claims it afresh
               (needs --group; a SUCCESS row only with --force: its effect would run again)

  --group G        consumer group (filters stuck and failed)
${storeUsage()}
  --limit N        rows listed at most (default 100)
  --force          reset a SUCCESS row too
  --json           machine-readable output`;

/** One row as printed by --json. */
function toJson(record: LedgerRecord): Record<string, unknown> {
  return {
    ...record,
    leaseUntil: record.leaseUntil?.toISOString() ?? null,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

function line(record: LedgerRecord): string {
  const when =
    record.status === 'PROCESSING'
      ? `lease ended ${record.leaseUntil?.toISOString() ?? 'never set'}`
      : `updated ${record.updatedAt.toISOString()}`;
  const remark = record.remark === null ? '' : `  ${record.remark.replace(/\s+/g, ' ').slice(0, 200)}`;
  return `${record.group}  ${record.key}  ${record.status}  attempt ${record.attempt}  ${when}${remark}`;
}

function inspectable(ledger: Ledger): Pick<Ledger, 'list' | 'reset'> {
  if (!ledger.capabilities.inspect)
    throw new UsageError(`the ${ledger.name} ledger cannot list or reset rows`);
  return {
    list: (query) => ledger.list(query),
    reset: (group, key, options) => ledger.reset(group, key, options),
  };
}

export const ledgerCommand: Command = {
  name: 'ledger',
  summary: 'list stuck and failed claims, show a key, reset a key',
  usage,
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: {
        ...STORE_ARGS,
        group: { type: 'string' },
        limit: { type: 'string' },
        force: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: true,
    });
    const [action, key, ...extra] = positionals;
    if (action === undefined) throw new UsageError('name an action: stuck, failed, show KEY or reset KEY');
    if (!['stuck', 'failed', 'show', 'reset'].includes(action))
      throw new UsageError(`unknown action '${action}'`);
    const needsKey = action === 'show' || action === 'reset';
    if (needsKey && key === undefined) throw new UsageError(`${action} needs a KEY`);
    if (extra.length > 0 || (!needsKey && key !== undefined)) {
      throw new UsageError(`unexpected argument '${[key, ...extra].filter(Boolean).join(' ')}'`);
    }
    if (needsKey && values.group === undefined) throw new UsageError(`${action} needs --group`);
    const group = values.group === undefined ? undefined : validateGroup(values.group, '--group');
    const limit = positiveOption(values.limit, 'limit', 100);
    const store = await openStore(values.store, storeTarget(values, false));
    try {
      const ledger = store.ledger;
      await ledger.init();
      const { list, reset } = inspectable(ledger);
      const print = (records: readonly LedgerRecord[], empty: string): void => {
        if (values.json) console.log(JSON.stringify(records.map(toJson)));
        else if (records.length === 0) console.log(empty);
        else for (const record of records) console.log(line(record));
      };
      switch (action) {
        case 'stuck':
          print(
            await list({ group, status: 'PROCESSING', leaseExpiredBefore: new Date(), limit }),
            'no stuck claims',
          );
          return 0;
        case 'failed':
          print(await list({ group, status: 'FAIL', limit }), 'no failed claims');
          return 0;
        case 'show': {
          const record = await ledger.get(group as string, key as string);
          if (values.json) console.log(JSON.stringify(record === undefined ? null : toJson(record)));
          else
            console.log(record === undefined ? `no row for ${String(group)} ${String(key)}` : line(record));
          return record === undefined ? 1 : 0;
        }
        default: {
          const before = await ledger.get(group as string, key as string);
          const deleted = await reset(group as string, key as string, { force: values.force });
          const reason = deleted
            ? 'reset: the next delivery claims the key afresh'
            : before === undefined
              ? 'nothing to reset: no row'
              : before.status === 'SUCCESS' && !values.force
                ? 'refused: the key was applied (SUCCESS); --force would apply its effect again'
                : 'nothing reset: the row changed meanwhile';
          if (values.json) {
            console.log(
              JSON.stringify({
                reset: deleted,
                reason,
                before: before === undefined ? null : toJson(before),
              }),
            );
          } else {
            console.log(reason);
          }
          return deleted ? 0 : 1;
        }
      }
    } finally {
      await store.close();
    }
  },
};
