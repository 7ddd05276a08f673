import { parseDuration } from '../../core/duration.js';
import { RetryPolicy } from '../../core/retry-policy.js';
import { UsageError } from '../command.js';

/** The spellings of `--retry`, for the usage text and docs/doctor.md. */
export const RETRY_SPELLINGS = `rocketmq[:N]    RocketMQ's schedule, N reconsumes (default 16): horizon 4h45m40s
                   none            dead-letter at the first failure: horizon 0
                   exponential:BASE:MAX:COUNT[:FACTOR]
                                   BASE, ×FACTOR (default 2) each time, capped at MAX, COUNT retries
                   delays:D1,D2,…  the delays of a custom policy, in order`;

const whole = (value: string | undefined, what: string): number => {
  const n = Number(value);
  if (value === undefined || value === '' || !Number.isInteger(n) || n < 0) {
    throw new UsageError(`--retry: ${what} must be a whole number ≥ 0, got '${value ?? ''}'`);
  }
  return n;
};

function checked<T>(spelling: string, make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--retry '${spelling}': ${(error as Error).message}`, { cause: error });
  }
}

/** The retry policy `--retry` names (`rocketmq` when absent). */
export function parseRetryOption(value: string | undefined): RetryPolicy {
  const spelling = value ?? 'rocketmq';
  const [kind, ...parts] = spelling.split(':');
  switch (kind) {
    case 'rocketmq':
      if (parts.length > 1) break;
      return checked(spelling, () =>
        RetryPolicy.rocketmq(parts.length === 0 ? {} : { maxReconsumeTimes: whole(parts[0], 'N') }),
      );
    case 'none':
      if (parts.length > 0) break;
      return RetryPolicy.none();
    case 'exponential': {
      if (parts.length < 3 || parts.length > 4) break;
      const [base = '', max = '', count, factor] = parts;
      return checked(spelling, () =>
        RetryPolicy.exponential({
          base: parseDuration(base, '--retry BASE'),
          max: parseDuration(max, '--retry MAX'),
          count: whole(count, 'COUNT'),
          ...(factor === undefined ? {} : { factor: Number(factor) }),
        }),
      );
    }
    case 'delays':
      if (parts.length !== 1) break;
      return checked(
        spelling,
        () =>
          new RetryPolicy({ name: 'delays', delays: (parts[0] ?? '').split(',').filter((d) => d !== '') }),
      );
    default:
      break;
  }
  throw new UsageError(
    `--retry '${spelling}' is not a retry policy; use rocketmq[:N], none, exponential:BASE:MAX:COUNT[:FACTOR] or delays:D1,D2,…`,
  );
}
