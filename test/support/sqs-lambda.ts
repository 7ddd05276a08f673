import { DEFAULT_SQS_URL } from '../../bench/sqs-queues.js';
import { findService, type Service } from './services.js';

/** An SQS endpoint for the Lambda suites: `ONCEMQ_SQS_URL`, else ElasticMQ from `npm run brokers -- start`. */
export function findSqs(): Promise<Service> {
  return findService({ variable: 'ONCEMQ_SQS_URL', defaultUrl: DEFAULT_SQS_URL });
}
