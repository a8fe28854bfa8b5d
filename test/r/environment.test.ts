import { expect } from "chai";
import { execa } from "execa";
import { sessionEnvironment } from "../../src/r/confine/environment.js";

describe("the environment R processes get", () => {
  it("has a UTF-8 locale when the service's environment sets none, and keeps one that is set", () => {
    expect(sessionEnvironment({ PATH: "/usr/bin" })).to.deep.equal({ PATH: "/usr/bin", LANG: "C.UTF-8" });
    expect(sessionEnvironment({ PATH: "/usr/bin", LANG: "de_DE.UTF-8" })).to.deep.equal({ PATH: "/usr/bin", LANG: "de_DE.UTF-8" });
    expect(sessionEnvironment({ LC_ALL: "C" })).to.deep.equal({ LC_ALL: "C" });
    expect(sessionEnvironment({ SECRET: "x", ROCK_USERS: "a:b:c" })).to.deep.equal({ LANG: "C.UTF-8" });
  });

  it("lets R print non-ASCII text as itself in that locale, where the C locale escapes it", async () => {
    const env = (extra: Record<string, string>) => ({ PATH: process.env.PATH ?? "/usr/bin", ...extra });
    const script = ["--vanilla", "--slave", "-e", "cat(sprintf('%s', '\\u00e9'))"];
    const utf8 = await execa("R", script, { env: sessionEnvironment({ PATH: process.env.PATH }), extendEnv: false });
    expect(utf8.stdout).to.equal("é");
    const c = await execa("R", script, { env: env({ LC_ALL: "C" }), extendEnv: false });
    expect(c.stdout).to.not.equal("é");
  });
});
