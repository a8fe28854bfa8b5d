import { expect } from "chai";
import { Base64Stream } from "../../src/r/service/base64-stream.js";

/** `text` pushed in chunks of `size` bytes, then ended: the bytes decoded, or the refusal's message. */
function decode(text: string, size: number): Buffer | string {
  const stream = new Base64Stream();
  const body = Buffer.from(text, "latin1");
  const parts: Buffer[] = [];
  try {
    for (let at = 0; at < body.length; at += size) parts.push(stream.push(body.subarray(at, at + size)));
    stream.end();
    return Buffer.concat(parts);
  } catch (error) {
    return (error as Error).message;
  }
}

/** The application/x-rdata decoder: exact bytes in, or a 400 naming what was wrong, whatever the chunks. */
describe("Base64Stream", () => {
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7919) % 256));
  const plain = bytes.toString("base64");
  const wrapped = plain.replace(/.{76}/g, "$&\r\n");

  it("decodes any cut into chunks, with or without line breaks, to the same bytes", () => {
    for (const size of [1, 2, 3, 5, 7, 64, 1000, 5000]) {
      expect(decode(plain, size), `plain, chunks of ${size}`).to.deep.equal(bytes);
      expect(decode(wrapped, size), `wrapped, chunks of ${size}`).to.deep.equal(bytes);
    }
    expect(decode("QQ==", 1)).to.deep.equal(Buffer.from("A"));
    expect(decode("QUI=\n", 3)).to.deep.equal(Buffer.from("AB"));
  });

  it("names the offset of a byte outside the alphabet, wherever it falls in a quad or a chunk", () => {
    for (const [bad, at] of [
      ["*", 0],
      ["-", 401],
      ["_", 402],
      [" ", 403],
      ["\t", 1335],
      ["\u00e9", 200],
      ["\0", 999],
    ] as const) {
      const text = plain.slice(0, at) + bad + plain.slice(at + 1);
      const code = bad.charCodeAt(0).toString(16).padStart(2, "0");
      for (const size of [1, 3, 64, 5000]) {
        expect(decode(text, size), `${JSON.stringify(bad)} at ${at}, chunks of ${size}`).to.equal(
          `The application/x-rdata body is not base64: byte 0x${code} at offset ${at}`,
        );
      }
    }
  });

  it("refuses data after padding, and a body that stops inside a quad", () => {
    expect(decode("QQ==QUJD", 64)).to.match(/data after its padding/);
    expect(decode("QQ==\nQUJD", 2)).to.match(/data after its padding/);
    expect(decode("QUJDQ", 64)).to.equal("The application/x-rdata body is not base64: it ends inside a group of 4 characters (5 bytes)");
    expect(decode("QQ======", 64)).to.be.a("string");
  });
});
