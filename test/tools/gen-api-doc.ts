/** Writes docs/api.md, the reference of every RPC and REST path (run by `npm run gen` after buf). */
import fs from "node:fs";
import path from "node:path";
import { API_DOC, apiDocument } from "./api-doc.js";

const file = path.resolve(import.meta.dirname, "../..", API_DOC);
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(file, apiDocument());
