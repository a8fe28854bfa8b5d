import { expect } from "chai";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as grpcJs from "@grpc/grpc-js";
import type { EvalResponse, ExecuteResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { call, grpcClients, metadataFor, rest, type RestAnswer } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { rscript } from "./support.js";

/** The script of issue 37: a string with two letters outside ASCII. */
const SCRIPT = '"été"';
/** How Spring sends a String body without a charset (Opal's RockSession, Armadillo's RockConnection). */
const LATIN1 = Buffer.from(SCRIPT, "latin1");
const UTF8 = Buffer.from(SCRIPT, "utf8");
/** "été" in UTF-8, as R prints `charToRaw()`: what R must hold whatever the client's encoding. */
const UTF8_BYTES = "c3 a9 74 c3 a9";

const CASES = [
  { name: "ISO-8859-1 without a charset (Opal, Armadillo)", type: "application/x-rscript", body: LATIN1 },
  { name: "UTF-8 without a charset", type: "application/x-rscript", body: UTF8 },
  { name: "ISO-8859-1 with charset=ISO-8859-1", type: "application/x-rscript; charset=ISO-8859-1", body: LATIN1 },
  { name: "UTF-8 with charset=utf-8", type: "application/x-rscript;charset=utf-8", body: UTF8 },
] as const;

/** What R prints of the string a serialization holds: its bytes. */
async function bytesInR(rds: Buffer): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "rock-charset-test-"));
  try {
    const file = join(dir, "x.rds");
    await writeFile(file, rds);
    return rscript(`x <- unserialize(readBin('${file}', 'raw', ${rds.length})); cat(paste(charToRaw(x), collapse = ' '))`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every message of a grpc-js server stream. */
function drain<T>(stream: grpcJs.ClientReadableStream<T>): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const items: T[] = [];
    stream.on("data", (m: T) => items.push(m));
    stream.on("error", reject);
    stream.on("end", () => resolve(items));
  });
}

describe("scripts' charsets", function () {
  this.timeout(60_000);
  let server: TestServer;
  let grpc: ReturnType<typeof grpcClients>;
  let id: string;

  before(async () => {
    server = await startTestServer({ r: { startOnBoot: true } });
    grpc = grpcClients(server.port);
    const created = await rest(server.url, "POST", "/r/sessions", { user: "user" });
    expect(created.status, created.text).to.equal(201);
    id = created.json<{ id: string }>().id;
  });
  after(async () => {
    grpc?.close();
    await server?.stop();
  });

  const post = (path: string, type: string, body: Uint8Array, accept = "application/json"): Promise<RestAnswer> =>
    rest(server.url, "POST", `/r/session/${id}${path}`, { user: "user", body, headers: { "content-type": type, accept } });

  for (const c of CASES) {
    describe(c.name, () => {
      it("_eval answers the string as JSON", async () => {
        const res = await post("/_eval", c.type, c.body);
        expect(res.status, res.text).to.equal(200);
        expect(res.text).to.equal('"été"');
      });

      it("_eval answers the string as R serialization, in UTF-8", async () => {
        const res = await post("/_eval", c.type, c.body, "application/octet-stream");
        expect(res.status, res.text).to.equal(200);
        expect(res.headers.get("content-type")).to.equal("application/octet-stream");
        expect(await bytesInR(res.bytes)).to.equal(UTF8_BYTES);
      });

      it("_assign assigns the string, in UTF-8", async () => {
        const assigned = await post("/_assign?s=word", c.type, c.body);
        expect(assigned.status, assigned.text).to.equal(200);
        const back = await post("/_eval", "application/x-rscript", Buffer.from("paste(charToRaw(word), collapse = ' ')"));
        expect(back.json()).to.equal(UTF8_BYTES);
        await post("/_eval", "application/x-rscript", Buffer.from("rm(word)"));
      });
    });
  }

  it("keeps an asynchronous command's script in UTF-8", async () => {
    const queued = await post("/_eval?async=true", "application/x-rscript", LATIN1);
    expect(queued.status, queued.text).to.equal(201);
    expect(queued.json<{ script: string }>().script).to.equal(SCRIPT);
  });

  it("reads the other charsets of the WHATWG Encoding standard: windows-1252's euro sign, UTF-16", async () => {
    const euro = await post("/_eval", "application/x-rscript; charset=windows-1252", Buffer.from([0x22, 0x80, 0x22]));
    expect(euro.status, euro.text).to.equal(200);
    expect(euro.text).to.equal('"€"');
    const utf16 = await post("/_eval", 'application/x-rscript; charset="UTF-16LE"', Buffer.from(SCRIPT, "utf16le"));
    expect(utf16.text).to.equal('"été"');
  });

  it("answers 400 naming the charset when the script has a byte it does not allow", async () => {
    for (const [charset, body] of [
      ["utf-8", LATIN1],
      ["us-ascii", UTF8],
    ] as const) {
      for (const path of ["/_eval", "/_assign?s=x"]) {
        const res = await post(path, `application/x-rscript; charset=${charset}`, body);
        expect(res.status, `${path} ${charset}`).to.equal(400);
        expect(res.json<{ message: string }>().message).to.equal(`The script is not valid ${charset}, the charset of its Content-Type`);
      }
    }
  });

  it("answers 415 naming a charset it does not know, for _eval, _assign and _execute", async () => {
    for (const path of ["/_eval", "/_assign?s=x", "/_execute"]) {
      const res = await post(path, "application/x-rscript; charset=klingon", UTF8);
      expect(res.status, path).to.equal(415);
      expect(res.json<{ message: string }>().message).to.match(/^The charset 'klingon' of the script's Content-Type is not supported: /);
    }
    const exists = await post("/_eval", "application/x-rscript", Buffer.from("exists('x')"));
    expect(exists.text, "a refused assign assigns nothing").to.equal("false");
  });

  it("applies the same rules to an HttpBody's content type over gRPC (Execute, Eval)", async () => {
    const md = metadataFor("user");
    const events = await drain<ExecuteResponse>(
      grpc.r.execute({ id, accept: "", script: { contentType: "application/x-rscript", data: LATIN1, extensions: [] } }, md),
    );
    expect(events.map((e) => e.json)).to.deep.equal(["été"]);
    const script = { contentType: "text/plain; charset=iso-8859-1", data: LATIN1, extensions: [] };
    const answer = await call<EvalResponse>((cb) => grpc.r.eval({ id, async: false, accept: "", script }, md, cb));
    expect(Buffer.from(answer.value!.data).toString("utf8")).to.equal('"été"');
    const refused = await call<EvalResponse>((cb) =>
      grpc.r.eval({ id, async: false, accept: "", script: { ...script, contentType: "text/plain; charset=klingon" } }, md, cb),
    ).then(
      () => undefined,
      (error: grpcJs.ServiceError) => error,
    );
    expect(refused?.details).to.match(/^The charset 'klingon'/);
  });
});
