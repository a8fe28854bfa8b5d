#!/usr/bin/env node
// `npx rock-ts` (package.json "bin") and a service manager's ExecStart: the same program as `npm start`,
// with tsx registered in this process, since the sources are TypeScript run as they are.
import { register } from "tsx/esm/api";

register();
await import("../main.ts");
