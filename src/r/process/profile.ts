import { stat } from "node:fs/promises";

/**
 * The R profile (r.profile) runs as the service's user, root when sessions are isolated: a file that
 * someone else could rewrite would run their code with those rights. Checked at every start of the R
 * server, which reads the file again each time.
 */
export async function assertTrustedProfile(file: string): Promise<void> {
  const info = await stat(file).catch((e: NodeJS.ErrnoException) => {
    throw new Error(`r.profile ${file} cannot be read: ${e.code ?? e.message}`);
  });
  if (!info.isFile()) throw new Error(`r.profile ${file} is not a file`);
  const me = process.getuid?.();
  if (me !== undefined && info.uid !== me && info.uid !== 0) {
    throw new Error(
      `r.profile ${file} belongs to uid ${info.uid}, not to the service's user or root: whoever owns it could run code as the service`,
    );
  }
  const mode = info.mode & 0o777;
  if ((mode & 0o022) !== 0) {
    throw new Error(`r.profile ${file} is writable by other users (mode ${mode.toString(8).padStart(4, "0")}): chmod go-w ${file}`);
  }
}
