import { describe, expect, it } from 'vitest';
import { createEnvelope } from 'oncemq';
import { FAULT_NAMES, FaultInjector, InjectedFault, parseFaults } from 'oncemq/testing';

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

  it('decides each occurrence of a subject anew, so a replay is not doomed to the same fault', () => {
    const injector = new FaultInjector({ seed: 5, rates: { 'crash-after-commit': 0.5 } });
    const envelope = createEnvelope({
      brokerId: 'b1',
      topic: 't',
      body: {},
      headers: { 'oncemq-key': 'evt-1' },
    });
    const answers = Array.from({ length: 40 }, () => injector.crashAfterCommit(envelope));
    expect(answers).toContain(true);
    expect(answers).toContain(false);
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
