// OncemqModule refuses at bootstrap what cannot run: two consumers of one group, a subscription the
// transport refuses, a request-scoped consumer, an unknown module name and a setting the pipeline refuses.
import { Injectable, Module, Scope } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { ClosedError, ConfigError } from 'oncemq';
import { OncemqConsumer, OncemqModule } from 'oncemq/nest';
import { PostgresLedger } from 'oncemq/postgres';
import {
  createContext,
  DB,
  nestApplicationScope,
  postgres,
  Probe,
  PROBE,
  queueState,
  rabbit,
} from '../support/nest-application.js';
import type { PointsSchema } from '../support/postgres.js';

describe.skipIf(!rabbit.available || !postgres.available)('OncemqModule in a Nest application', () => {
  let db: PointsSchema;
  const { transports, apps, rabbitTransport } = nestApplicationScope((opened) => (db = opened));

  describe('refuses at bootstrap', () => {
    const scratchLedger = (): PostgresLedger => new PostgresLedger({ pool: db.pool, schema: db.schema });

    /** The bootstrap's error, or undefined when it started; `made`: the module creates its transport and ledger. */
    async function bootstrapError(
      providers: unknown[],
      names: string[] = [],
      made = false,
    ): Promise<unknown> {
      const probe = new Probe();
      const extra = names.map((name) =>
        OncemqModule.forRoot({ name, transport: rabbitTransport(), ledger: scratchLedger() }),
      );
      const main = made
        ? OncemqModule.forRoot({ transport: rabbitTransport, ledger: scratchLedger })
        : OncemqModule.forRoot({ transport: rabbitTransport(), ledger: scratchLedger() });
      @Module({
        imports: [main, ...extra],
        providers: [{ provide: DB, useValue: db }, { provide: PROBE, useValue: probe }, ...(providers as [])],
      })
      class AppModule {}
      return createContext(AppModule).then(
        (app) => {
          apps.push(app);
          return undefined;
        },
        (error: unknown) => error,
      );
    }

    it('two consumers of one group', async () => {
      @Injectable()
      class Twice {
        @OncemqConsumer({ group: 'points', topics: 'a' })
        first(): void {}

        @OncemqConsumer({ group: 'points', topics: 'b' })
        second(): void {}
      }
      const error = await bootstrapError([Twice], [], true);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/Twice\.second.*group 'points' is already consumed by Twice\.first/);
      expect(transports.map((transport) => transport.declared.queues.size)).toEqual([0]);
      // Nest runs no shutdown hook after a failed bootstrap: the module closed the transport it made.
      await expect(transports[0]?.publish({ topic: 'a', body: {} })).rejects.toBeInstanceOf(ClosedError);
    });

    it('a subscription the transport refuses, after another consumer subscribed: that one is closed again', async () => {
      @Injectable()
      class SecondRefused {
        @OncemqConsumer({ group: 'alpha', topics: 'a' })
        first(): void {}

        @OncemqConsumer({ group: 'beta', topics: 'not a topic' })
        second(): void {}
      }
      const error = await bootstrapError([SecondRefused]);
      expect(String(error)).toMatch(/not a valid topic/);
      const [transport] = transports;
      if (transport === undefined) throw new Error('no transport');
      // The transport is the application's and stays open: only the module's own drain left the queue.
      expect(await queueState(rabbit.url, transport.names.work('alpha'))).toEqual({
        messages: 0,
        consumers: 0,
      });
      expect(await transport.publish({ topic: 'a', body: {} })).toMatchObject({ topic: 'a' });
    });

    it('a consumer on a request-scoped provider', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequest {
        @OncemqConsumer({ group: 'points', topics: 'a' })
        handle(): void {}
      }
      const error = await bootstrapError([PerRequest]);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/PerRequest\.handle.*request-scoped/);
    });

    it('a consumer of a module name no OncemqModule has', async () => {
      @Injectable()
      class Billing {
        @OncemqConsumer({ group: 'points', topics: 'a', moduleName: 'billing' })
        handle(): void {}
      }
      expect(String(await bootstrapError([Billing]))).toMatch(/no OncemqModule is named 'billing'/);
      expect(await bootstrapError([Billing], ['billing'])).toBeUndefined();
    });

    it('a consumer setting the pipeline refuses', async () => {
      @Injectable()
      class BadGroup {
        @OncemqConsumer({ group: 'has space', topics: 'a' })
        handle(): void {}
      }
      const error = await bootstrapError([BadGroup]);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/BadGroup\.handle.*group/);
    });
  });
});
