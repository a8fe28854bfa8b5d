import type { DescField, DescMessage, DescMethod } from "@bufbuild/protobuf";
import generated from "../../gen/comments/proto-comments.json" with { type: "json" };

/** The protos' comments by fully-qualified name, as `npm run gen` extracts them (test/tools/protoc-gen-comments.ts). */
const COMMENTS: Readonly<Record<string, string | undefined>> = generated;

/** The comment written above an RPC, a message or a field in proto/ (a field's may follow it on its line). */
export function commentOf(desc: DescMethod | DescMessage | DescField): string | undefined {
  switch (desc.kind) {
    case "rpc":
      return COMMENTS[`${desc.parent.typeName}.${desc.name}`];
    case "message":
      return COMMENTS[desc.typeName];
    case "field":
      return COMMENTS[`${desc.parent.typeName}.${desc.name}`];
  }
}
