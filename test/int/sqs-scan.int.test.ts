import { randomUUID } from 'node:crypto';
import { CreateQueueCommand, DeleteQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { findElasticMQ } from '../support/brokers.js';
import { sqsSettings, SqsTopology } from '../support/internal.js';
import { sqsClient } from '../support/sqs.js';

const broker = await findElasticMQ();

describe.skipIf(!broker.available)('SqsTopology.scan: reading a queue without consuming it', () => {
  it('gives a page back at once when its reader throws, instead of hiding it for the hold', async () => {
    const client = sqsClient(broker.url);
    const { QueueUrl: url = '' } = await client.send(
      new CreateQueueCommand({ QueueName: `scan-${randomUUID().slice(0, 8)}` }),
    );
    try {
      for (const body of ['a', 'b', 'c']) {
        await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
      }
      const topology = new SqsTopology(client, sqsSettings({ endpoint: broker.url, client }));
      await expect(
        topology.scan(url, () => Promise.reject(new Error('the page could not be read'))),
      ).rejects.toThrow('the page could not be read');
      const seen: string[] = [];
      await topology.scan(url, (messages) => {
        seen.push(...messages.map((message) => message.Body ?? ''));
        return Promise.resolve(new Set<string>());
      });
      expect(seen.sort()).toEqual(['a', 'b', 'c']);
    } finally {
      await client.send(new DeleteQueueCommand({ QueueUrl: url }));
      client.destroy();
    }
  });
});
