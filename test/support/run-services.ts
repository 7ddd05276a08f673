import { findElasticMQ, findKafka, findRocketMQ } from './brokers.js';
import { findRabbit } from './rabbitmq.js';
import { NATS_SERVICE } from './nats.js';
import { REDIS_SERVICE } from './redis.js';
import { findService, type Service } from './services.js';

/** The broker each run transport needs (none for the local broker), found like the other services. */
export async function findRunBroker(transport: string): Promise<Service> {
  switch (transport) {
    case 'rabbitmq':
      return findRabbit();
    case 'nats':
      return findService(NATS_SERVICE);
    case 'redis-streams':
      return findService(REDIS_SERVICE);
    case 'kafka':
      return findKafka();
    case 'rocketmq':
      return findRocketMQ();
    case 'sqs':
      return findElasticMQ();
    default:
      return { url: '', available: true, reason: '' };
  }
}
