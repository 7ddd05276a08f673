import type { Envelope } from '../../core/envelope.js';

/**
 * Where the local broker asks whether to inject a fault. Each answer `true` is one injected fault.
 * `FaultInjector` from `oncemq/testing` implements it; the broker never imports it.
 */
export interface LocalFaultHooks {
  /** The copy is stored; drop its confirm so the producer resends (a second copy, new broker id). */
  producerAckLost(message: {
    readonly key: string | undefined;
    readonly uniqueId: string;
    readonly attempt: number;
  }): boolean;
  /** The effect is committed and the outcome says ack; drop the ack so the broker redelivers the same copy. */
  consumerAckLost(envelope: Envelope): boolean;
  /** The effect is committed; the member dies before committing its offsets, then rejoins. */
  crashAfterCommit(envelope: Envelope): boolean;
  /** Mid-batch, a member joins the group (and leaves later), forcing two rebalances. */
  rebalance(envelope: Envelope): boolean;
}
