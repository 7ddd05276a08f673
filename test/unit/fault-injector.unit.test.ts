import { describe, expect, it } from 'vitest';
import { createEnvelope } from 'oncemq';
import { FAULT_NAMES, FaultInjector, InjectedFault, parseFaults } from 'oncemq/testing';

const delivery = (key: string, brokerId: string) =>
  createEnvelope({ brokerId, topic: 't', body: {}, headers: { 'oncemq-key': key } });

const decisions = (injector: FaultInjector, fault: (typeof FAULT_NAMES)[number]): boolean[] =>
  Array.from({ length: 500 }, (_, i) => injector.chance(fault, `evt-${i % 100}`));

describe('FaultInjector', () => {
  it('makes the same decisions for the same seed, whatever the order subjects are asked in', () => {
    const a = new FaultInjector({ seed: 7, rates: { poison: 0.3 } });
    const b = new FaultInjector({ seed: 7, rates: { poison: 0.3 } });
    const forward = Array.from({ length: 200 }, (_, i) => a.poison(`evt-${i}`));
    const backward = Array.from({ length: 200 }, (_, i) => b.poison(`evt-${199 - i}`)).reverse();
    expect(forward).toEqual(backward);
    expect(a.counts().poison).toBe(b.counts().poison);
  });

  it('makes different decisions for another seed', () => {
    expect(decisions(new FaultInjector({ seed: 1, rates: { poison: 0.5 } }), 'poison')).not.toEqual(
      decisions(new FaultInjector({ seed: 2, rates: { poison: 0.5 } }), 'poison'),
    );
  });

  it('injects at about its rate and counts each injected fault', () => {
    const injector = new FaultInjector({ seed: 3, rates: { 'consumer-ack-loss': 0.1 } });
    const hits = Array.from({ length: 10_000 }, (_, i) =>
      injector.chance('consumer-ack-loss', `k${i}`),
    ).filter(Boolean);
    expect(hits.length).toBeGreaterThan(800);
    expect(hits.length).toBeLessThan(1200);
    expect(injector.counts()['consumer-ack-loss']).toBe(hits.length);
  });

  it('draws the next run of a subject anew, so a retried handler is not doomed to the same fault', () => {
    const injector = new FaultInjector({ seed: 5, rates: { 'handler-crash': 0.5 } });
    const answers = Array.from({ length: 40 }, () => injector.chance('handler-crash', 'evt-1'));
    expect(answers).toContain(true);
    expect(answers).toContain(false);
  });

  it('decides a stored copy once: its redeliveries are never faulted again, so a lost ack cannot repeat for ever', () => {
    const injector = new FaultInjector({
      seed: 5,
      rates: { 'consumer-ack-loss': 1, 'crash-after-commit': 1 },
    });
    const copy = delivery('evt-1', 'b1');
    const acks = Array.from({ length: 5 }, () => injector.consumerAckLost(copy));
    expect(acks).toEqual([true, false, false, false, false]);
    expect(injector.crashAfterCommit(copy)).toBe(true);
    expect(injector.counts()).toMatchObject({ 'consumer-ack-loss': 1, 'crash-after-commit': 1 });
  });

  it('decides as many copies of a key as the producer stored, however many replays bring', () => {
    const injector = new FaultInjector({
      seed: 5,
      rates: { 'producer-ack-loss': 1, 'consumer-ack-loss': 1 },
    });
    // Three sends: the first two confirms lost (the broker never asks about its last attempt).
    expect(injector.producerAckLost({ key: 'evt-1', uniqueId: 'u', attempt: 1 })).toBe(true);
    expect(injector.producerAckLost({ key: 'evt-1', uniqueId: 'u', attempt: 2 })).toBe(true);
    const copies = ['b1', 'b2', 'b3', 'b4-retry'].map((id) =>
      injector.consumerAckLost(delivery('evt-1', id)),
    );
    expect(copies).toEqual([true, true, true, false]);
  });

  it('injects the same faults for the same seed whatever order copies arrive in and however often they come back', () => {
    const run = (order: 'forward' | 'backward', replays: number): Record<string, number> => {
      const injector = new FaultInjector({
        seed: 13,
        faults: ['producer-ack-loss', 'consumer-ack-loss', 'crash-after-commit'],
        rates: { 'producer-ack-loss': 0.3, 'consumer-ack-loss': 0.3, 'crash-after-commit': 0.3 },
      });
      const stored: [string, string][] = [];
      for (let i = 0; i < 200; i++) {
        const key = `evt-${i}`;
        for (let attempt = 1; attempt <= 3; attempt++) {
          stored.push([key, `${key}@${attempt}-${order}`]); // broker ids differ from run to run
          if (attempt === 3 || !injector.producerAckLost({ key, uniqueId: key, attempt })) break;
        }
      }
      const arrivals = order === 'forward' ? stored : [...stored].reverse();
      for (let round = 0; round <= replays; round++) {
        for (const [key, brokerId] of arrivals) {
          injector.consumerAckLost(delivery(key, brokerId));
          injector.crashAfterCommit(delivery(key, brokerId));
        }
      }
      // A replay may bring a copy the producer never stored (a retried copy redelivered): not decided.
      if (replays > 0) {
        for (let i = 0; i < 200; i++) injector.consumerAckLost(delivery(`evt-${i}`, `evt-${i}-extra`));
      }
      return injector.counts();
    };
    const first = run('forward', 0);
    expect(run('backward', 3)).toEqual(first);
    expect(first['consumer-ack-loss']).toBeGreaterThan(0);
    expect(first['crash-after-commit']).toBeGreaterThan(0);
  });

  it('decides commit-failure per key and attempt: a no holds for the attempt, a failure moves to the next draw', () => {
    const a = new FaultInjector({ seed: 2, faults: ['commit-failure'], rates: { 'commit-failure': 0.5 } });
    const b = new FaultInjector({ seed: 2, faults: ['commit-failure'], rates: { 'commit-failure': 0.5 } });
    // One by one: each key asks at attempt 1 until its commit passes.
    const untilPassed = (injector: FaultInjector, key: string, extraAsksAfterPass: number): number => {
      let failures = 0;
      while (injector.commitFailure(key, 1)) failures++;
      for (let i = 0; i < extraAsksAfterPass; i++) expect(injector.commitFailure(key, 1)).toBe(false);
      return failures;
    };
    const ofA = ['evt-0', 'evt-1', 'evt-2', 'evt-3'].map((key) => untilPassed(a, key, 0));
    // As a batch run again one by one would: a key that passed is asked again and still passes.
    const ofB = ['evt-3', 'evt-2', 'evt-1', 'evt-0'].map((key) => untilPassed(b, key, 2)).reverse();
    expect(ofB).toEqual(ofA);
    expect(a.counts()['commit-failure']).toBe(b.counts()['commit-failure']);
    expect(a.counts()['commit-failure']).toBe(ofA.reduce((sum, n) => sum + n, 0));
  });

  it('decides a handler crash once per key and attempt, however often the attempt runs', () => {
    const rates = { 'handler-crash': 0.5 };
    const a = new FaultInjector({ seed: 3, faults: ['handler-crash'], rates });
    const b = new FaultInjector({ seed: 3, faults: ['handler-crash'], rates });
    const crashes = (injector: FaultInjector, key: string, attempt: number): boolean => {
      try {
        injector.handlerCrash(key, attempt);
        return false;
      } catch {
        return true;
      }
    };
    const once = Array.from({ length: 20 }, (_, i) => crashes(a, `evt-${i}`, 1));
    const thrice = Array.from({ length: 20 }, (_, i) => [1, 2, 3].map(() => crashes(b, `evt-${i}`, 1)));
    expect(thrice.map((answers) => new Set(answers).size)).toEqual(Array(20).fill(1));
    expect(thrice.map(([first]) => first)).toEqual(once);
    expect(b.counts()['handler-crash']).toBe(a.counts()['handler-crash']);
  });

  it('injects nothing for a fault that is switched off', () => {
    const injector = new FaultInjector({ faults: ['poison'], rates: { 'handler-crash': 1, poison: 1 } });
    expect(() => injector.handlerCrash('evt-1')).not.toThrow();
    expect(injector.poison('evt-1')).toBe(true);
  });

  it('throws an InjectedFault from handlerCrash when the fault fires', () => {
    const injector = new FaultInjector({ faults: ['handler-crash'], rates: { 'handler-crash': 1 } });
    expect(() => injector.handlerCrash('evt-1')).toThrow(InjectedFault);
    expect(injector.counts()['handler-crash']).toBe(1);
  });

  it('parses all, none and named faults with rates, and refuses unknown names', () => {
    expect(parseFaults('all').faults).toEqual([...FAULT_NAMES]);
    expect(parseFaults('none').faults).toEqual([]);
    expect(parseFaults('poison,handler-crash=0.5')).toEqual({
      faults: ['poison', 'handler-crash'],
      rates: { 'handler-crash': 0.5 },
    });
    expect(() => parseFaults('gremlins')).toThrow(/unknown fault 'gremlins'/);
    expect(() => parseFaults('poison=2')).toThrow(/\[0, 1\]/);
  });
});
