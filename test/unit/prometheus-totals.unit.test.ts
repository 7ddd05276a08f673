import { describe, expect, it } from 'vitest';
import { totalsOfScrape } from '../support/internal.js';

const SCRAPE = String.raw`# HELP oncemq_outcomes_total What became of each delivery
# TYPE oncemq_outcomes_total counter
oncemq_outcomes_total{messaging_consumer_group_name="billing",messaging_destination_name="invoices",oncemq_outcome="executed"} 7
oncemq_outcomes_total{messaging_consumer_group_name="billing",messaging_destination_name="refunds",oncemq_outcome="executed"} 3
oncemq_outcomes_total{messaging_consumer_group_name="billing",oncemq_outcome="duplicate",oncemq_duplicate_source="redelivery"} 4
oncemq_outcomes_total{messaging_consumer_group_name="billing",oncemq_outcome="busy",oncemq_duplicate_source="concurrent"} 1
oncemq_outcomes_total{messaging_consumer_group_name="billing",oncemq_outcome="dead",oncemq_dead_letter_reason="say \"no\", twice\\"} 2
oncemq_outcomes_total{messaging_consumer_group_name="shipping",oncemq_outcome="executed"} 100
oncemq_outcomes_total{messaging_consumer_group_name="billing",oncemq_outcome="unheard-of"} 9
messaging_client_consumed_messages_total{messaging_consumer_group_name="billing",messaging_destination_name="invoices"} 12
messaging_client_consumed_messages_total{messaging_consumer_group_name="shipping"} 100
oncemq_claim_duration_count{messaging_consumer_group_name="billing"} 50
`;

describe('outcome counters read from a Prometheus scrape', () => {
  it('sums the samples of the chosen groups over topics, by outcome, duplicate source and dead-letter reason', () => {
    expect(totalsOfScrape(SCRAPE, ['billing'])).toEqual({
      deliveries: 12,
      outcomes: { executed: 10, duplicate: 4, busy: 1, conflict: 0, retry: 0, dead: 2 },
      duplicates: { redelivery: 4, republish: 0, concurrent: 1 },
      deadLettered: { 'say "no", twice\\': 2 },
      reclaimed: 0,
    });
  });

  it('sums every group when none is chosen, and reads nothing from an empty or foreign scrape', () => {
    const all = totalsOfScrape(SCRAPE);
    expect(all.deliveries).toBe(112);
    expect(all.outcomes.executed).toBe(110);
    expect(totalsOfScrape('').deliveries).toBe(0);
    expect(totalsOfScrape('other_metric{a="b"} 5\n').outcomes.executed).toBe(0);
  });
});
