import { expect } from "chai";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { defaults, loadConfig } from "../../src/config/load.js";
import { bootstrapUsers } from "../../src/auth/bootstrap.js";
import { UserDirectory } from "../../src/auth/users.js";

describe("configuration", () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-config-"))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("runs on embedded defaults with no file and no environment", () => {
    const c = loadConfig(undefined, {});
    expect(c.port).to.equal(8085);
    expect(c.r.executable).to.equal("R");
    expect(c.users).to.deep.equal([]);
    expect(c.dataDir).to.equal(path.resolve("data"));
  });

  it("reads a YAML file given by flag, then lets the environment override it", () => {
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(
      file,
      [
        "port: 9000",
        "node:",
        "  cluster: lab",
        "  tags: [a, b]",
        "r:",
        "  sessionTimeoutMinutes: 5",
        "users:",
        "  - {name: ann, secret: pw, roles: [user]}",
      ].join("\n"),
    );
    const c = loadConfig(file, { ROCK_PORT: "9100", ROCK_REPOS: "file:///repo1, file:///repo2" });
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
    expect(() => loadConfig(file, {})).to.throw(/bad\.yaml: unknown setting 'r\.sessionTimout'$/);
    fs.writeFileSync(file, "port: eighty\n");
    expect(() => loadConfig(file, {})).to.throw(/port: expected a number/);
  });

  it("reads users from ROCK_USERS, secrets with colons included", () => {
    const c = loadConfig(undefined, { ROCK_USERS: "ann:a:b:c:user,manager;bob:{noop}x:administrator" });
    expect(c.users).to.deep.equal([
      { name: "ann", secret: "a:b:c", roles: ["user", "manager"] },
      { name: "bob", secret: "{noop}x", roles: ["administrator"] },
    ]);
  });

  it("takes Rock's variables; the rock-ts names win when both name the same setting", () => {
    const rock = { ROCK_ID: "rock-id", ROCK_SERVER: "https://rock.example.org", ROCK_CLUSTER: "lab", ROCK_TAGS: "x,y" };
    const c = loadConfig(undefined, rock);
    expect(c.node).to.deep.equal({
      id: "rock-id",
      name: undefined,
      cluster: "lab",
      tags: ["x", "y"],
      publicUrl: "https://rock.example.org",
    });
    const both = loadConfig(undefined, {
      ...rock,
      ROCK_NODE_ID: "ts-id",
      ROCK_PUBLIC_URL: "https://ts.example.org",
      ROCK_NODE_NAME: "Node",
    });
    expect(both.node).to.deep.include({ id: "ts-id", name: "Node", publicUrl: "https://ts.example.org" });
  });

  it("adds a user per ROCK_<ROLE>_NAME/PASSWORD pair, replacing one of the same name; empty variables are unset", () => {
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(file, "users:\n  - {name: ann, secret: pw, roles: [user]}\n  - {name: boss, secret: old, roles: [user]}\n");
    const c = loadConfig(file, {
      ROCK_ADMINISTRATOR_NAME: "boss",
      ROCK_ADMINISTRATOR_PASSWORD: "{noop}new",
      ROCK_MANAGER_NAME: "",
      ROCK_MANAGER_PASSWORD: "",
      ROCK_USER_NAME: "uma",
      ROCK_USER_PASSWORD: "u",
      ROCK_ID: "",
    });
    expect(c.users).to.deep.equal([
      { name: "ann", secret: "pw", roles: ["user"] },
      { name: "boss", secret: "{noop}new", roles: ["administrator"] },
      { name: "uma", secret: "u", roles: ["user"] },
    ]);
    expect(c.node.id).to.equal(defaults().node.id);
    expect(() =>
      loadConfig(undefined, {
        ROCK_ADMINISTRATOR_NAME: "x",
        ROCK_ADMINISTRATOR_PASSWORD: "a",
        ROCK_USER_NAME: "x",
        ROCK_USER_PASSWORD: "b",
      }),
    ).to.throw(/ROCK_USER_NAME: user 'x' is already ROCK_ADMINISTRATOR_NAME/);
  });

  it("refuses booleans, numbers and ROCK_* variables it does not know, naming them; ROCK_CONFIG is known", () => {
    for (const [v, expected] of [
      ["TRUE", true],
      ["false", false],
      ["1", true],
      ["0", false],
      ["yes", true],
      ["No", false],
    ] as const) {
      expect(loadConfig(undefined, { ROCK_R_START: v }).r.startOnBoot, v).to.equal(expected);
    }
    expect(() => loadConfig(undefined, { ROCK_R_START: "ture" })).to.throw(
      /^r\.startOnBoot \(ROCK_R_START\): expected true or false, not 'ture'$/,
    );
    expect(() => loadConfig(undefined, { ROCK_R_MAX_SESSIONS: "ten" })).to.throw(
      /^r\.maxSessions \(ROCK_R_MAX_SESSIONS\): expected a number, not 'ten'$/,
    );
    expect(() => loadConfig(undefined, { ROCK_PORT: "70000" })).to.throw(/^port \(ROCK_PORT\): expected an integer from 0 to 65535/);
    expect(() => loadConfig(undefined, { ROCK_OPAL_SERVR: "x", ROCK_MAX_SESIONS: "1" })).to.throw(
      /unknown environment variables ROCK_MAX_SESIONS, ROCK_OPAL_SERVR \(/,
    );
    const home = loadConfig(undefined, { ROCK_HOME: "/srv", ROCK_CONSUL_SERVER: "http://consul:8500" });
    expect(home.dataDir, "ROCK_HOME is the data folder without ROCK_DATA_DIR").to.equal("/srv");
    expect(home.warnings).to.have.length(2);
    expect(loadConfig(undefined, { ROCK_HOME: "/srv", ROCK_DATA_DIR: "/data" }).dataDir).to.equal("/data");
    expect(() => loadConfig(undefined, { ROCK_OPAL_SERVER: "opal:8080" })).to.throw(
      /^opal\.server \(ROCK_OPAL_SERVER\): expected an http\(s\):\/\/ URL, not 'opal:8080'$/,
    );
    expect(() => loadConfig(undefined, { ROCK_PEERS: "node1=http://a:1,node1x" })).to.throw(
      /^cluster.peers: expected id=http\(s\):\/\/host:port entries, not 'node1x'$/,
    );
    expect(() => loadConfig(undefined, { ROCK_PEERS: "node1=http://a:1", ROCK_CATALOG_NODE: "node9" })).to.throw(
      /^cluster.catalogNode: 'node9' is not among cluster.peers$/,
    );
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(file, "port: 9000\n");
    expect(loadConfig(undefined, { ROCK_CONFIG: file }).port).to.equal(9000);
    expect(loadConfig(file, { ROCK_CONFIG: "/nonexistent.yaml" }).port, "--config wins").to.equal(9000);
    fs.writeFileSync(file, "port: true\n");
    expect(() => loadConfig(file, {})).to.throw(/port: expected a number/);
  });

  it("keeps r.spareSessions session processes ahead by default, set by file or ROCK_R_SPARE_SESSIONS; refuses what is not a count", () => {
    expect(loadConfig(undefined, {}).r.spareSessions).to.equal(8);
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(file, "r:\n  spareSessions: 0\n");
    expect(loadConfig(file, {}).r.spareSessions).to.equal(0);
    expect(loadConfig(file, { ROCK_R_SPARE_SESSIONS: "8" }).r.spareSessions).to.equal(8);
    expect(() => loadConfig(undefined, { ROCK_R_SPARE_SESSIONS: "many" })).to.throw(
      /^r\.spareSessions \(ROCK_R_SPARE_SESSIONS\): expected a number, not 'many'$/,
    );
    for (const bad of ["-1", "1.5", "101"]) {
      expect(() => loadConfig(undefined, { ROCK_R_SPARE_SESSIONS: bad }), bad).to.throw(
        /^r\.spareSessions \(ROCK_R_SPARE_SESSIONS\): expected an integer from 0 to 100, not /,
      );
    }
    fs.writeFileSync(file, "r:\n  spareSessions: lots\n");
    expect(() => loadConfig(file, {})).to.throw(/r\.spareSessions: expected a number/);
  });

  it("reads r.sessionUids as a range once, refusing what is not one, naming the key and where it was written", () => {
    expect(loadConfig(undefined, {}).r.sessionUids).to.deep.equal({ first: 70000, last: 70999 });
    expect(loadConfig(undefined, { ROCK_R_SESSION_UIDS: " 100 - 199 " }).r.sessionUids).to.deep.equal({ first: 100, last: 199 });
    for (const bad of ["0-10", "20-10", "100", "100-4294967295", "a-b"]) {
      expect(() => loadConfig(undefined, { ROCK_R_SESSION_UIDS: bad }), bad).to.throw(
        /^r\.sessionUids \(ROCK_R_SESSION_UIDS\): expected 'first-last' with 0 < first <= last, not '/,
      );
    }
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(file, "r:\n  sessionUids: 500-400\n");
    expect(() => loadConfig(file, {})).to.throw(`${file}: r.sessionUids: expected 'first-last' with 0 < first <= last, not '500-400'`);
    fs.writeFileSync(file, "r:\n  sessionUids: 500-599\n");
    expect(loadConfig(file, {}).r.sessionUids).to.deep.equal({ first: 500, last: 599 });
  });

  it("takes r.sessionFilesystem minimal by default, host from the file or ROCK_R_SESSION_FILESYSTEM, and nothing else", () => {
    expect(loadConfig(undefined, {}).r.sessionFilesystem).to.equal("minimal");
    expect(loadConfig(undefined, { ROCK_R_SESSION_FILESYSTEM: "host" }).r.sessionFilesystem).to.equal("host");
    const file = path.join(dir, "rock.yaml");
    fs.writeFileSync(file, "r:\n  sessionFilesystem: host\n");
    expect(loadConfig(file, {}).r.sessionFilesystem).to.equal("host");
    expect(loadConfig(file, { ROCK_R_SESSION_FILESYSTEM: "minimal" }).r.sessionFilesystem, "the environment over the file").to.equal(
      "minimal",
    );
    expect(() => loadConfig(undefined, { ROCK_R_SESSION_FILESYSTEM: "none" })).to.throw(
      /^r\.sessionFilesystem \(ROCK_R_SESSION_FILESYSTEM\): expected minimal or host, not 'none'$/,
    );
    fs.writeFileSync(file, "r:\n  sessionFilesystem: [host]\n");
    expect(() => loadConfig(file, {})).to.throw(`${file}: r.sessionFilesystem: expected minimal or host, not a list`);
    fs.writeFileSync(file, "r:\n  sessionFilesystem: none\n");
    expect(() => loadConfig(file, { ROCK_R_SESSION_FILESYSTEM: "host" }), "a variable does not hide what the file got wrong").to.throw(
      `${file}: r.sessionFilesystem: expected minimal or host, not 'none'`,
    );
  });

  it("refuses a secret with a prefix it cannot check, naming the user", () => {
    const file = path.join(dir, "rock.yaml");
    for (const [secret, message] of [
      ["{SSHA}abc", /unsupported secret prefix '\{SSHA\}'; supported: \{bcrypt\}, \{pbkdf2\}, \{scrypt\}, \{noop\}/],
      ["{bcrypt}plain", /\{bcrypt\} must be followed by a bcrypt hash/],
      ["{pbkdf2}abcd", /\{pbkdf2\} must be followed by/],
      ["{scrypt}$e0801$AAAA", /\{scrypt\} must be followed by/],
    ] as const) {
      fs.writeFileSync(file, `users:\n  - {name: ann, secret: '${secret}', roles: [user]}\n`);
      expect(() => loadConfig(file, {}), secret).to.throw(message);
      expect(() => loadConfig(file, {}), secret).to.throw(/user 'ann'/);
    }
    expect(loadConfig(undefined, { ROCK_USERS: "a:{noop}{x}y:user;b:{x:user" }).users.map((u) => u.secret)).to.deep.equal([
      "{noop}{x}y",
      "{x",
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
    expect(await new UserDirectory(again).authenticate("administrator", `${password}x`)).to.equal(undefined);
  });

  it("uses configured users as they are", async () => {
    const configured = [{ name: "x", secret: "y", roles: ["user"] }];
    expect(await bootstrapUsers(configured, dir, () => expect.fail("nothing to announce"))).to.equal(configured);
    expect(fs.existsSync(path.join(dir, "users.generated.yaml"))).to.equal(false);
  });
});
