/**
 * A minimal gRPC client: one node:http2 session, each unary call one stream with a hand-framed
 * message (encoded with the generated protobuf-es schemas). The gRPC counterpart of the minimal QAP1
 * client; grpc-js and Connect-ES rows are measured beside it.
 */
import http2 from "node:http2";
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { basic } from "../support/server.js";

export class RawGrpcClient {
  private readonly session: http2.ClientHttp2Session;
  private readonly auth: string;

  constructor(port: number, user: string) {
    this.session = http2.connect(`http://127.0.0.1:${port}`);
    this.session.on("error", () => {});
    this.auth = basic(user);
  }

  /** One unary call; rejects unless grpc-status is 0. */
  unary<I extends DescMessage, O extends DescMessage>(
    path: string,
    input: I,
    message: MessageShape<I>,
    output: O,
  ): Promise<MessageShape<O>> {
    const body = toBinary(input, message);
    const frame = Buffer.allocUnsafe(5 + body.length);
    frame[0] = 0;
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    return new Promise((resolve, reject) => {
      const stream = this.session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
        authorization: this.auth,
      });
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let detail = "";
      const trailers = (t: http2.IncomingHttpHeaders) => {
        status = t["grpc-status"] as string | undefined;
        detail = String(t["grpc-message"] ?? "");
      };
      stream.on("response", (h) => h["grpc-status"] !== undefined && trailers(h));
      stream.on("trailers", trailers);
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", reject);
      stream.on("end", () => {
        if (status !== "0") return reject(new Error(`grpc-status ${status}: ${decodeURIComponent(detail)}`));
        const all = Buffer.concat(chunks);
        if (all.length < 5 || all[0] !== 0) return reject(new Error("no uncompressed message in the answer"));
        resolve(fromBinary(output, all.subarray(5, 5 + all.readUInt32BE(1))));
      });
      stream.end(frame);
    });
  }

  close(): void {
    this.session.close();
  }
}
