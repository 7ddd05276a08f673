import { describe, expect, it } from 'vitest';
import { DOCTOR_SETTINGS, findingOf } from '../support/doctor.js';
import { brokerNeeds, groupQueueFindings } from '../support/internal.js';

/** What AWS answers `GetQueueAttributes` (ElasticMQ leaves the retention out, so its test cannot fail this). */
const needs = brokerNeeds(DOCTOR_SETTINGS);

describe('oncemq doctor: an SQS group queue as AWS describes it', () => {
  it('fails a retention shorter than the horizon, warns below the replay margin, passes 14 days', () => {
    const retention = (seconds: number) =>
      findingOf(
        groupQueueFindings('q', { MessageRetentionPeriod: String(seconds), VisibilityTimeout: '120' }, needs),
        'sqs.retention',
      );
    expect(retention(60)).toMatchObject({ status: 'fail', detail: { retentionMs: 60_000 } });
    expect(retention(3600)).toMatchObject({ status: 'warn' });
    expect(retention(1_209_600)).toMatchObject({ status: 'ok' });
  });

  it("notes a FIFO queue's fixed 5 minute deduplication window", () => {
    const findings = groupQueueFindings(
      'q.fifo',
      { MessageRetentionPeriod: '1209600', FifoQueue: 'true' },
      needs,
    );
    expect(findingOf(findings, 'sqs.fifo-dedup')).toMatchObject({
      status: 'ok',
      detail: { dedupWindowMs: 300_000 },
    });
  });
});
