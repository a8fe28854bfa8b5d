/** Writes gen/openapi.json, the description of the REST paths (run by `npm run gen` after buf). */
import fs from "node:fs";
import path from "node:path";
import { describedApiText } from "../../src/openapi/described.js";

fs.writeFileSync(path.resolve(import.meta.dirname, "../../gen/openapi.json"), describedApiText());
