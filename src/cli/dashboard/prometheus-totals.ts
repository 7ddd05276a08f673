import { OutcomeCounters, type PipelineMetrics } from '../../consumer/metrics.js';
import { ConfigError } from '../../core/errors.js';
import type { DuplicateSource, OutcomeKind } from '../../core/outcome.js';
import { redactedLocation } from '../stores.js';
import type { MetricsSource } from './dashboard-sources.js';

/** One sample line of the Prometheus text format: metric, labels, value. */
interface Sample {
  readonly metric: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/y;
const UNESCAPE: Readonly<Record<string, string>> = { n: '\n', '\\': '\\', '"': '"' };

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  for (let match = LABEL.exec(text); match !== null; match = LABEL.exec(text)) {
    const [, name = '', raw = ''] = match;
    labels[name] = raw.replace(/\\(.)/g, (_, c: string) => UNESCAPE[c] ?? c);
  }
  return labels;
}

/** The samples of `metrics` in a Prometheus text exposition; comments and other metrics are skipped. */
export function parseSamples(text: string, metrics: ReadonlySet<string>): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (match === null) continue;
    const [, metric = '', labels = '', value = ''] = match;
    if (!metrics.has(metric)) continue;
    samples.push({ metric, labels: labelsOf(labels), value: Number(value) });
  }
  return samples;
}

const OUTCOMES = 'oncemq_outcomes_total';
const CONSUMED = 'messaging_client_consumed_messages_total';
const GROUP_LABEL = 'messaging_consumer_group_name';

/**
 * Adds up oncemq's outcome counters of a scrape (`oncemq_outcomes_total`,
 * `messaging_client_consumed_messages_total`; docs/observability.md) into pipeline totals, over every
 * group, or over `groups` only when given. `reclaimed` is not exported and stays 0.
 */
export function totalsOfScrape(text: string, groups: readonly string[] = []): PipelineMetrics {
  const zero = new OutcomeCounters().snapshot();
  const outcomes: Record<OutcomeKind, number> = { ...zero.outcomes };
  const duplicates: Record<DuplicateSource, number> = { ...zero.duplicates };
  const deadLettered: Record<string, number> = {};
  let deliveries = 0;
  for (const { metric, labels, value } of parseSamples(text, new Set([OUTCOMES, CONSUMED]))) {
    if (!Number.isFinite(value)) continue;
    if (groups.length > 0 && !groups.includes(labels[GROUP_LABEL] ?? '')) continue;
    if (metric === CONSUMED) {
      deliveries += value;
      continue;
    }
    const kind = labels.oncemq_outcome as OutcomeKind | undefined;
    if (kind === undefined || !Object.hasOwn(outcomes, kind)) continue;
    outcomes[kind] += value;
    const source = labels.oncemq_duplicate_source as DuplicateSource | undefined;
    if (source !== undefined && Object.hasOwn(duplicates, source)) duplicates[source] += value;
    const reason = labels.oncemq_dead_letter_reason;
    if (reason !== undefined) deadLettered[reason] = (deadLettered[reason] ?? 0) + value;
  }
  return { deliveries, outcomes, duplicates, deadLettered, reclaimed: 0 };
}

/** Reads the counters from a consumer's Prometheus endpoint (`servePrometheus`, `oncemq/prometheus`). */
export function prometheusSource(url: string, groups: readonly string[]): MetricsSource {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(
      'metrics',
      `'${url}' is not a URL; give the consumer's scrape URL, e.g. http://127.0.0.1:9464/metrics`,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError('metrics', `'${url}' is not an http(s) URL`);
  }
  return {
    kind: 'prometheus',
    location: redactedLocation(parsed.toString()),
    async read() {
      const response = await fetch(parsed, { signal: AbortSignal.timeout(5000) });
      if (!response.ok)
        throw new Error(`${parsed.toString()} answered ${response.status} ${response.statusText}`);
      return totalsOfScrape(await response.text(), groups);
    },
  };
}
