/** A request as every HTTP adapter hands it to oncemq: ... */
export interface HttpRequest {
  readonly method: string;
  readonly path: string /* route path, no query */;
  readonly url: string /* path + query as received */;
  readonly headers: Readonly<
    Record<string, string | undefined>
  > /* lower-case names, repeated headers joined with ", " */;
  readonly body: Uint8Array /* raw bytes as received */;
}
/** The business key of a request, or undefined when it carries none. */
export type HttpKeySource = (request: HttpRequest) => string | undefined;
/** Runs before the claim; throws to refuse the request (401), so an unsigned request never claims a key. */
export type HttpVerifier = (request: HttpRequest) => void | Promise<void>;
