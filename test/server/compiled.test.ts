import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { rest } from "../support/clients.js";
import { ROOT } from "../support/main-process.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

const admin = { user: "admin", password: "admin" };
const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };

/**
 * The program as `npm start`, `npx rock-ts` and the container run it: the JavaScript `npm run build`
 * compiled into dist/ (npm's pretest builds it first), which finds what it reads at run time (the R
 * scripts, gen/r/protocol.R, package.json) from the checkout's root, not from its own place.
 */
describe("the compiled program (dist/)", function () {
  this.timeout(120_000);
  let rock: RockProcess;
  before(async () => {
    rock = await spawnRock({ ROCK_R_START: "true", ROCK_R_SPARE_SESSIONS: "1" }, { compiled: true });
    await untilAnswers(rock.url, "/_check", 200);
  });
  after(() => rock?.kill());

  it("is one JavaScript file per source file, with its source map", () => {
    const main = readFileSync(join(ROOT, "dist/src/main.js"), "utf8");
    expect(main).to.match(/\/\/# sourceMappingURL=main\.js\.map\s*$/);
    expect(JSON.parse(readFileSync(join(ROOT, "dist/src/main.js.map"), "utf8")).sources).to.deep.equal(["../../src/main.ts"]);
  });

  it("serves R sessions: evaluates, suspends and resumes, and names its version", async () => {
    const id = (await rest(rock.url, "POST", "/r/sessions", admin)).json<{ id: string }>().id;
    const two = await rest(rock.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: "x <- 1 + 1; x" });
    expect(two.json()).to.equal(2);
    expect((await rest(rock.url, "POST", `/r/session/${id}/_suspend`, admin)).status).to.equal(204);
    const back = await rest(rock.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: "x" });
    expect(back.json()).to.equal(2);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    expect((await rest(rock.url, "GET", "/openapi.json")).json<{ info: { version: string } }>().info.version).to.equal(pkg.version);
  });

  it("runs the compiled JavaScript, without tsx's loader", () => {
    const cmdline = readFileSync(`/proc/${rock.pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    expect(cmdline.slice(1)).to.deep.equal(["src/cli/bin.js"]);
  });
});
