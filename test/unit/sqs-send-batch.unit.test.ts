import type { SendMessageBatchCommand, SendMessageBatchCommandOutput, SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { PermanentError, TransportUnavailableError } from 'oncemq';
import { SQS_BATCH_ATTEMPTS, SqsBatchSends } from '../support/internal.js';

type Entry = { Id: string; MessageBody: string };

/** A client whose `SendMessageBatch` answers as `fail` says for each entry's body; the calls kept. */
function fakeClient(
  fail: (body: string, call: number) => { SenderFault: boolean; Code: string } | undefined,
) {
  const calls: Entry[][] = [];
  const client = {
    send: (command: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput> => {
      const entries = (command.input.Entries ?? []) as Entry[];
      calls.push(entries);
      const failed = entries.flatMap((entry) => {
        const why = fail(entry.MessageBody, calls.length);
        return why === undefined ? [] : [{ Id: entry.Id, ...why, Message: `no ${entry.MessageBody}` }];
      });
      return Promise.resolve({ Successful: [], Failed: failed, $metadata: {} });
    },
  };
  return { client: client as unknown as SQSClient, calls };
}

const messages = (...bodies: string[]) =>
  bodies.map((body) => ({ label: `message ${body}`, input: { MessageBody: body } }));

describe('SqsBatchSends', () => {
  it('sends again only the entries SQS failed on its side, and then succeeds', async () => {
    const { client, calls } = fakeClient((body, call) =>
      body === 'b' && call === 1 ? { SenderFault: false, Code: 'InternalError' } : undefined,
    );
    const sends = new SqsBatchSends(client, 'q');
    await sends.send(messages('a', 'b', 'c'));
    expect(calls.map((entries) => entries.map((entry) => entry.MessageBody))).toEqual([
      ['a', 'b', 'c'],
      ['b'],
    ]);
    expect(() => sends.check('copying')).not.toThrow();
  });

  it('names an entry SQS refused, without sending it again, and sends every other one', async () => {
    const { client, calls } = fakeClient((body) =>
      body === 'bad' ? { SenderFault: true, Code: 'InvalidAttributeValue' } : undefined,
    );
    const sends = new SqsBatchSends(client, 'q');
    await sends.send(messages(...Array.from({ length: 12 }, (_, n) => (n === 4 ? 'bad' : `m${n}`))));
    expect(calls.map((entries) => entries.length)).toEqual([10, 2]);
    expect(() => sends.check('copying the log')).toThrow(PermanentError);
    expect(() => sends.check('copying the log')).toThrow(
      'copying the log: SQS stored 11 of 12 messages; refused message bad: InvalidAttributeValue (no bad)',
    );
  });

  it(`gives up an entry SQS keeps failing after ${SQS_BATCH_ATTEMPTS} sends: unavailable, named`, async () => {
    const { client, calls } = fakeClient((body) =>
      body === 'b' ? { SenderFault: false, Code: 'ServiceUnavailable' } : undefined,
    );
    const sends = new SqsBatchSends(client, 'q');
    await sends.send(messages('a', 'b'));
    expect(calls).toHaveLength(SQS_BATCH_ATTEMPTS);
    expect(() => sends.check('copying')).toThrow(TransportUnavailableError);
    expect(() => sends.check('copying')).toThrow(
      /stored 1 of 2 messages; failed after 3 sends message b: ServiceUnavailable/,
    );
  });

  it('keeps each batch within 256 KiB: three messages of 100 KiB go as two batches', async () => {
    const { client, calls } = fakeClient(() => undefined);
    const big = 'x'.repeat(100 * 1024);
    await new SqsBatchSends(client, 'q').send(messages(big, big, big));
    expect(calls.map((entries) => entries.length)).toEqual([2, 1]);
  });
});
