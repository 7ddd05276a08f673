import { ConfigError } from '../../core/errors.js';
import type { StartPosition } from '../transport.js';
import { replyCode, type StreamCommands } from './redis-streams-commands.js';
import { replyText } from './redis-streams-replies.js';
import { CHECK } from './redis-streams-scripts.js';

/**
 * Makes sure `group` can consume `streams`. With `create`, each missing stream and consumer group is
 * created where `from` says: `earliest` at id 0 (`XGROUP CREATE … 0 MKSTREAM`: a new group reads what
 * was published before it — TRANSPORTS.md Redis #7), `now` at `$` (it reads what is added after); a
 * group that exists already (`BUSYGROUP`) is left as it is. With `check`, nothing is created and
 * anything missing is a {@link ConfigError}.
 */
export async function ensureGroup(
  commands: StreamCommands,
  topology: 'create' | 'check',
  group: string,
  streams: readonly string[],
  from: StartPosition = 'earliest',
): Promise<void> {
  if (topology === 'check') {
    await checkGroup(commands, group, streams);
    return;
  }
  for (const stream of streams) {
    try {
      const id = from === 'now' ? '$' : '0';
      await commands.send(['XGROUP', 'CREATE', stream, group, id, 'MKSTREAM'], `XGROUP CREATE ${stream}`);
    } catch (error) {
      const code = replyCode(error);
      if (code === 'BUSYGROUP') continue;
      if (code === 'WRONGTYPE') {
        throw new ConfigError(
          'prefix',
          `key '${stream}' holds something other than a stream; use another prefix`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }
}

/** Fails with a {@link ConfigError} naming every stream that is missing or lacks the consumer group. */
export async function checkGroup(
  commands: StreamCommands,
  group: string,
  streams: readonly string[],
  field = 'topology',
): Promise<void> {
  const reply = await commands.script(CHECK, streams, [group]);
  const missing = Array.isArray(reply) ? reply.map((item) => replyText(item) ?? '') : [];
  if (missing.length > 0) {
    throw new ConfigError(
      field,
      `consumer group '${group}' cannot read: ${missing.join(', ')}; nothing was created`,
    );
  }
}
