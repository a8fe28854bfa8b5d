/**
 * What one entry of the configuration table (settings.ts) is, and how the table is walked: the
 * loading, the defaults and docs/configuration.md's table all read the same entries.
 */

/** How values of one type are read and said. A value that cannot be used throws a message naming `where`. */
export interface Kind<T> {
  /** A value of the YAML (or JSON) file: a string, a number, a boolean, a list or a mapping. */
  fromFile(value: unknown, where: string): T;
  /** An environment variable's text. */
  fromText(text: string, where: string): T;
  /** For the table's default column (docs/configuration.md). */
  show(value: T): string;
  /** How a variable writes a value where it is not plain text (a list: comma-separated), for the table. */
  readonly form?: string;
}

/** A default decided when the configuration is loaded (from the host, the working folder or the checkout), said in words. */
interface Computed<T> {
  readonly computed: () => T;
  readonly shown: string;
}

interface Fixed<T> {
  readonly default: T;
  /** The default in the table where the value alone would not say what it means. */
  readonly shown?: string;
}

interface Described {
  /** This server's variable, read first. */
  readonly env?: string;
  /** Rock's variable for the same setting, read when `env` is not set (a compose file written for Rock's container starts unchanged). */
  readonly rock?: string;
  /** Other variables that change the setting, as the table says them. */
  readonly alsoSetBy?: string;
  /** Its line of the table (docs/configuration.md). */
  readonly meaning: string;
}

export type Spec<T> = (Fixed<T> | Computed<T>) & Described;

/** A value of the file, and how a message names it. */
export interface Written {
  readonly value: unknown;
  readonly where: string;
}

/** What a configuration is made from besides the defaults. */
export interface Source {
  /** The file's values by dotted key. */
  readonly file: ReadonlyMap<string, Written>;
  /** An environment variable; undefined when unset. */
  variable(name: string): string | undefined;
}

/** A setting of whatever type, as the walks below see it. */
export interface AnySetting {
  readonly spec: Described;
  readonly variables: readonly string[];
  readonly form: string | undefined;
  valueFrom(source: Source, key: string): unknown;
  shownDefault(): string;
}

/**
 * `in out`: the table's check against Config (Table below) then takes a setting's type exactly, so an
 * enumeration in the table that misses one of Config's values, or has one more, does not compile.
 */
export class Setting<in out T> implements AnySetting {
  constructor(
    private readonly kind: Kind<T>,
    readonly spec: Spec<T>,
  ) {}

  get variables(): readonly string[] {
    return [this.spec.env, this.spec.rock].filter((name) => name !== undefined);
  }

  get form(): string | undefined {
    return this.kind.form;
  }

  /**
   * A variable over the file over the default. The file's value is read even when a variable replaces
   * it: a value that cannot be used is refused wherever it is written.
   */
  valueFrom(source: Source, key: string): T {
    const written = source.file.get(key);
    const fromFile = written === undefined ? this.defaultValue() : this.kind.fromFile(written.value, written.where);
    for (const name of this.variables) {
      const text = source.variable(name);
      if (text !== undefined) return this.kind.fromText(text, `${key} (${name})`);
    }
    return fromFile;
  }

  shownDefault(): string {
    return this.spec.shown ?? this.kind.show(this.defaultValue());
  }

  private defaultValue(): T {
    return "computed" in this.spec ? this.spec.computed() : this.spec.default;
  }
}

/** A setting for every key of T, of exactly that key's type; a nested object is a nested table. */
export type Table<T> = {
  readonly [K in keyof T & string]: Setting<T[K]> | (T[K] extends readonly unknown[] ? never : T[K] extends object ? Table<T[K]> : never);
};

/** A table of whatever type, as the walks below see it. */
export interface Group {
  readonly [name: string]: AnySetting | Group;
}

export function isSetting(entry: AnySetting | Group): entry is AnySetting {
  return entry instanceof Setting;
}

/** Every setting of a group with its dotted key, in the table's order. */
export function settingsOf(group: Group, prefix = ""): Array<readonly [key: string, setting: AnySetting]> {
  return Object.entries(group).flatMap(([name, entry]) =>
    isSetting(entry) ? [[prefix + name, entry] as const] : settingsOf(entry, `${prefix}${name}.`),
  );
}

/** Every setting's value from `source`, nested as the group is. */
export function valuesOf(group: Group, source: Source, prefix = ""): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(group).map(([name, entry]) => [
      name,
      isSetting(entry) ? entry.valueFrom(source, prefix + name) : valuesOf(entry, source, `${prefix}${name}.`),
    ]),
  );
}
