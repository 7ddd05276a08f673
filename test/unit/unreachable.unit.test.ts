// Telling "the server cannot be reached" from other failures, under the wrappers drivers put around
// the socket's error, and saying it in one line without the password.
import { describe, expect, it } from 'vitest';
import { redactUrl, unreachableCause, unreachableMessage } from '../support/internal.js';

const refused = (port: number): Error =>
  Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:${port}`), { code: 'ECONNREFUSED', port });

describe('unreachableCause', () => {
  it('finds the socket error under AggregateErrors and causes (Kafka: MultipleErrors of NetworkErrors)', () => {
    const network = Object.assign(new Error('Connection to 127.0.0.1:9 failed.', { cause: refused(9) }), {
      code: 'PLT_KFK_NETWORK',
    });
    const error = new AggregateError(
      [new AggregateError([network], 'Cannot connect to any broker.')],
      'metadata failed 11 times.',
    );
    expect(unreachableCause(error)?.message).toBe('connect ECONNREFUSED 127.0.0.1:9');
  });

  it('reads a socket error a client kept only as text (gRPC UNAVAILABLE)', () => {
    const grpc = Object.assign(
      new Error(
        '14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:8081 (2026)',
      ),
      { code: 14 },
    );
    expect(unreachableCause(new Error('startup failed', { cause: grpc }))?.message).toBe(
      'connect ECONNREFUSED 127.0.0.1:8081',
    );
  });

  it('prefers a coded socket error to a quoted one, and answers nothing for other failures', () => {
    const wrapped = new Error('PostgreSQL failed: connect ECONNREFUSED 10.0.0.1:1', { cause: refused(5432) });
    expect(unreachableCause(wrapped)?.message).toBe('connect ECONNREFUSED 127.0.0.1:5432');
    const login = Object.assign(new Error('password authentication failed for user "x"'), { code: '28P01' });
    expect(unreachableCause(new Error('open failed', { cause: login }))).toBeUndefined();
    const loop: { cause?: unknown } & Error = new Error('loop');
    loop.cause = loop;
    expect(unreachableCause(loop)).toBeUndefined();
  });
});

describe('unreachableMessage', () => {
  it('names the server and the URL without its password, the socket error, then the hint, on one line', () => {
    expect(
      unreachableMessage({
        server: 'RabbitMQ',
        url: 'amqp://guest:s3cret@127.0.0.1:5672',
        detail: 'connect ECONNREFUSED 127.0.0.1:5672',
        hint: 'start one\nthere',
      }),
    ).toBe(
      'cannot connect to RabbitMQ at amqp://guest:***@127.0.0.1:5672: the server is not reachable (connect ECONNREFUSED 127.0.0.1:5672); start one there',
    );
    expect(redactUrl('redis://:pw@h:6379,nats://u:p@h2')).toBe('redis://:***@h:6379,nats://u:***@h2');
  });
});
