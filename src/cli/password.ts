const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A password from stdin: all of it when piped (one trailing newline dropped, as `echo` and heredocs
 * add one), else typed at the terminal twice, without echo. Throws with a message for the person.
 */
export async function readPassword(stdin: NodeJS.ReadStream, prompt: NodeJS.WritableStream): Promise<string> {
  if (!stdin.isTTY) return piped(stdin);
  const first = await typed(stdin, prompt, "Password: ");
  const again = await typed(stdin, prompt, "Same password again: ");
  if (first !== again) throw new Error("the two passwords differ");
  return first;
}

async function piped(stdin: NodeJS.ReadStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Uint8Array));
  let text: string;
  try {
    text = UTF8.decode(Buffer.concat(chunks));
  } catch {
    throw new Error("stdin is not UTF-8 text");
  }
  const password = text.replace(/\r?\n$/, "");
  if (/[\r\n]/.test(password)) throw new Error("expected the password on one line of stdin");
  return password;
}

/** One line typed in raw mode, so that nothing is echoed; Backspace edits, Ctrl-C and Ctrl-D give up. */
function typed(stdin: NodeJS.ReadStream, prompt: NodeJS.WritableStream, question: string): Promise<string> {
  // Raw before the question: keys typed as soon as it shows must not be echoed.
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  prompt.write(question);
  return new Promise((resolve, reject) => {
    let text = "";
    const finish = (error?: Error): void => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      prompt.write("\n");
      if (error) reject(error);
      else resolve(text);
    };
    const onData = (chunk: string): void => {
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n") return finish();
        if (ch === "\u0003" || ch === "\u0004") return finish(new Error("no password given"));
        if (ch === "\u007f" || ch === "\b") text = Array.from(text).slice(0, -1).join("");
        else if (ch >= " ") text += ch;
      }
    };
    stdin.on("data", onData);
    stdin.resume();
  });
}
