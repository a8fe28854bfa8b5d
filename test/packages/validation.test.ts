import { expect } from "chai";
import { Fault, type FaultKind } from "../../src/errors/fault.js";
import {
  gitTarget,
  parseGitName,
  parsePackageNames,
  parseSource,
  validateGitRef,
  validatePackageName,
} from "../../src/r/packages/index.js";
import { negotiate } from "../../src/r/service/negotiate.js";

function kindOf(fn: () => unknown): FaultKind | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof Fault) return e.kind;
    throw e;
  }
  return undefined;
}

describe("package validation", () => {
  it("accepts R package names and refuses anything else", () => {
    for (const name of ["dsBase", "data.table", "R6", "a1"]) expect(validatePackageName(name)).to.equal(name);
    for (const name of ["", "a", "1abc", ".hidden", "ab.", "a_b", "a-b", "a b", "a'b", "a;b", "a/b", "ä1", "x\ny", "a".repeat(201)]) {
      expect(
        kindOf(() => validatePackageName(name)),
        JSON.stringify(name),
      ).to.equal("invalid");
    }
  });

  it("maps managers and their aliases, refusing unknown ones", () => {
    expect(["", "archive", "cran", "CRAN"].map(parseSource)).to.deep.equal(["archive", "archive", "archive", "archive"]);
    expect(["git", "g", "Git", "github", "gh"].map(parseSource)).to.deep.equal(["git", "git", "git", "git", "git"]);
    expect(["collection", "coll", "bioc", "Bioconductor"].map(parseSource)).to.deep.equal([
      "collection",
      "collection",
      "collection",
      "collection",
    ]);
    for (const manager of ["pip", "archive;", "gitlab", "cran2"]) {
      expect(
        kindOf(() => parseSource(manager)),
        manager,
      ).to.equal("invalid");
    }
  });

  it("defaults the git ref to master and refuses refs that git or a shell could misread", () => {
    expect(validateGitRef("")).to.equal("master");
    for (const ref of ["master", "v2", "release/1.2", "6.3.0-dev", "a1b2c3d4e5", "feature_x"]) {
      expect(validateGitRef(ref)).to.equal(ref);
    }
    for (const ref of [
      "..",
      "a..b",
      "-x",
      "--upload-pack=evil",
      "/abs",
      "a/",
      "a//b",
      "a.",
      "a b",
      "a;b",
      "$(id)",
      "a@{1}",
      "a~1",
      "a^",
      "a:b",
    ]) {
      expect(
        kindOf(() => validateGitRef(ref)),
        ref,
      ).to.equal("invalid");
    }
  });

  it("reads org/repo git names and puts bare names in the default organisation", () => {
    expect(parseGitName("dsBase", "datashield")).to.deep.equal({ organization: "datashield", repository: "dsBase" });
    expect(parseGitName("obiba/resourcer", "datashield")).to.deep.equal({ organization: "obiba", repository: "resourcer" });
    expect(parseGitName("my-org/my_repo.r", "x")).to.deep.equal({ organization: "my-org", repository: "my_repo.r" });
    for (const name of [
      "a/b/c",
      "/repo",
      "org/",
      "-org/repo",
      "org-/repo",
      "org/-repo",
      "org/..",
      "org/.git",
      "org/a..b",
      "org/a b",
      "org/r;m",
      "bad_name",
    ]) {
      expect(
        kindOf(() => parseGitName(name, "datashield")),
        name,
      ).to.equal("invalid");
    }
    expect(kindOf(() => parseGitName("dsBase", ""))).to.equal("precondition");
  });

  it("splits repeated and comma separated names, validating each", () => {
    expect(parsePackageNames(["a1, b2", "c3", "a1"])).to.deep.equal(["a1", "b2", "c3"]);
    expect(kindOf(() => parsePackageNames([]))).to.equal("invalid");
    expect(kindOf(() => parsePackageNames([" , "]))).to.equal("invalid");
    expect(kindOf(() => parsePackageNames(["ok1,not ok"]))).to.equal("invalid");
  });

  it("routes GitHub-like hosts to install_github and other git hosts to install_git", () => {
    const repo = { organization: "org", repository: "pkg" };
    expect(gitTarget("", repo)).to.deep.equal({ mode: "github", api: "api.github.com" });
    expect(gitTarget("https://github.com/", repo)).to.deep.equal({ mode: "github", api: "api.github.com" });
    expect(gitTarget("https://api.github.com", repo)).to.deep.equal({ mode: "github", api: "api.github.com" });
    expect(gitTarget("https://git.example.org", repo)).to.deep.equal({ mode: "github", api: "git.example.org/api/v3" });
    expect(gitTarget("https://git.example.org/api/v3", repo)).to.deep.equal({ mode: "github", api: "git.example.org/api/v3" });
    expect(gitTarget("file:///srv/git/", repo)).to.deep.equal({ mode: "git", url: "file:///srv/git/org/pkg" });
    expect(gitTarget("/srv/git", repo)).to.deep.equal({ mode: "git", url: "file:///srv/git/org/pkg" });
    expect(gitTarget("ssh://git@host/x", repo)).to.deep.equal({ mode: "git", url: "ssh://git@host/x/org/pkg" });
    expect(kindOf(() => gitTarget("relative/dir", repo))).to.equal("precondition");
  });

  it("answers R serialization only when application/octet-stream comes first", () => {
    expect(negotiate("application/octet-stream")).to.equal("rds");
    expect(negotiate("Application/Octet-Stream; q=1, application/json")).to.equal("rds");
    expect(negotiate("application/json, application/octet-stream")).to.equal("json");
    expect(negotiate("*/*")).to.equal("json");
    expect(negotiate("")).to.equal("json");
  });
});
