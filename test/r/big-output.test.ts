import { expect } from "chai";
import { createHash } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { MAX_LINE_CHARS } from "../../src/r/console-log.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { rest } from "../support/clients.js";
import { startRig, until, type Rig } from "./support.js";

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

      const files = readdirSync(rig.dataDir).filter((name) => name.startsWith("rserver.log")).sort();
      expect(files).to.deep.equal(["rserver.log", "rserver.log.1", "rserver.log.2"]);
      for (const name of files) expect(statSync(join(rig.dataDir, name)).size, name).to.be.at.most(LOG_MAX_BYTES);
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
