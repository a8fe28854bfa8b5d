import { Fault } from "../../errors/fault.js";

/**
 * Everything a caller sends is checked here, before any R process is started. The charsets are
 * deliberately narrow: values reach R through environment variables only, but remotes pastes git
 * URLs and refs into a shell command line, so they must never hold shell or option syntax either.
 */

/** R's own rule for package names (Writing R Extensions §1.1.1), dots included. */
const PACKAGE_NAME = /^[A-Za-z][A-Za-z0-9.]*[A-Za-z0-9]$/;
/** GitHub's rule for users and organisations: alphanumerics and single inner hyphens. */
const GIT_ORGANIZATION = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
/** GitHub's rule for repositories; a leading `-` or `.` is refused so it can never read as an option or a path step. */
const GIT_REPOSITORY = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/;
/** A leading `-` would be taken by `git fetch` as an option. */
const GIT_REF = /^[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}$/;

const MAX_PACKAGE_NAME = 200;

export type PackageSource = "archive" | "git" | "collection";

export const DEFAULT_GIT_REF = "master";

function invalid(message: string): Fault {
  return new Fault("invalid", message);
}

export function isValidPackageName(name: string): boolean {
  return name.length <= MAX_PACKAGE_NAME && PACKAGE_NAME.test(name);
}

export function validatePackageName(name: string): string {
  if (!isValidPackageName(name)) {
    throw invalid(`Invalid R package name: '${printable(name)}'`);
  }
  return name;
}

/** `archive` (default, alias `cran`), `git` (`g`, `github`, `gh`), `collection` (`coll`, `bioc`, `bioconductor`); case does not matter. */
export function parseSource(manager: string): PackageSource {
  switch (manager.trim().toLowerCase()) {
    case "":
    case "archive":
    case "cran":
      return "archive";
    case "git":
    case "g":
    // What the reference server and rockr's documentation also call it.
    case "github":
    case "gh":
      return "git";
    case "collection":
    case "coll":
    case "bioc":
    case "bioconductor":
      return "collection";
    default:
      throw invalid(
        `Unknown package manager: '${printable(manager)}' (expected archive, cran, git, g, github, gh, collection, coll, bioc or bioconductor)`,
      );
  }
}

/** Empty means the default `master`. */
export function validateGitRef(ref: string): string {
  if (ref === "") return DEFAULT_GIT_REF;
  if (!GIT_REF.test(ref) || ref.includes("..") || ref.includes("//") || ref.endsWith("/") || ref.endsWith(".")) {
    throw invalid(`Invalid git reference: '${printable(ref)}'`);
  }
  return ref;
}

export interface GitRepository {
  readonly organization: string;
  readonly repository: string;
}

/** `org/repo`, or a bare package name that lives in the default organisation. */
export function parseGitName(name: string, defaultOrganization: string): GitRepository {
  const parts = name.split("/");
  if (parts.length === 1) {
    validatePackageName(name);
    if (!GIT_ORGANIZATION.test(defaultOrganization)) {
      // A server misconfiguration, not the caller's fault.
      throw new Fault("precondition", `The default git organisation is not configured or not valid: '${printable(defaultOrganization)}'`);
    }
    return { organization: defaultOrganization, repository: name };
  }
  const [organization, repository] = parts;
  if (parts.length !== 2 || !GIT_ORGANIZATION.test(organization) || !GIT_REPOSITORY.test(repository) || repository.includes("..")) {
    throw invalid(`Invalid git repository name: '${printable(name)}' (expected <organisation>/<repository> or a package name)`);
  }
  return { organization, repository };
}

/** Several names, repeated and/or comma separated; at least one. */
export function parsePackageNames(values: readonly string[]): string[] {
  const names = values
    .flatMap((value) => value.split(","))
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (names.length === 0) throw invalid("At least one package name is required");
  for (const name of names) validatePackageName(name);
  return [...new Set(names)];
}

/** Error messages echo the caller's input; keep them one short readable line. */
function printable(value: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
  const flat = value.replace(/[\u0000-\u001f\u007f]/g, "?");
  return flat.length > 80 ? `${flat.slice(0, 80)}…` : flat;
}
