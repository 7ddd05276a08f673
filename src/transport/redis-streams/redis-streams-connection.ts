/** One word of a command: text, or bytes (a message body). */
export type CommandArg = string | Uint8Array;

/** Options of one {@link StreamConnection.send}. */
export interface SendOptions {
  /** Bulk replies as bytes (`Uint8Array`) rather than text: for the commands that return message bodies. */
  readonly bytes?: boolean;
}

/**
 * One connection to Redis as the stream transport drives it: every command is sent as its words, so
 * no option shape of one client can be silently ignored by another (AWS Powertools #5716). Replies
 * come as the client maps them (RESP2 or RESP3); `redis-streams-replies.ts` reads every shape.
 */
export interface StreamConnection {
  /** Which client drives it, for logs and errors. */
  readonly client: string;
  /** Sends one command, as its words (`['XADD', key, '*', …]`), and resolves with the reply. */
  send(args: readonly CommandArg[], options?: SendOptions): Promise<unknown>;
  /**
   * Opens another connection of the same client with the same settings: a blocking read holds its
   * connection (TRANSPORTS.md Redis #8), so each subscription reads and settles on its own two.
   */
  duplicate(): Promise<StreamConnection>;
  /**
   * Calls `listener` each time the connection is lost (the client then reconnects by itself, or
   * gives up); returns a function that stops listening.
   */
  onLost(listener: () => void): () => void;
  /** Closes the connection at once. The transport calls it only on connections it opened. */
  close(): Promise<void>;
}
