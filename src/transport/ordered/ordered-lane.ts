import type { Envelope } from '../../core/envelope.js';
import type { Logger } from '../../core/logger.js';
import type { Outcome } from '../../core/outcome.js';
import type { FinalOutcome } from '../settler.js';
import type { OrderingOptions, Processor } from '../transport.js';
import { GateClosedError, OrderingGate } from './ordering-gate.js';

/** One attempt at an ordered delivery: the processor's outcome, with a final one settled first. */
export type LaneAttempt<D> = (lane: OrderedLane<D>, envelope: Envelope) => Promise<Outcome>;

/**
 * Settles a held delivery with its final outcome, before the gate answers it; `envelope` is the one the
 * attempt ran (a retry in place carries its new delivery count).
 */
export type LaneSettle<D> = (delivery: D, outcome: FinalOutcome, envelope: Envelope) => Promise<unknown>;

/**
 * What a lane runs for each attempt: the processor, its final outcomes settled through `settle` before
 * the gate answers them ({@link settleBeforeAnswer}); or, for a broker whose attempt does more (NATS
 * takes a member-wide slot, Redis Streams dead-letters past `maxDeliveries` without processing), its
 * own `attempt`.
 */
export type LaneWork<D> =
  { readonly processor: Processor; readonly settle: LaneSettle<D> } | { readonly attempt: LaneAttempt<D> };

/** How a lane is built: its gate's ordering options and concurrency, and what it runs. */
export type LaneOptions<D> = LaneWork<D> & LaneGateOptions;

/** The gate's side of {@link LaneOptions}. */
export interface LaneGateOptions {
  readonly ordering: OrderingOptions;
  readonly concurrency: number;
  readonly logger?: Logger;
  /**
   * True where the broker hands unanswered deliveries back itself, in order, when the lane ends
   * (NATS naks them oldest first): a delivery whose gate closed before answering it stays held, and
   * {@link OrderedLane.held} lists it. False: it is forgotten, and the broker hands it out again.
   * @default false
   */
  readonly keepUnanswered?: boolean;
  /** Called each time a held delivery leaves the lane (answered, or its gate closed): there is room again. */
  readonly left?: () => void;
}

/**
 * The deliveries a member took from one source (a channel, a partition, a read generation) and the
 * ordering gate they run through; both end together. A delivery is held under its broker id, oldest
 * first (a redelivered copy may join its original), from {@link submit} until the gate answers it; a
 * retry runs the same delivery again in place. When the lane closes, what waits in its gate stays
 * unsettled — the broker hands it out again, in order — and what runs finishes.
 */
export class OrderedLane<D> {
  readonly gate: OrderingGate;
  readonly #held = new Map<string, D[]>();
  readonly #keepUnanswered: boolean;
  readonly #left: (() => void) | undefined;

  constructor(options: LaneOptions<D>) {
    const attempt = laneAttempt(options);
    this.#keepUnanswered = options.keepUnanswered ?? false;
    this.#left = options.left;
    this.gate = new OrderingGate(
      { process: (envelope) => attempt(this, envelope) },
      {
        ...options.ordering,
        concurrency: options.concurrency,
        ...(options.logger === undefined ? {} : { logger: options.logger }),
      },
    );
  }

  /**
   * Holds `delivery` and queues its envelope behind the earlier ones of its key. Once the gate answers
   * it (or closes before it ran), it is held no more; an error other than the gate closing goes to
   * `onError` (the delivery stays unsettled and comes again). `onDone`, when given, is called then
   * (after `onError`): a broker that holds a slot per delivery gives it back there.
   */
  submit(
    envelope: Envelope,
    delivery: D,
    onError: (error: unknown) => void,
    onDone?: () => void,
    answered?: Outcome,
  ): void {
    this.run(envelope, delivery, answered).then(
      () => onDone?.(),
      (error: unknown) => {
        if (!(error instanceof GateClosedError)) onError(error);
        onDone?.();
      },
    );
  }

  /**
   * Holds `delivery`, queues its envelope behind the earlier ones of its key, and resolves with the
   * gate's answer once it is settled; rejects with `GateClosedError` when the lane closed before it ran
   * (the delivery stays unsettled and comes again). For a reader that follows each delivery to its end
   * (Kafka commits a record's offset only then); {@link submit} is the same without the answer.
   * `answered`: the outcome of an attempt made outside the lane, which the gate goes on from
   * ({@link OrderingGate.submit}).
   */
  async run(envelope: Envelope, delivery: D, answered?: Outcome): Promise<Outcome> {
    const { brokerId } = envelope;
    const list = this.#held.get(brokerId);
    if (list === undefined) this.#held.set(brokerId, [delivery]);
    else list.push(delivery);
    try {
      const outcome = await this.gate.submit(envelope, answered);
      this.#forget(brokerId);
      return outcome;
    } catch (error) {
      if (!(error instanceof GateClosedError && this.#keepUnanswered)) this.#forget(brokerId);
      throw error;
    }
  }

  /** The oldest held delivery of `brokerId`: the one the gate runs now. */
  current(brokerId: string): D | undefined {
    return this.#held.get(brokerId)?.[0];
  }

  /** Every delivery the lane holds, oldest first per broker id. */
  *held(): IterableIterator<D> {
    for (const list of this.#held.values()) yield* list;
  }

  /** Deliveries held now. */
  get size(): number {
    let size = 0;
    for (const list of this.#held.values()) size += list.length;
    return size;
  }

  /** Closes the gate: deliveries waiting behind their key or for a retry stay unsettled. */
  close(): void {
    this.gate.close();
  }

  /** Resolves once nothing is pending in the gate. */
  drained(): Promise<void> {
    return this.gate.drained();
  }

  #forget(brokerId: string): void {
    const list = this.#held.get(brokerId);
    list?.shift();
    if (list?.length === 0) this.#held.delete(brokerId);
    this.#left?.();
  }
}

/** The attempt `work` names, or the one built from its processor and settle. */
function laneAttempt<D>(work: LaneWork<D>): LaneAttempt<D> {
  if ('attempt' in work) return work.attempt;
  const { processor, settle } = work;
  return async (lane, envelope) =>
    settleBeforeAnswer(
      lane.gate,
      await processor.process(envelope),
      lane.current(envelope.brokerId),
      (delivery, outcome) => settle(delivery, outcome, envelope),
    );
}

/**
 * The step every ordered attempt ends with: an outcome the gate runs again in place (a `retry`, or a
 * used-up message while `onExhausted` is `block`) is answered to the gate unsettled, behind nothing; a
 * final outcome (`ack`, `dead-letter`) is settled before it is answered, so the key's next delivery
 * starts only after this one is acked or its dead letter stored. A settle that throws makes the attempt
 * throw: the gate tries the delivery again, and the ledger answers it as a duplicate. No held delivery
 * (it left its lane) settles nothing.
 */
export async function settleBeforeAnswer<D>(
  gate: Pick<OrderingGate, 'answers'>,
  outcome: Outcome,
  delivery: D | undefined,
  settle: (delivery: D, outcome: FinalOutcome) => Promise<unknown>,
): Promise<Outcome> {
  if (outcome.action === 'retry' || !gate.answers(outcome)) return outcome;
  if (delivery !== undefined) await settle(delivery, outcome);
  return outcome;
}
