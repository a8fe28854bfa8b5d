import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** Whether `command` is an executable file in a folder of PATH. */
export function onPath(command: string): boolean {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // not in this folder
    }
  }
  return false;
}
