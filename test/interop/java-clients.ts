/**
 * What the Java clients of Rock put on the wire, for the replays of Opal (opal-replay.test.ts) and
 * Armadillo (armadillo-replay.test.ts): each request is written with exactly the headers their Java code
 * sends (node:http adds only Host and Connection, as every HTTP/1.1 client does), bodies encoded as their
 * Spring converters encode them, uploads chunked as their request factories stream them, and answers
 * decoded as those clients decode them.
 */
import { randomInt } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { join, normalize, sep } from "node:path";
import { gunzipSync, inflateSync } from "node:zlib";
import { expect } from "chai";
import { execa } from "execa";

/**
 * The Accept header java.net.HttpURLConnection sends when the caller sets none, up to JDK 18 (and 17.0.11,
 * 11.0.23): `*` alone is not a media range (JDK-8163921). Later JDKs send `*\/*`, below.
 */
export const JAVA_DEFAULT_ACCEPT_BEFORE_19 = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2";
export const JAVA_DEFAULT_ACCEPT = "*/*";
/** HttpURLConnection's User-Agent (Opal's RestTemplate without a request factory, Armadillo's HEAD). */
export const JAVA_USER_AGENT = "Java/21.0.7";
/** Apache HttpClient 5 (Spring's HttpComponentsClientHttpRequestFactory) with its content compression. */
export const APACHE_CLIENT = { "User-Agent": "Apache-HttpClient/5.4.4 (Java/21.0.7)", "Accept-Encoding": "gzip, x-gzip, deflate" } as const;

/**
 * The Accept header Spring's RestTemplate computes for a response type: the media types of every
 * default converter that can read it, most specific first. Jackson reads a bean, a Void and a String
 * (`application/json, application/*+json`); StringHttpMessageConverter reads a String as `text/plain` and
 * `*\/*`. (With jackson-dataformat-xml on the classpath the XML types come first: ACCEPT_WITH_XML.)
 */
export const SPRING_ACCEPT = {
  bean: "application/json, application/*+json",
  string: "text/plain, application/json, application/*+json, */*",
} as const;
export const SPRING_ACCEPT_WITH_XML = "application/xml, text/xml, application/json, application/*+xml, application/*+json";

export function basicAuthorization(user: string, password = user): string {
  return `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`;
}

/**
 * A Java String as Spring's StringHttpMessageConverter writes it when the Content-Type names no charset
 * (application/x-rscript, application/x-rdata): ISO-8859-1, every character past U+00FF written as `?`
 * (String.getBytes's replacement), one per code point.
 */
export function latin1(text: string): Buffer {
  return Buffer.from(Array.from(text, (c) => (c.codePointAt(0)! > 0xff ? 0x3f : c.codePointAt(0)!)));
}

/** A body sent with a Content-Length (bytes), or in chunks with Transfer-Encoding: chunked. */
export type Body = Buffer | { readonly chunks: readonly Buffer[] };

export interface Exchange {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The body as the client's HTTP library hands it on: Content-Encoding undone (Apache HttpClient does). */
  readonly body: Buffer;
  /** The body decoded as Spring's StringHttpMessageConverter decodes it (JSON: UTF-8; else the charset, else ISO-8859-1). */
  springString(): string;
  /** The body as org.json's `new JSONObject(String)` / Jackson read it (UTF-8). */
  json<T>(): T;
  contentType(): string | undefined;
}

/** Splits `bytes` into pieces of `size`, as a streaming request factory writes them. */
export function chunked(bytes: Buffer, size: number): { chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return { chunks };
}

/** The media type of a Content-Type header, lower case, without its parameters. */
export function mediaType(contentType: string | undefined): string | undefined {
  return contentType === undefined ? undefined : contentType.split(";")[0]!.trim().toLowerCase();
}

function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset="?([^";]+)"?/i.exec(contentType ?? "");
  return match ? match[1]!.toLowerCase() : undefined;
}

/** Plain HTTP/1.1 requests over one keep-alive agent, as the Java clients' connection pools reuse sockets. */
export class Wire {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

  constructor(private readonly port: number) {}

