import { expect } from "chai";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { defaults } from "../../src/config/load.js";
import { UserDirectory } from "../../src/auth/users.js";
import { basic } from "../support/server.js";
import { runMain, startMain, type MainServer } from "../support/main-process.js";
import { freePort } from "../networks/server-support.js";

/**
 * Known answers, made outside this project: `{pbkdf2}` with Java's own PBKDF2WithHmacSHA1 exactly as
 * Spring Security's Pbkdf2PasswordEncoder() encodes (hex of an 8-byte salt then the 32-byte hash of
 * 185,000 iterations; Python's hashlib agrees), `{scrypt}` with Python's hashlib.scrypt (OpenSSL) in
 * the encoding of Spring's SCryptPasswordEncoder() (`$` hex(log2 N << 16 | r << 8 | p) `$` base64
 * salt `$` base64 hash; N = 16384, r = 8, p = 1, 64-byte salt).
 */
const VECTORS = {
  pbkdf2: { password: "password", secret: "{pbkdf2}0102030405060708a6e20384a37755b292cf50dfb3b04397b78941542c59b0dd6ca69be36b465087" },
  pbkdf2Unicode: {
    password: "passw\u9292rd",
    secret: "{pbkdf2}a1b2c3d4e5f60718657d6163990216fe459a5ca8f7ff8a722271227d2873ccb2f33694deecca1313",
  },
  scrypt: {
    password: "password",
    secret:
      "{scrypt}$e0801$AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==$SNjiD+Mi6ArATkQKmDWdB+boUwy1pEiiq4yCoxxJoVM=",
  },
  scryptUnicode: {
    password: "passw\u9292rd",
    secret:
      "{scrypt}$e0801$ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoOEhYaHiImKi4yNjo+QkZKTlJWWl5iZmpucnZ6foKGiow==$vUTJYgKsXcFnCgbZoNsQsDHIxLb0mzaidhPZlzzKL0k=",
  },
} as const;

async function status(url: string, path: string, user?: string, password?: string): Promise<number> {
  const res = await fetch(url + path, { headers: user ? { authorization: basic(user, password) } : {} });
  await res.arrayBuffer();
  return res.status;
}

