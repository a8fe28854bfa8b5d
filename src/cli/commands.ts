import { readFileSync } from "node:fs";
import { fromRoot } from "../package-root.js";
import { hashSecret } from "../auth/secrets.js";
import type { Config } from "../config/config.js";
import { loadConfig } from "../config/load.js";
import { prepareService } from "../setup/service-prerequisites.js";
import { missingCapabilitiesMessage, missingIsolationCapabilities } from "../r/confine/capabilities.js";
import { parseCommandLine, UsageError, type Command } from "./parse.js";
import { readPassword } from "./password.js";

const USAGE = `Usage: rock-ts [--config FILE]
       rock-ts hash-password
       rock-ts setup [--config FILE]
       rock-ts --help | --version

Without a command, starts the R execution service and the draft network catalogue (gRPC, gRPC-Web,
Connect and REST on one port) and serves until SIGTERM or SIGINT.

Commands:
  hash-password      reads a password (piped on stdin, or typed twice at a prompt that does not
                     echo) and prints its stored form, {bcrypt}$2b$10$..., for a user's secret
  setup              installs what the service needs from R and R's libraries lack (jsonlite; unix
                     when sessions are isolated) into r.setupLibrary, compiling them; as root on
                     Debian, installs a C compiler with apt first when there is none (npm install
                     runs it; the start itself installs the R packages but never runs apt)

Options:
  -c, --config FILE  the YAML configuration (default: the file ROCK_CONFIG names, else none);
                     ROCK_* environment variables override it
  -h, --help         prints this help
  -v, --version      prints the version

Exit status: 0 done, 1 the server could not start or the command failed, 2 a usage error.
Every configuration key, its ROCK_* variable and its default: docs/configuration.md.
`;

export interface Streams {
  readonly stdin: NodeJS.ReadStream;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

/** Either the configuration to serve with, or the exit code of a command that is done. */
export type Outcome = { readonly kind: "serve"; readonly config: Config } | { readonly kind: "exit"; readonly code: number };

export async function runCommandLine(argv: readonly string[], io: Streams = process): Promise<Outcome> {
  const exit = (code: number): Outcome => ({ kind: "exit", code });
  const fail = (message: string): Outcome => {
    io.stderr.write(`rock-ts: ${message}\n`);
    return exit(1);
  };
  let command: Command;
  try {
    command = parseCommandLine(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr.write(`rock-ts: ${e.message}\nTry 'rock-ts --help'.\n`);
    return exit(2);
  }
  switch (command.kind) {
    case "help":
      io.stdout.write(USAGE);
      return exit(0);
    case "version":
      io.stdout.write(`${version()}\n`);
      return exit(0);
    case "hash-password": {
      let password: string;
      try {
        password = await readPassword(io.stdin, io.stderr);
      } catch (e) {
        return fail((e as Error).message);
      }
      if (password === "") return fail("the password is empty");
      io.stdout.write(`${await hashSecret(password)}\n`);
      return exit(0);
    }
    case "setup": {
      let config: Config;
      try {
        config = loadConfig(command.configFile);
        const ready = await prepareService(config, {
          systemPackages: true,
          progress: (line) => io.stderr.write(`rock-ts setup: ${line}\n`),
        });
        io.stderr.write(`rock-ts setup: R is ready (packages from ${ready.packages.repos.join(", ")})\n`);
      } catch (e) {
        return fail(`setup: ${(e as Error).message}`);
      }
      return exit(0);
    }
    case "serve": {
      let config: Config;
      try {
        config = loadConfig(command.configFile);
      } catch (e) {
        return fail(`configuration: ${(e as Error).message}`);
      }
      // Root isolates sessions (r/confine/isolation.ts): refused here when it lacks what that takes.
      const missing = process.getuid?.() === 0 ? missingIsolationCapabilities() : undefined;
      if (missing !== undefined && missing.length > 0) return fail(missingCapabilitiesMessage(missing));
      return { kind: "serve", config };
    }
  }
}

function version(): string {
  const pkg = JSON.parse(readFileSync(fromRoot("package.json"), "utf8")) as { version: string };
  return pkg.version;
}
