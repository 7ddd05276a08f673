import { describe, expect, it } from 'vitest';
import { EffectChecker } from 'oncemq/testing';

describe('EffectChecker', () => {
  it('is ok when every published key took effect once', () => {
    const checker = new EffectChecker();
    for (const key of ['a', 'b']) {
      checker.published(key);
      checker.effect(key);
    }
    expect(checker.report()).toMatchObject({
      published: 2,
      effects: 2,
      doubleEffects: 0,
      lostEffects: 0,
      ok: true,
    });
  });

  it('counts every effect past the first of a key as a double effect', () => {
    const checker = new EffectChecker();
    checker.published('a');
    checker.effect('a', 3);
    expect(checker.report()).toMatchObject({ doubleEffects: 2, doubleKeys: ['a'], ok: false });
  });

  it('counts a published key without effect as lost, even when it was dead-lettered', () => {
    const checker = new EffectChecker();
    checker.published('a');
    checker.published('b');
    checker.effect('b');
    checker.deadLettered('a', 'retries-exhausted');
    expect(checker.report()).toMatchObject({ lostEffects: 1, lostKeys: ['a'], ok: false });
  });

  it('accepts poison that ends dead-lettered, and counts poison that vanished as lost', () => {
    const checker = new EffectChecker();
    checker.published('poison-1', 'dead-letter');
    checker.published('poison-2', 'dead-letter');
    checker.deadLettered('poison-1', 'malformed');
    checker.deadLettered('poison-1', 'malformed');
    const report = checker.report();
    expect(report).toMatchObject({ lostEffects: 1, lostKeys: ['poison-2'], deadLettered: 2 });
    expect(report.deadLetterReasons).toEqual({ malformed: 2 });
  });

  it('tells the dead letters of each reason from the messages behind them: a copy dead-lettered again counts once', () => {
    const checker = new EffectChecker();
    for (const key of ['poison-1', 'poison-1', 'poison-2']) checker.deadLettered(key, 'malformed');
    checker.deadLettered('evt-9', 'retries-exhausted');
    checker.deadLettered(null, 'missing-key');
    checker.deadLettered(null, 'missing-key');
    const report = checker.report();
    expect(report.deadLetterReasons).toEqual({ malformed: 3, 'retries-exhausted': 1, 'missing-key': 2 });
    expect(report.deadLetterMessages).toEqual({ malformed: 2, 'retries-exhausted': 1, 'missing-key': 2 });
    const letters = Object.values(report.deadLetterReasons).reduce((sum, n) => sum + n, 0);
    expect(letters).toBe(report.deadLettered);
  });

  it('counts an effect of poison or of a key never published as a double effect', () => {
    const checker = new EffectChecker();
    checker.published('poison-1', 'dead-letter');
    checker.effect('poison-1');
    checker.effect('stranger');
    expect(checker.report().doubleEffects).toBe(2);
  });

  it('counts absorbed duplicates by source from pipeline outcomes', () => {
    const checker = new EffectChecker();
    const base = { group: 'g', key: 'a', topic: 't', brokerId: 'b', deliveryCount: 1, elapsedMs: 0 };
    checker.observe({ ...base, kind: 'duplicate', action: 'ack', source: 'redelivery' });
    checker.observe({ ...base, kind: 'duplicate', action: 'ack', source: 'republish' });
    checker.observe({
      ...base,
      kind: 'busy',
      action: 'retry',
      source: 'concurrent',
      delayMs: 100,
      nextDeliveryCount: 1,
    });
    expect(checker.report().duplicates).toEqual({ redelivery: 1, republish: 1, concurrent: 1 });
  });
});
