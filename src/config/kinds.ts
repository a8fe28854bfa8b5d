import path from "node:path";
import type { UidRange } from "./config.js";
import type { Kind } from "./setting.js";

/** A file's value in a message: a scalar as written, a list or a mapping by what it is. */
function written(value: unknown): string {
  if (Array.isArray(value)) return "a list";
  return typeof value === "object" && value !== null ? "a mapping" : `'${String(value)}'`;
}

function refuse(where: string, expected: string, value: unknown): never {
  throw new Error(`${where}: expected ${expected}, not ${written(value)}`);
}

/** Read from text; the file's scalars are read as their text (YAML makes `id: 7` a number, `port: '80'` a string). */
function scalar<T>(expected: string, fromText: (text: string, where: string) => T, show: (value: T) => string): Kind<T> {
  return {
    fromText,
    fromFile: (value, where) =>
      typeof value === "string" || typeof value === "number" || typeof value === "boolean"
        ? fromText(String(value), where)
        : refuse(where, expected, value),
    show,
  };
}

/** A kind whose values must also pass `check`, which throws naming `where`. */
export function checked<T>(kind: Kind<T>, check: (value: T, where: string) => void): Kind<T> {
  const pass = (value: T, where: string): T => {
    check(value, where);
    return value;
  };
  return {
    ...kind,
    fromText: (text, where) => pass(kind.fromText(text, where), where),
    fromFile: (value, where) => pass(kind.fromFile(value, where), where),
  };
}

const quoted = (text: string): string => (text === "" ? "empty" : `\`${text}\``);

export const text: Kind<string> = scalar("a string", (t) => t, quoted);

/** Unset by default: who reads it falls back on another setting. */
export const optionalText: Kind<string | undefined> = scalar<string | undefined>(
  "a string",
  (t) => t,
  (v) => (v === undefined ? "unset" : quoted(v)),
);

/** Made absolute against the working folder, as given on the command line. */
export const absolutePath: Kind<string> = scalar("a path", (t) => path.resolve(t), quoted);

/** Empty means unset and stays empty; anything else is made absolute. */
export const optionalPath: Kind<string> = scalar("a path", (t) => (t === "" ? "" : path.resolve(t)), quoted);

export const number: Kind<number> = scalar(
  "a number",
  // Number("") is 0, which nobody meant.
  (t, where) => {
    const n = t.trim() === "" ? NaN : Number(t);
    return Number.isFinite(n) ? n : refuse(where, "a number", t);
  },
  String,
);

export function integer(min: number, max: number): Kind<number> {
  return checked(number, (n, where) => {
    if (!(Number.isInteger(n) && n >= min && n <= max)) refuse(where, `an integer from ${min} to ${max}`, n);
  });
}

/** A bound that cannot be turned off (a connection must always end, a retry must wait). */
export const seconds: Kind<number> = checked(number, (n, where) => {
  if (!(n > 0)) refuse(where, "a number of seconds > 0", n);
});

const MIB = 2 ** 20;

/** A number of bytes, said in the README with its unit. */
export const bytes: Kind<number> = {
  ...number,
  show: (n) => (n % (1024 * MIB) === 0 ? `${n} (${n / (1024 * MIB)} GiB)` : n % MIB === 0 ? `${n} (${n / MIB} MiB)` : String(n)),
};

export const boolean: Kind<boolean> = {
  fromText: (t, where) => (/^(true|1|yes)$/i.test(t) ? true : /^(false|0|no)$/i.test(t) ? false : refuse(where, "true or false", t)),
  // YAML writes true and false; the environment's 1 and yes are not taken from a file.
  fromFile: (value, where) =>
    typeof value === "boolean"
      ? value
      : typeof value === "string" && /^(true|false)$/i.test(value)
        ? value.toLowerCase() === "true"
        : refuse(where, "true or false", value),
  show: String,
};

export function oneOf<const V extends string>(...values: readonly V[]): Kind<V> {
  const expected = values.length === 2 ? `${values[0]} or ${values[1]}` : `one of ${values.join(", ")}`;
  return scalar(expected, (t, where) => values.find((v) => v === t) ?? refuse(where, expected, t), quoted);
}

/** A list in the file, items separated by commas in a variable; `each` checks an item, throwing naming `where`. */
export function list(form: string, each: (item: string, where: string) => void = () => {}): Kind<readonly string[]> {
  const items = (found: string[], where: string): readonly string[] => {
    for (const item of found) each(item, where);
    return found;
  };
  return {
    fromText: (t, where) =>
      items(
        t
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
        where,
      ),
    fromFile: (value, where) => {
      if (!Array.isArray(value)) return refuse(where, "a list", value);
      const found: unknown[] = value;
      return items(
        found.map((item) =>
          typeof item === "string" || typeof item === "number" || typeof item === "boolean"
            ? String(item)
            : refuse(where, "a list of strings", item),
        ),
        where,
      );
    },
    show: (v) => (v.length === 0 ? "none" : v.map(quoted).join(", ")),
    form,
  };
}

/** `first-last`, both unprivileged uids (> 0, < 2^32 - 1), first <= last. */
export const uidRange: Kind<UidRange> = scalar(
  "first-last",
  (t, where) => {
    const match = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(t);
    const first = Number(match?.[1]);
    const last = Number(match?.[2]);
    if (!match || first < 1 || last < first || last >= 2 ** 32 - 1)
      throw new Error(`${where}: expected 'first-last' with 0 < first <= last, not '${t}'`);
    return { first, last };
  },
  (r) => quoted(`${r.first}-${r.last}`),
);

/** Empty, or the base URL of a service this node calls. */
export const httpUrl: Kind<string> = checked(text, (url, where) => {
  if (url !== "" && !/^https?:\/\/[^/]/.test(url)) refuse(where, "an http(s):// URL", url);
});
