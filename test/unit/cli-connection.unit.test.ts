import { describe, expect, it } from 'vitest';
import { redactedLocation, resolveServiceUrl, SERVICE_CONNECTIONS, storeOfUrl } from '../support/internal.js';

describe('service URL resolution', () => {
  it('prefers the --url flag, then the environment variable, then the loopback default', () => {
    const env = { ONCEMQ_MYSQL_URL: 'mysql://app@db:3306/prod' };
    expect(resolveServiceUrl('mysql', 'mysql://flag@h/x', env)).toEqual({
      url: 'mysql://flag@h/x',
      source: 'flag',
    });
    expect(resolveServiceUrl('mysql', undefined, env)).toEqual({
      url: 'mysql://app@db:3306/prod',
      source: 'environment',
    });
    expect(resolveServiceUrl('mysql', undefined, {})).toEqual({
      url: 'mysql://root@127.0.0.1:3306/test',
      source: 'default',
    });
    expect(resolveServiceUrl('postgres', '', { ONCEMQ_POSTGRES_URL: '' }).url).toBe(
      'postgres://postgres@127.0.0.1:5432/test',
    );
  });

  it('names one variable per service', () => {
    expect(Object.values(SERVICE_CONNECTIONS).map((c) => c.variable)).toEqual([
      'ONCEMQ_POSTGRES_URL',
      'ONCEMQ_MYSQL_URL',
      'ONCEMQ_REDIS_URL',
      'ONCEMQ_RABBITMQ_URL',
      'ONCEMQ_NATS_URL',
      'ONCEMQ_ROCKETMQ_URL',
      'ONCEMQ_KAFKA_URL',
      'ONCEMQ_SQS_ENDPOINT',
    ]);
    expect(resolveServiceUrl('redis', undefined, {}).url).toBe('redis://127.0.0.1:6379');
    expect(resolveServiceUrl('rocketmq', undefined, {}).url).toBe('rocketmq://127.0.0.1:8081');
  });

  it('tells the store from the URL scheme and hides passwords when printing', () => {
    expect(storeOfUrl('mysql://root@127.0.0.1/test')).toBe('mysql');
    expect(storeOfUrl('postgresql://u@h/db')).toBe('postgres');
    expect(storeOfUrl('/var/lib/app/ledger.db')).toBe('sqlite');
    expect(storeOfUrl('redis://h')).toBeUndefined();
    expect(redactedLocation('mysql://app:s3cret@db:3306/prod')).toBe('mysql://app:***@db:3306/prod');
  });
});
