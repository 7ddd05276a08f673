import { describe, expect, it } from 'vitest';
import { brokersOfUrl, KafkaNames, PartitionOffsets } from '../support/internal.js';

describe('Kafka partition offsets', () => {
  it('commits only the contiguous prefix of finished records, whatever order they finish in', () => {
    const offsets = new PartitionOffsets();
    for (const offset of [10n, 11n, 13n, 14n]) offsets.receive(offset);
    // Nothing finished: committing the first record's own offset is as far as it may go.
    expect(offsets.committable()).toBe(10n);
    offsets.committed(10n);
    expect(offsets.committable()).toBeNull();
    offsets.finish(11n);
    offsets.finish(14n);
    expect(offsets.committable()).toBeNull();
    offsets.finish(10n);
    // 13 is in flight: the commit stops there (12 was never a record: a gap is not waited for).
    expect(offsets.committable()).toBe(13n);
    offsets.committed(13n);
    expect(offsets.committable()).toBeNull();
    offsets.finish(13n);
    expect(offsets.committable()).toBe(15n);
  });

  it('counts the unfinished records, each once, and forgets those a commit passed', () => {
    const offsets = new PartitionOffsets();
    for (const offset of [1n, 2n, 3n]) offsets.receive(offset);
    offsets.finish(2n);
    offsets.finish(2n);
    offsets.finish(7n);
    expect(offsets.unfinished).toBe(2);
    offsets.finish(1n);
    expect(offsets.committable()).toBe(3n);
    offsets.committed(3n);
    expect(offsets.unfinished).toBe(1);
    // A commit from elsewhere past a record not finished here (a rejoin read it again) forgets it too.
    offsets.committed(4n);
    expect(offsets.unfinished).toBe(0);
    expect(offsets.committable()).toBeNull();
    // The records after it are committed as usual.
    offsets.receive(4n);
    offsets.receive(5n);
    offsets.finish(4n);
    offsets.finish(5n);
    expect(offsets.committable()).toBe(6n);
  });

  it('keeps the prefix rule over a long run, finishes out of order and commits in between', () => {
    const offsets = new PartitionOffsets();
    let received = 0n;
    let finished = 0n;
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 100; i++) offsets.receive(received++);
      // The round's records finish from the last to the first; the first one stays in flight a while.
      for (let offset = received - 1n; offset > finished; offset--) offsets.finish(offset);
      // Held at the first record: its own offset, which is already committed after the first round.
      expect(offsets.committable()).toBe(round === 0 ? 0n : null);
      offsets.finish(finished);
      expect(offsets.committable()).toBe(received);
      offsets.committed(received);
      finished = received;
      expect(offsets.unfinished).toBe(0);
      expect(offsets.seen(received - 1n)).toBe(true);
      expect(offsets.seen(received)).toBe(false);
    }
  });

  it('skips records received again after a rejoin', () => {
    const offsets = new PartitionOffsets();
    offsets.receive(5n);
    offsets.finish(5n);
    offsets.committed(6n);
    expect(offsets.seen(5n)).toBe(true);
    expect(offsets.seen(6n)).toBe(false);
  });
});

describe('Kafka names and URLs', () => {
  it('names a group’s retry tiers and dead-letter topic, and reads a tier’s delay back', () => {
    const names = new KafkaNames('oncemq');
    expect(names.retryTopic('points:v2', 1500)).toBe('oncemq.points_v2.retry.1500');
    expect(names.deadLetterTopic('points')).toBe('oncemq.points.dlt');
    expect(names.retryDelayOf('points', 'oncemq.points.retry.30000')).toBe(30000);
    expect(names.retryDelayOf('points', 'oncemq.points.dlt')).toBeNull();
    expect(() => new KafkaNames('bad prefix')).toThrow(/prefix/);
  });

  it('reads several bootstrap brokers from a URL and refuses what is not one', () => {
    expect(brokersOfUrl('kafka://a:9092,b:9093')).toEqual([
      { host: 'a', port: 9092 },
      { host: 'b', port: 9093 },
    ]);
    expect(() => brokersOfUrl('http://a:9092')).toThrow(/kafka:\/\//);
  });
});
