import { parseArgs } from "node:util";

/** What the command line asks for. */
export type Command =
  | { readonly kind: "serve"; readonly configFile?: string }
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "hash-password" }
  | { readonly kind: "setup"; readonly configFile?: string };

/** A command line that means nothing: said with the usage hint, exit code 2. */
export class UsageError extends Error {}

const OPTIONS = {
  config: { type: "string", short: "c" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const;

export function parseCommandLine(argv: readonly string[]): Command {
  const { values, positionals } = parse(argv);
  // Asking for help is never wrong, whatever else the line holds.
  if (values.help) return { kind: "help" };
  const [command, extra] = positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
  if (command === undefined) {
    if (values.version) return { kind: "version" };
    return values.config === undefined ? { kind: "serve" } : { kind: "serve", configFile: values.config };
  }
  if (command === "setup") {
    if (values.version) throw new UsageError("setup takes no option but --config and --help");
    return values.config === undefined ? { kind: "setup" } : { kind: "setup", configFile: values.config };
  }
  if (command !== "hash-password") throw new UsageError(`unknown command '${command}'`);
  if (values.config !== undefined || values.version) throw new UsageError("hash-password takes no option but --help");
  return { kind: "hash-password" };
}

function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(reworded(e as Error & { code?: string }));
  }
}

/** node:util's messages, in the words of this program (they name the option first, which is kept). */
function reworded(e: Error & { code?: string }): string {
  const option = /'(-[^']*)'/.exec(e.message)?.[1];
  const long = /--[a-z-]+/.exec(e.message)?.[0];
  if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && option) return `unknown option '${option}'`;
  if (e.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && long) {
    return /does not take an argument/.test(e.message) ? `option '${long}' takes no value` : `option '${long}' needs a value`;
  }
  return e.message.split("\n")[0]!;
}
