import type http from "node:http";
import type http2 from "node:http2";

/** A request as Node's HTTP/1.1 and HTTP/2 servers give it. */
export type ServerRequest = http.IncomingMessage | http2.Http2ServerRequest;

/**
 * A response of either server as one type, as connect-node's NodeServerResponse (which Connect-ES's
 * own functions take): the two write() differ in their signatures, so write and writeHead are given
 * the shape both accept; both write overloads, so that the type stays Connect-ES's.
 */
export type ServerResponse = (Omit<http.ServerResponse, "write"> | Omit<http2.Http2ServerResponse, "write">) & {
  write(chunk: string | Uint8Array, callback?: (err: Error | null | undefined) => void): boolean;
  write(chunk: string | Uint8Array, encoding: BufferEncoding, callback?: (err: Error | null | undefined) => void): boolean;
  writeHead(status: number, headers?: http.OutgoingHttpHeaders): unknown;
};

/** What answers a request on the port, over either HTTP version. */
export type RequestHandler = (req: ServerRequest, res: ServerResponse) => void;

/** The path of a request target, its query left off (`/a/b?x=1` → `/a/b`); `/` when there is none. */
export function pathOf(target: string | undefined): string {
  const t = target ?? "/";
  const q = t.indexOf("?");
  return q < 0 ? t : t.slice(0, q);
}
