import { it } from 'vitest';
import { NatsTransport } from 'oncemq/nats';
import { deleteStreams, natsNamespace } from '../support/nats.js';

it('overlap probe', async () => {
  const a = natsNamespace();
  const b = natsNamespace();
  const one = new NatsTransport({ servers: 'nats://127.0.0.1:4222', ...a });
  const two = new NatsTransport({ servers: 'nats://127.0.0.1:4222', streamPrefix: b.streamPrefix, subjectPrefix: a.subjectPrefix });
  const three = new NatsTransport({ servers: 'nats://127.0.0.1:4222', streamPrefix: a.streamPrefix, subjectPrefix: b.subjectPrefix });
  try {
    await one.publish({ topic: 't', key: 'k', body: {} });
    await two.publish({ topic: 't', key: 'k', body: {} }).then(() => console.log('TWO ok'), (e) => console.log('TWO', e.name, e.message, JSON.stringify((e.cause as any)?.api_error ?? (e.cause as any)?.code)));
    await three.publish({ topic: 't', key: 'k', body: {} }).then(() => console.log('THREE ok'), (e) => console.log('THREE', e.name, e.message));
  } finally {
    await one.close(); await two.close(); await three.close();
    await deleteStreams('nats://127.0.0.1:4222', a.streamPrefix);
    await deleteStreams('nats://127.0.0.1:4222', b.streamPrefix);
  }
}, 60000);
