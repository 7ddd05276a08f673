import { SetMetadata } from '@nestjs/common';
import type { HandlerContext } from '../consumer/handler-context.js';
import type { OncemqConsumerOptions } from './nest-options.js';

/** Metadata key of `@OncemqConsumer` on a method (a string: see nest-tokens.ts). */
export const ONCEMQ_CONSUMER_METADATA = 'oncemq:consumer';

/**
 * What `@OncemqConsumer` accepts: a method of `(message, ctx)`, as an oncemq handler.
 * @typeParam M - the decorated method; its first parameter must accept the consumer's message type `T`
 */
export type OncemqConsumerDecorator<T> = <M extends (message: T, ctx: HandlerContext<never>) => unknown>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => void;

/**
 * Declares a method of a provider (or controller) as the handler of a consumer group: at bootstrap
 * the module builds a pipeline on its ledger (`createPipeline`) and subscribes it on its transport to
 * `topics`; at shutdown the subscription drains (running deliveries finish and are settled) before
 * anything closes. The method is called as an oncemq handler, `(message, ctx)`, with `ctx.tx` the
 * claim's transaction; what it returns is stored as the key's result.
 *
 * @example
 * ```ts
 * @Injectable()
 * export class PointsConsumer {
 *   @OncemqConsumer<PaymentSucceeded>({ group: 'points', topics: 'payment-succeeded', key: { jsonPath: 'eventId' } })
 *   async credit(event: PaymentSucceeded, ctx: HandlerContext<PgClientLike>) {
 *     await ctx.tx.query('UPDATE points SET balance = balance + 100 WHERE user_id = $1', [event.userId]);
 *   }
 * }
 * ```
 */
export function OncemqConsumer<T = never>(options: OncemqConsumerOptions<T>): OncemqConsumerDecorator<T> {
  const metadata = Object.freeze({ ...options });
  return (target, key, descriptor) => {
    SetMetadata(ONCEMQ_CONSUMER_METADATA, metadata)(target, key, descriptor);
  };
}
