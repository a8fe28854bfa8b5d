import { expect } from "chai";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConsoleLog, MAX_LINE_CHARS, MEMORY_CHARS } from "../../src/r/process/console-log.js";

describe("ConsoleLog: long lines and large appends", () => {
  let dir: string;
  let log: ConsoleLog;
  let lines: string[];
  const open = (maxBytes: number, files: number) => {
    log = new ConsoleLog({ file: join(dir, "rserver.log"), maxBytes, files });
    log.subscribe((line) => lines.push(line));
  };
  const files = () => readdirSync(dir).sort();
  const sizes = () => files().map((name) => statSync(join(dir, name)).size);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "rock-console-log-test-"));
    lines = [];
  });
  afterEach(() => {
    log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("cuts a 40 MB line written in one piece, keeps each file within maxBytes and memory bounded", () => {
    open(1_000_000, 2);
    log.append("x".repeat(40e6));
    const whole = Math.floor(40e6 / MAX_LINE_CHARS);
    expect(lines.length).to.equal(whole);
    expect(lines.every((line) => line === "x".repeat(MAX_LINE_CHARS))).to.equal(true);
    log.append("\n");
    expect(lines.length).to.equal(whole + 1);
    expect(lines[whole]!.length).to.equal(40e6 - whole * MAX_LINE_CHARS);

    expect(files()).to.deep.equal(["rserver.log", "rserver.log.1", "rserver.log.2"]);
    for (const size of sizes()) expect(size).to.be.at.most(1_000_000);
    // Rotation happens at line ends, and the file holds the lines as cut.
    for (const name of files()) {
      for (const line of readFileSync(join(dir, name), "utf8").split("\n").slice(0, -1)) expect(line).to.match(/^x{1,65536}$/);
    }
    const kept = log.last(10_000);
    expect(kept.reduce((n, line) => n + line.length, 0)).to.be.at.most(MEMORY_CHARS);
    expect(kept.at(-1)).to.equal(lines.at(-1));
  });

  it("cuts a line arriving in small pieces at the bound, and not a line of exactly the bound", () => {
    open(10_000_000, 1);
    for (let i = 0; i < 300; i++) log.append("y".repeat(1000));
    expect(lines.map((line) => line.length)).to.deep.equal([MAX_LINE_CHARS, MAX_LINE_CHARS, MAX_LINE_CHARS, MAX_LINE_CHARS]);
    log.append("\nz");
    log.append(`${"z".repeat(MAX_LINE_CHARS - 1)}\nend\n`);
    expect(lines.slice(4).map((line) => line.length)).to.deep.equal([300_000 - 4 * MAX_LINE_CHARS, MAX_LINE_CHARS, 3]);
    expect(
      readFileSync(join(dir, "rserver.log"), "utf8")
        .split("\n")
        .map((line) => line.length),
    ).to.deep.equal([...lines.map((line) => line.length), 0]);
  });

  it("never cuts a surrogate pair", () => {
    open(10_000_000, 1);
    log.append(`a${"😀".repeat(MAX_LINE_CHARS)}\n`);
    expect(lines.join("")).to.equal(`a${"😀".repeat(MAX_LINE_CHARS)}`);
    for (const line of lines) expect(line.length).to.be.at.most(MAX_LINE_CHARS);
    expect(lines.some((line) => /^[\udc00-\udfff]|[\ud800-\udbff]$/.test(line))).to.equal(false);
  });

  it("rotates a 40 MB append of short lines at line ends", () => {
    open(1_000_000, 3);
    const line = `${"0123456789".repeat(7)}\n`;
    log.append(line.repeat(Math.ceil(40e6 / line.length)));
    expect(files()).to.have.length(4);
    for (const name of files()) {
      const text = readFileSync(join(dir, name), "utf8");
      expect(text.length, name).to.be.at.most(1_000_000);
      expect(
        text
          .split("\n")
          .slice(0, -1)
          .every((l) => l === line.slice(0, -1)),
        name,
      ).to.equal(true);
      expect(text.endsWith("\n"), name).to.equal(true);
    }
    expect(log.last(10_000)).to.have.length(10_000);
  });

  it("bounds the backlog of a follower that does not read, and says what it lost", async () => {
    open(100_000_000, 1);
    const stop = new AbortController();
    const follower = log.tail(0, true, stop.signal);
    const first = follower.next();
    log.append("first\n");
    expect((await first).value).to.equal("first");
    for (let i = 0; i < 25_000; i++) log.append(`line ${i}\n`);
    const next = [(await follower.next()).value, (await follower.next()).value];
    expect(next[0]).to.match(/^\[15000 lines not shown/);
    expect(next[1]).to.equal("line 15000");
    stop.abort();
    await follower.return(undefined);
  });
});
