/**
 * The pages of docs/ that `npm run gen` writes, or writes a part of: each with what makes it from the
 * file as it is. check-gen.ts fails when one is stale; gen-api-doc.ts and gen-config-doc.ts write them.
 */
import fs from "node:fs";
import path from "node:path";
import { API_DOC, apiDocument } from "./api-doc.js";
import { COMMON_SETTINGS_DOC, CONFIG_DOC, withCommonSettingsTable, withConfigurationTable } from "./config-doc.js";

export interface GeneratedDoc {
  /** From the repository's root. */
  readonly file: string;
  /** What it is made from, for the message of a stale page. */
  readonly source: string;
  /** The page as `npm run gen` makes it, given the page as it is (a page of which only a part is made keeps the rest). */
  make(current: string): string;
}

export const GENERATED_DOCS: readonly GeneratedDoc[] = [
  { file: API_DOC, source: "proto/ and src/openapi/", make: () => apiDocument() },
  { file: CONFIG_DOC, source: "src/config/settings.ts", make: (current) => withConfigurationTable(current) },
  { file: COMMON_SETTINGS_DOC, source: "src/config/settings.ts", make: (current) => withCommonSettingsTable(current) },
];

/** The generated pages under `root` that are not what `npm run gen` makes, each said in one line. */
export function staleDocs(root: string): string[] {
  return GENERATED_DOCS.flatMap((doc) => {
    const file = path.join(root, doc.file);
    if (!fs.existsSync(file)) return [`missing: ${doc.file} (${doc.source})`];
    const current = fs.readFileSync(file, "utf8");
    let made: string;
    try {
      made = doc.make(current);
    } catch (error) {
      return [`${doc.file}: ${(error as Error).message}`];
    }
    return made === current ? [] : [`differs: ${doc.file} (${doc.source})`];
  });
}
