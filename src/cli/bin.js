#!/usr/bin/env node
// `npx rock-ts` (package.json "bin"), `npm start`, the container and a service manager's ExecStart:
// the compiled program (`npm install` builds it into dist/, `npm run build` again after a change).
// From a checkout whose build is missing or older than its sources it says so rather than run stale
// code: tests and development run the TypeScript itself through tsx (`npm run dev`).
import { existsSync } from "node:fs";

const main = new URL("../../dist/src/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("rock-ts: the compiled program is missing (dist/src/main.js): run `npm run build` (npm install does)\n");
  process.exit(1);
}
// Stack traces name the TypeScript sources (the build writes source maps).
process.setSourceMapsEnabled(true);
await import(main.href);
