import { LeasedLane } from '../ordered/leased-lane.js';
import type { RocketMQDelivery } from './rocketmq-delivery.js';

/**
 * The path of every RocketMQ subscription on FIFO topics: the deliveries its receive loop hands over go
 * through one {@link LeasedLane}, queued behind the earlier ones of their ordering key and retried in
 * place (kept invisible meanwhile); a final outcome is settled at the broker before the key's next
 * delivery starts. A delivery still waiting when the lane closes stays unsettled: the broker hands it
 * out again once its invisibility ends, in its message group's order.
 *
 * An orderly group keeps its invisibility per queue: a message of a FIFO queue made visible again
 * for a retry brings back the messages received after it from that queue, acked ones included (seen on
 * 5.5.0: a dead-lettered message stored twice). So on FIFO topics a retry never goes back to the
 * broker, even for an unordered subscription or a batch: it runs again here, as RocketMQ's own FIFO
 * consumers retry locally.
 */
export class RocketMQOrderedLane extends LeasedLane<RocketMQDelivery> {}
