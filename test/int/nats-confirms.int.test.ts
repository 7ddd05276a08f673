import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { TransportUnavailableError } from 'oncemq';
import { deleteStreams, directConnection, NATS_SERVICE, natsNamespace } from '../support/nats.js';
import { sleep } from '../support/points.js';
import { findService } from '../support/services.js';
import { NatsConfirms } from '../support/internal.js';

const service = await findService(NATS_SERVICE);
const encoder = new TextEncoder();

/** Settles as requests answered on one inbox: resolved only by the answer, rejected without one. */
describe.skipIf(!service.available)('NATS settle confirms', () => {
  let connection: NatsConnection;
  const names = natsNamespace();
  beforeEach(async () => {
    connection = await directConnection(service.url);
  });
  afterEach(async () => {
    await connection.close();
    await deleteStreams(service.url, names.streamPrefix);
  });

  /** A subject something listens to and never answers. */
  const silentSubject = async (): Promise<string> => {
    const subject = `${names.subjectPrefix}.silent`;
    connection.subscribe(subject, { callback: () => undefined });
    await connection.flush();
    return subject;
  };

  /** Where the promise stands after `ms`. */
  const stateAfter = async (promise: Promise<void>, ms: number): Promise<string> => {
    let state = 'pending';
    promise.then(
      () => (state = 'confirmed'),
      () => (state = 'rejected'),
    );
    await sleep(ms);
    return state;
  };

  it('confirms an ack of a JetStream delivery once the server answered it: the copy is no longer pending', async () => {
    const jsm = await jetstreamManager(connection);
    const js = jetstream(connection);
    const stream = `${names.streamPrefix}_confirms`;
    await jsm.streams.add({ name: stream, subjects: [`${names.subjectPrefix}.confirms`] });
    await jsm.consumers.add(stream, { durable_name: 'g', ack_policy: AckPolicy.Explicit });
    await js.publish(`${names.subjectPrefix}.confirms`, 'x');
    const consumer = await js.consumers.get(stream, 'g');
    const msg = await consumer.next({ expires: 2000 });
    expect(msg).not.toBeNull();
    expect((await jsm.consumers.info(stream, 'g')).num_ack_pending).toBe(1);

    const confirms = new NatsConfirms(connection, 2000);
    const reply = (msg as { readonly reply?: string } | null)?.reply ?? '';
    await confirms.send(reply, encoder.encode('+ACK'));
    expect((await jsm.consumers.info(stream, 'g')).num_ack_pending).toBe(0);
    confirms.close();
  });

  it('waits for the answer, however late: not confirmed before it, confirmed once it came', async () => {
    const subject = `${names.subjectPrefix}.late`;
    connection.subscribe(subject, {
      callback: (_error, msg) => {
        setTimeout(() => msg.respond(), 400);
      },
    });
    await connection.flush();
    const confirms = new NatsConfirms(connection, 2000);
    const confirmed = confirms.send(subject, encoder.encode('+ACK'));
    expect(await stateAfter(confirmed, 200)).toBe('pending');
    expect(await stateAfter(confirmed, 400)).toBe('confirmed');
    confirms.close();
  });

  it('rejects a settle nobody answers within the timeout, and one nothing listens to', async () => {
    const silent = await silentSubject();
    const confirms = new NatsConfirms(connection, 300);
    const started = Date.now();
    await expect(confirms.send(silent, encoder.encode('+ACK'))).rejects.toBeInstanceOf(
      TransportUnavailableError,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    await expect(confirms.send(`${names.subjectPrefix}.nobody`, encoder.encode('+ACK'))).rejects.toThrow(
      /no responders/,
    );
    confirms.close();
  });

  it('rejects what is still unconfirmed when it closes', async () => {
    const silent = await silentSubject();
    const confirms = new NatsConfirms(connection, 10_000);
    const confirmed = confirms.send(silent, encoder.encode('+ACK'));
    await sleep(100);
    confirms.close();
    await expect(confirmed).rejects.toThrow(/closed/);
  });
});
