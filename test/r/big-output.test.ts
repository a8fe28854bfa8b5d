import { expect } from "chai";
import { createHash } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { MAX_LINE_CHARS } from "../../src/r/process/console-log.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { rest } from "../support/clients.js";
import type { EvalEvent } from "../../src/r/process/child.js";
import { startRig, text, until, type Rig } from "./support.js";

const RSCRIPT = { "content-type": "application/x-rscript" };
const LOG_MAX_BYTES = 1_000_000;
const PRINTED = 40e6;

/** The md5 of `bytes` as R's tools::md5sum writes it. */
const md5 = (bytes: Uint8Array): string => createHash("md5").update(bytes).digest("hex");

/**
 * Results and printed text of 40–100 MB through real R and real sockets. Each would take minutes if
 * any step copied the bytes received so far once per chunk (quadratic): the default timeout is the check.
 */
describe("big results and printed output", () => {
  describe("console log: 40 MB printed without a newline", () => {
    let rig: Rig;
    before(async () => {
      rig = await startRig({ logMaxBytes: LOG_MAX_BYTES, logFiles: 2 });
    });
    after(async () => rig?.close());

    it("cuts it into lines of the bound, keeps every file within logMaxBytes and memory bounded", async () => {
      const session = await rig.engine.createSession("alice");
      const lines: number[] = [];
      let xs = 0;
      const unsubscribe = rig.log.subscribe((line) => {
        lines.push(line.length);
        xs += line.split("x").length - 1;
      });
      try {
        const value = await session.eval(Buffer.from(`cat(strrep("x", ${PRINTED})); 1`), "json");
        expect(value.toString()).to.equal("1");
        const whole = Math.floor(PRINTED / MAX_LINE_CHARS);
        // Lines come while the line is still open: the unfinished part never holds more than the bound.
        await until(() => lines.length === whole);
        expect(xs).to.equal(whole * MAX_LINE_CHARS);
        await session.eval(Buffer.from(`cat("\\n"); NULL`), "json");
        await until(() => xs === PRINTED);
        expect(lines.length).to.equal(whole + 1);
        expect(Math.max(...lines)).to.equal(MAX_LINE_CHARS);
      } finally {
        unsubscribe();
      }
      const kept = rig.log.last(10_000);
      expect(kept.length).to.be.greaterThan(0);
      expect(Math.max(...kept.map((line) => line.length))).to.be.at.most(MAX_LINE_CHARS);

      const files = readdirSync(rig.dataDir)
        .filter((name) => name.startsWith("rserver.log"))
        .sort();
      expect(files).to.deep.equal(["rserver.log", "rserver.log.1", "rserver.log.2"]);
      for (const name of files) expect(statSync(join(rig.dataDir, name)).size, name).to.be.at.most(LOG_MAX_BYTES);
    });
  });

  describe("JSON texts R writes straight from its string (json frames, from 64 KiB)", () => {
    let rig: Rig;
    before(async () => {
      rig = await startRig();
    });
    after(async () => rig?.close());

    /** `x`'s JSON as the service answers it, and the md5 of the same text as R makes it. */
    const bothSides = async (x: string) => {
      const session = await rig.engine.createSession("alice");
      await session.eval(text(`x <- ${x}; NULL`), "json");
      const digest = await session.eval(
        text(
          "f <- tempfile(); writeBin(charToRaw(enc2utf8(as.character(jsonlite::toJSON(x, auto_unbox=TRUE, null='null', na='null', digits=NA)))), f); d <- unname(tools::md5sum(f)); unlink(f); d",
        ),
        "json",
      );
      return { session, want: JSON.parse(digest.toString()) as string };
    };

    it("answers byte-identical JSON on both sides of the bound and far beyond it", async () => {
      // "aaa…" is its length + 2 bytes of JSON: 65,535 goes in one write behind its header, 65,536 on as the header then the string itself.
      for (const bytes of [65_535, 65_536, 65_537, 4_000_000]) {
        const { session, want } = await bothSides(`strrep("a", ${bytes - 2})`);
        const value = await session.eval(text("x"), "json");
        expect(value.length, `${bytes} bytes`).to.equal(bytes);
        expect(md5(value), `${bytes} bytes`).to.equal(want);
      }
    });

    it("keeps multi-byte UTF-8 intact, in plain, live and asynchronous evaluations", async () => {
      const { session, want } = await bothSides(`c(strrep("é€𝄞", 30000), "ok")`);
      expect(md5(await session.eval(text("x"), "json"))).to.equal(want);
      const events: EvalEvent[] = [];
      expect(md5(await session.eval(text("cat('before'); x"), "json", (e) => events.push(e)))).to.equal(want);
      expect(events).to.deep.equal([{ kind: "output", text: "before" }]);
      const command = session.submitEval(text("x"), "json");
      await command.wait(10_000);
      expect(command.status).to.equal("COMPLETED");
      expect(md5(command.result!)).to.equal(want);
      // The session goes on: the frame ended where R said.
      expect((await session.eval(text("1 + 1"), "json")).toString()).to.equal("2");
    });
  });

  describe("over REST", () => {
    let server: TestServer;
    let id: string;
    const evalR = (code: string, accept: string) =>
      rest(server.url, "POST", `/r/session/${id}/_eval`, { user: "user", body: code, headers: { ...RSCRIPT, accept } });

    before(async () => {
      server = await startTestServer({ r: { startOnBoot: true } });
      const res = await rest(server.url, "POST", "/r/sessions", { user: "user", headers: { "content-type": "application/json" } });
      expect(res.status, res.text).to.equal(201);
      id = res.json<{ id: string }>().id;
    });
    after(async () => server?.stop());

    it("answers a 100 MB R-serialized value byte-identical to R's serialize()", async () => {
      const digest = await evalR(
        "set.seed(1); x <- runif(12.5e6); f <- tempfile(); writeBin(serialize(x, NULL), f); d <- unname(tools::md5sum(f)); unlink(f); d",
        "application/json",
      );
      expect(digest.status, digest.text).to.equal(200);
      const res = await evalR("x", "application/octet-stream");
      expect(res.status).to.equal(200);
      expect(res.bytes.length).to.equal(100_000_031);
      expect(md5(res.bytes)).to.equal(JSON.parse(digest.text));
    });

    it("answers a 100 MB JSON value", async () => {
      const res = await evalR('sprintf("%098d", 1:1e6)', "application/json");
      expect(res.status).to.equal(200);
      expect(res.bytes.length).to.equal(101_000_001);
      const values = res.json<string[]>();
      expect(values.length).to.equal(1e6);
      const wrong = values.findIndex((v, i) => v !== String(i + 1).padStart(98, "0"));
      expect(wrong).to.equal(-1);
    });
  });
});
