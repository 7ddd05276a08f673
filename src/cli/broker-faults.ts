import { KEY_HEADER } from '../core/envelope.js';
import { TransportUnavailableError } from '../core/errors.js';
import { InjectedFault, type FaultInjector } from '../testing/fault-injector.js';
import type { OutgoingMessage, Processor, PublishReceipt, Transport } from '../transport/transport.js';

/**
 * The faults a real broker allows, around a processor: after an outcome whose action is `ack`, a
 * `consumer-ack-loss` (or, after an executed effect, a `crash-after-commit`) throws instead of
 * returning, so the ack never reaches the broker and the copy comes back later (every transport
 * hands back a delivery whose processor threw, without charging it). Each stored copy is decided once.
 */
export function faultyProcessor(processor: Processor, injector: FaultInjector): Processor {
  return {
    async process(envelope) {
      const outcome = await processor.process(envelope);
      if (outcome.action !== 'ack') return outcome;
      const subject = envelope.headers[KEY_HEADER] ?? envelope.brokerId;
      if (outcome.kind === 'executed' && injector.crashAfterCommit(envelope)) {
        throw new InjectedFault('crash-after-commit', subject);
      }
      if (injector.consumerAckLost(envelope)) throw new InjectedFault('consumer-ack-loss', subject);
      return outcome;
    },
  };
}

/**
 * Publishes `message`; when the injector says its confirm was lost (`producer-ack-loss`), sends it
 * again with the same key, as a producer that timed out waiting for the confirm does. Returns the
 * copies stored and the receipt of the last one.
 */
export async function publishWithResends(
  transport: Transport,
  message: OutgoingMessage,
  injector: FaultInjector,
): Promise<{ readonly copies: number; readonly receipt: PublishReceipt }> {
  const key = message.key ?? '';
  const giveUpAt = Date.now() + UNAVAILABLE_RETRY_MS;
  for (let attempt = 1; ; attempt++) {
    let receipt: PublishReceipt;
    try {
      receipt = await transport.publish(message);
    } catch (error) {
      // A broker unavailable for a moment (a cluster moving a partition's leader after a node failure,
      // where the Kafka transport rejects the send): sent again with the same key, as an outbox relay
      // does; whether the rejected send was stored or not, the consumers' ledger tells.
      if (!(error instanceof TransportUnavailableError) || Date.now() > giveUpAt) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    if (!injector.producerAckLost({ key, uniqueId: key, attempt })) return { copies: attempt, receipt };
  }
}

/** How long a publish is tried again while the broker is unavailable. */
const UNAVAILABLE_RETRY_MS = 120_000;
