import { expect } from "chai";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config/load.js";
import { bootstrapUsers } from "../../src/auth/bootstrap.js";
import { UserDirectory } from "../../src/auth/users.js";

describe("configuration", () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-config-"))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("runs on embedded defaults with no file and no environment", () => {
    const c = loadConfig([], {});
    expect(c.port).to.equal(8085);
    expect(c.r.executable).to.equal("R");
    expect(c.users).to.deep.equal([]);
    expect(c.dataDir).to.equal(path.resolve("data"));
  });

  it("reads a YAML file given by flag, then lets the environment override it", () => {
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(
      file,
      ["port: 9000", "node:", "  cluster: lab", "  tags: [a, b]", "r:", "  sessionTimeoutMinutes: 5", "users:", "  - {name: ann, secret: pw, roles: [user]}"].join("\n"),
    );
    const c = loadConfig(["--config", file], { ROCK_PORT: "9100", ROCK_REPOS: "file:///repo1, file:///repo2" });
    expect(c.port).to.equal(9100);
    expect(c.node.cluster).to.equal("lab");
    expect(c.node.tags).to.deep.equal(["a", "b"]);
    expect(c.r.sessionTimeoutMinutes).to.equal(5);
    expect(c.users).to.deep.equal([{ name: "ann", secret: "pw", roles: ["user"] }]);
    expect(c.packages.repos).to.deep.equal(["file:///repo1", "file:///repo2"]);
  });

  it("refuses unknown settings and values of the wrong type, naming them", () => {
    const file = path.join(dir, "bad.yaml");
    fs.writeFileSync(file, "r:\n  sessionTimout: 5\n");
    expect(() => loadConfig([`--config=${file}`], {})).to.throw(/unknown setting 'sessionTimout'/);
    fs.writeFileSync(file, "port: eighty\n");
    expect(() => loadConfig(["--config", file], {})).to.throw(/port: expected a number/);
  });

  it("reads users from ROCK_USERS, secrets with colons included", () => {
    const c = loadConfig([], { ROCK_USERS: "ann:a:b:c:user,manager;bob:{noop}x:administrator" });
    expect(c.users).to.deep.equal([
      { name: "ann", secret: "a:b:c", roles: ["user", "manager"] },
      { name: "bob", secret: "{noop}x", roles: ["administrator"] },
    ]);
  });

  it("creates an administrator once, shows its password once and keeps only the hash", async function () {
    this.timeout(10_000);
    const shown: string[] = [];
    const users = await bootstrapUsers([], dir, (t) => shown.push(t), true);
    expect(shown).to.have.length(1);
    const password = /password (\S+)/.exec(shown[0]!)![1]!;
    const stored = fs.readFileSync(path.join(dir, "users.generated.yaml"), "utf8");
    expect(stored).to.include("{bcrypt}");
    expect(stored).not.to.include(password);
    expect((fs.statSync(path.join(dir, "users.generated.yaml")).mode & 0o777).toString(8)).to.equal("600");
    const again = await bootstrapUsers([], dir, (t) => shown.push(t), true);
    expect(shown).to.have.length(1);
    expect(again).to.deep.equal(users);
    const caller = await new UserDirectory(again).authenticate("administrator", password);
    expect(caller?.roles.has("administrator")).to.equal(true);
    expect(await new UserDirectory(again).authenticate("administrator", password + "x")).to.equal(undefined);
  });

  it("uses configured users as they are", async () => {
    const configured = [{ name: "x", secret: "y", roles: ["user"] }];
    expect(await bootstrapUsers(configured, dir, () => expect.fail("nothing to announce"))).to.equal(configured);
    expect(fs.existsSync(path.join(dir, "users.generated.yaml"))).to.equal(false);
  });
});
