import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { bootstrapUsers } from "../../src/auth/bootstrap.js";
import { UserDirectory } from "../../src/auth/users.js";
import { basic, startTestServer } from "../support/server.js";
import { rest } from "../support/clients.js";

const PASSWORD_FILE = "administrator-password.txt";

describe("first start's administrator", function () {
  this.timeout(20_000);
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-bootstrap-"))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("without a terminal, writes the password once to a 0600 file and announces only where it is", async () => {
    const shown: string[] = [];
    const users = await bootstrapUsers([], dir, (t) => shown.push(t), false);
    const file = path.join(dir, PASSWORD_FILE);
    const password = fs.readFileSync(file, "utf8").trim();
    expect(password).to.have.length.greaterThan(20);
    expect((fs.statSync(file).mode & 0o777).toString(8)).to.equal("600");
    expect(shown).to.have.length(1);
    expect(shown[0]).to.include(file);
    expect(shown[0]).not.to.include(password);
    expect(fs.readFileSync(path.join(dir, "users.generated.yaml"), "utf8")).not.to.include(password);

    const directory = new UserDirectory(users);
    try {
      expect((await directory.authenticate("administrator", password))?.roles.has("administrator")).to.equal(true);
    } finally {
      await directory.close();
    }
    fs.rmSync(file);
    expect(await bootstrapUsers([], dir, (t) => shown.push(t), false)).to.deep.equal(users);
    expect(shown, "later starts announce nothing").to.have.length(1);
    expect(fs.existsSync(file), "later starts write no password").to.equal(false);
  });

  it("on a terminal, shows the password once and writes it nowhere", async () => {
    const shown: string[] = [];
    const users = await bootstrapUsers([], dir, (t) => shown.push(t), true);
    expect(shown).to.have.length(1);
    const password = /with password (\S+)/.exec(shown[0]!)![1]!;
    expect(fs.existsSync(path.join(dir, PASSWORD_FILE))).to.equal(false);
    const directory = new UserDirectory(users);
    try {
      expect(await directory.authenticate("administrator", password)).not.to.equal(undefined);
    } finally {
      await directory.close();
    }
  });

  it("a server started without users by a caller that is not a terminal keeps the password in its data folder", async () => {
    const server = await startTestServer({ users: [] });
    try {
      const password = fs.readFileSync(path.join(server.dataDir, PASSWORD_FILE), "utf8").trim();
      const res = await rest(server.url, "GET", "/ws/draft/networks", { headers: { authorization: basic("administrator", password) } });
      expect(res.status, res.text).to.equal(200);
    } finally {
      await server.stop();
    }
  });
});