describe("Rock's environment", function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "rock-env-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe("a server configured by Rock's variables alone", () => {
    let server: MainServer;
    let dataDir: string;
    before(async () => {
      dataDir = mkdtempSync(join(tmpdir(), "rock-env-data-"));
      server = await startMain({
        ROCK_DATA_DIR: dataDir,
        ROCK_ADMINISTRATOR_NAME: "boss",
        ROCK_ADMINISTRATOR_PASSWORD: "boss-pw",
        ROCK_MANAGER_NAME: "keeper",
        ROCK_MANAGER_PASSWORD: VECTORS.pbkdf2.secret,
        ROCK_USER_NAME: "analyst",
        ROCK_USER_PASSWORD: VECTORS.scryptUnicode.secret,
        ROCK_ID: "node-7",
        ROCK_CLUSTER: "lab",
        ROCK_TAGS: "a, b",
        ROCK_SERVER: "https://rock.example.org",
      });
    });
    after(async () => {
      await server?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("/_info shows the node: id, name (the id), cluster, tags, the public URL and the sessions' network", async () => {
      const res = await fetch(`${server.url}/_info`);
      expect(await res.json()).to.deep.equal({
        id: "node-7",
        name: "node-7",
        type: "rock",
        cluster: "lab",
        tags: ["a", "b"],
        server: "https://rock.example.org",
        sessionNetwork: "host",
      });
    });

    it("each ROCK_<ROLE>_NAME/PASSWORD pair is a user of that role, hashed secrets included", async () => {
      expect(await status(server.url, "/rserver", "boss", "boss-pw")).to.equal(200);
      expect(await status(server.url, "/rserver", "keeper", VECTORS.pbkdf2.password)).to.equal(200);
      expect(await status(server.url, "/rserver", "analyst", VECTORS.scryptUnicode.password), "a user is no manager").to.equal(403);
      expect(await status(server.url, "/r/sessions", "analyst", VECTORS.scryptUnicode.password)).to.equal(200);
      expect(await status(server.url, "/r/sessions", "keeper", VECTORS.pbkdf2.secret), "the stored form is no password").to.equal(401);
      expect(await status(server.url, "/r/sessions", "boss", "wrong")).to.equal(401);
      expect(server.stderr()).not.to.include("administrator-password");
    });
  });

  it("refuses to start (exit 1) on a value, a variable or a secret it cannot use, naming it", async function () {
    this.timeout(180_000);
    const port = String(await freePort());
    const file = join(dir, "rock.yaml");
    writeFileSync(file, "users:\n  - {name: alice, secret: '{sha256}abc', roles: [user]}\n");
    const cases: Array<[env: Record<string, string>, message: RegExp, args?: string[]]> = [
      [{ ROCK_R_START: "ture" }, /r\.startOnBoot \(ROCK_R_START\): expected true or false, not 'ture'/],
      [{ ROCK_PORT: "eighty" }, /port \(ROCK_PORT\): expected a number, not 'eighty'/],
      [{ ROCK_MAX_BODY_BYTES: "64MB" }, /limits\.maxBodyBytes \(ROCK_MAX_BODY_BYTES\): expected a number/],
      [{ ROCK_SESION_TIMEOUT: "5" }, /unknown environment variable ROCK_SESION_TIMEOUT/],
      [
        { ROCK_ADMINISTRATOR_NAME: "boss", ROCK_ADMINISTRATOR_PASSWORD: "{sha256}abc" },
        /ROCK_ADMINISTRATOR_PASSWORD \(user 'boss'\): unsupported secret prefix '\{sha256\}'/,
      ],
      [{ ROCK_USERS: "ann:{bcrypt}not-a-hash:user" }, /users \(ROCK_USERS\) \(user 'ann'\): \{bcrypt\} must be followed by a bcrypt hash/],
      [{ ROCK_ADMINISTRATOR_NAME: "boss" }, /ROCK_ADMINISTRATOR_NAME is set but ROCK_ADMINISTRATOR_PASSWORD is not/],
      [{}, /users\[0\] \(user 'alice'\): unsupported secret prefix '\{sha256\}'/, ["--config", file]],
    ];
    for (const [env, message, args] of cases) {
      const dataDir = join(dir, "data");
      const run = await runMain(args ?? [], {
        env: { ROCK_PORT: port, ROCK_HOST: "127.0.0.1", ROCK_DATA_DIR: dataDir, ROCK_R_START: "false", ...env },
        timeoutMs: 10_000,
      });
      expect(run.code, `${JSON.stringify(env)}: ${run.stderr}`).to.equal(1);
      expect(run.stderr).to.match(message);
      expect(existsSync(dataDir), "nothing is written before the configuration is whole").to.equal(false);
    }
  });

  describe("stored secrets in Spring Security's forms", () => {
    const auth = { ...defaults().auth, maxFailures: 0, hashWorkers: 1 };

    it("checks {pbkdf2} and {scrypt} against known answers, non-ASCII passwords included", async () => {
      const users = Object.entries(VECTORS).map(([name, v]) => ({ name, secret: v.secret, roles: ["user"] }));
      const directory = new UserDirectory(users, auth);
      try {
        for (const [name, v] of Object.entries(VECTORS)) {
          expect((await directory.authenticate(name, v.password))?.name, name).to.equal(name);
          expect(await directory.authenticate(name, `${v.password}x`), name).to.equal(undefined);
          expect(await directory.authenticate(name, v.secret), `${name}: its stored form`).to.equal(undefined);
        }
      } finally {
        await directory.close();
      }
    });

    it("takes Spring's {bcrypt} ($2a$) as it is", async () => {
      const hash = bcrypt.hashSync("pw", 4).replace(/^\$2b\$/, "$2a$");
      const directory = new UserDirectory([{ name: "a", secret: `{bcrypt}${hash}`, roles: [] }], auth);
      try {
        expect(await directory.authenticate("a", "pw")).not.to.equal(undefined);
        expect(await directory.authenticate("a", "pW")).to.equal(undefined);
      } finally {
        await directory.close();
      }
    });

    it("answers an {scrypt} user no faster than an unknown name (scrypt alone costs about half a bcrypt here)", async () => {
      const directory = new UserDirectory([{ name: "s", secret: VECTORS.scrypt.secret, roles: [] }], auth);
      const timed = async (name: string): Promise<number> => {
        const started = performance.now();
        await directory.authenticate(name, "wrong");
        return performance.now() - started;
      };
      try {
        const unknown: number[] = [];
        const scrypt: number[] = [];
        for (let i = 0; i < 5; i++) {
          unknown.push(await timed("nobody-here"));
          scrypt.push(await timed("s"));
        }
        const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[2]!;
        expect(median(scrypt), "without the wait it is about half").to.be.at.least(0.75 * median(unknown));
      } finally {
        await directory.close();
      }
    });
  });
});