  send(method: string, path: string, headers: Record<string, string>, body?: Body): Promise<Exchange> {
    return new Promise((resolve, reject) => {
      const request = http.request({ host: "127.0.0.1", port: this.port, method, path, headers, agent: this.agent }, (response) => {
        const pieces: Buffer[] = [];
        response.on("data", (piece: Buffer) => pieces.push(piece));
        response.on("error", reject);
        response.on("end", () => {
          try {
            resolve(exchange(response, Buffer.concat(pieces)));
          } catch (error) {
            reject(error);
          }
        });
      });
      request.on("error", reject);
      if (body === undefined) request.end();
      else if (Buffer.isBuffer(body)) request.end(body);
      else {
        for (const chunk of body.chunks) request.write(chunk);
        request.end();
      }
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function exchange(response: http.IncomingMessage, raw: Buffer): Exchange {
  const encoding = String(response.headers["content-encoding"] ?? "identity").toLowerCase();
  const body = encoding === "gzip" || encoding === "x-gzip" ? gunzipSync(raw) : encoding === "deflate" ? inflateSync(raw) : raw;
  const contentType = response.headers["content-type"];
  return {
    status: response.statusCode!,
    headers: response.headers,
    body,
    contentType: () => contentType,
    springString() {
      const type = mediaType(contentType);
      const charset = charsetOf(contentType) ?? (type === "application/json" || type?.endsWith("+json") ? "utf-8" : "iso-8859-1");
      // WHATWG's TextDecoder reads "iso-8859-1" as windows-1252; Java's ISO-8859-1 maps every byte to its code point.
      if (charset === "iso-8859-1" || charset === "latin1") return body.toString("latin1");
      return new TextDecoder(charset).decode(body);
    },
    json<T>() {
      return JSON.parse(body.toString("utf8")) as T;
    },
  };
}

/**
 * A multipart/form-data body as Spring's FormHttpMessageConverter writes one file part of an
 * InputStreamResource whose length is unknown (Opal's and Armadillo's MultiPartInputStreamResource): a
 * random boundary of 30 to 40 characters, `Content-Type: multipart/form-data;boundary=…` (no space, no
 * charset: the converter's charset is UTF-8), the part's Content-Disposition and Content-Type, no
 * Content-Length.
 */
export function springMultipart(fileName: string, content: Buffer, partType: string): { contentType: string; body: Buffer } {
  const alphabet = "-_1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const boundary = Array.from({ length: randomInt(30, 41) }, () => alphabet[randomInt(alphabet.length)]).join("");
  const head =
    `--${boundary}\r\n` +
    `Content-Disposition: form-data; name="file"; filename="${fileName}"\r\n` +
    `Content-Type: ${partType}\r\n` +
    "\r\n";
  const body = Buffer.concat([Buffer.from(head, "utf8"), content, Buffer.from(`\r\n--${boundary}--\r\n`, "utf8")]);
  return { contentType: `multipart/form-data;boundary=${boundary}`, body };
}

/** The fields of Rock's session JSON Opal's and Armadillo's RockSessionInfo read (Jackson, @JsonFormat "yyyy-MM-dd HH:mm:ss"). */
export function expectRockSessionInfo(answer: Exchange): string {
  expect(mediaType(answer.contentType()), "Jackson reads only a JSON content type").to.equal("application/json");
  const info = answer.json<Record<string, unknown>>();
  expect(info.id).to.be.a("string").and.not.equal("");
  expect(info.subject).to.be.a("string");
  expect(info.busy).to.be.a("boolean");
  expect(info.createdDate)
    .to.be.a("string")
    .and.match(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  if (info.lastAccessDate !== undefined) expect(info.lastAccessDate).to.match(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  return info.id as string;
}

/** The message RockServerException (Armadillo) takes from an error answer: org.json's getString("message"). */
export function rockErrorMessage(answer: Exchange): string {
  const error = answer.json<{ message?: unknown }>();
  expect(error.message, `an error body with a message: ${answer.body.toString("utf8")}`).to.be.a("string");
  return error.message as string;
}

/** A source package `name_version.tar.gz` made by `R CMD build` (no compiled code): `hello()` answers `answer`. */
export async function buildPackage(
  name: string,
  version: string,
  answer: string,
  broken = false,
): Promise<{ file: string; dispose(): Promise<void> }> {
  const root = await mkdtemp(join(os.tmpdir(), "rock-interop-package-"));
  try {
    const source = join(root, name);
    await mkdir(join(source, "R"), { recursive: true });
    const description = [
      `Package: ${name}`,
      `Version: ${version}`,
      `Title: Test Package ${name}`,
      "Description: Built by the interoperability tests.",
      "License: MIT",
      "Author: Test",
      "Maintainer: Test <test@example.org>",
      "Encoding: UTF-8",
    ];
    await writeFile(join(source, "DESCRIPTION"), `${description.join("\n")}\n`);
    await writeFile(join(source, "NAMESPACE"), "export(hello)\n");
    await writeFile(join(source, "R", "hello.R"), broken ? "hello <- function( {\n" : `hello <- function() "${answer}"\n`);
    await execa("R", ["CMD", "build", "--no-manual", "--no-build-vignettes", "--no-resave-data", source], {
      cwd: root,
      stdin: "ignore",
      env: { TMPDIR: root, R_LIBS_USER: join(root, "none") },
    });
    return { file: join(root, `${name}_${version}.tar.gz`), dispose: () => rm(root, { recursive: true, force: true }) };
  } catch (error) {
    await rm(root, { recursive: true, force: true });
    throw error;
  }
}

/** Re-indexes a CRAN-like `src/contrib` folder after its archives changed. */
export async function indexRepository(contrib: string): Promise<void> {
  await execa(
    "R",
    ["--no-echo", "--no-save", "--no-restore", "-e", "tools::write_PACKAGES(commandArgs(TRUE)[1], type = 'source')", "--args", contrib],
    {
      stdin: "ignore",
    },
  );
}

/**
 * A folder served read-only over HTTP on loopback, as CRAN serves a repository: sessions reach it with
 * the network they have by default, where a `file://` path on the host is outside what a confined session
 * sees (its own /tmp, a minimal view of the host's files).
 */
export async function serveFolder(root: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const path = normalize(join(root, decodeURIComponent(new URL(request.url ?? "/", "http://x").pathname)));
    const refuse = (status: number) => response.writeHead(status, { "content-length": "0" }).end();
    if (!path.startsWith(root + sep) || (request.method !== "GET" && request.method !== "HEAD")) return refuse(404);
    stat(path)
      .then(async (info) => {
        if (!info.isFile()) return refuse(404);
        const bytes = await readFile(path);
        response.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(bytes.length) });
        response.end(request.method === "HEAD" ? undefined : bytes);
      })
      .catch(() => refuse(404));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
