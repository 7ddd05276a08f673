import { LeasedLane } from '../ordered/leased-lane.js';
import type { SqsDelivery } from './sqs-delivery.js';

/**
 * The ordered path of an SQS subscription on FIFO queues: the deliveries its receive loop hands
 * over go through one {@link LeasedLane}, queued behind the earlier ones of their ordering key and
 * retried in place (kept invisible meanwhile); a final outcome is settled at the broker before the
 * key's next delivery starts. A delivery still waiting when the lane closes stays unsettled: the
 * broker hands it out again once its invisibility ends, in its message group's order.
 */
export class SqsOrderedLane extends LeasedLane<SqsDelivery> {}
