/**
 * A protoc plugin (run by `buf generate`, see buf.gen.yaml) writing the comments of the protos to
 * gen/comments/proto-comments.json, by fully-qualified name: `rock.r.v1.RService.Eval`,
 * `rock.r.v1.Session`, `rock.r.v1.Session.created_date`. The descriptors protoc-gen-es embeds in
 * gen/es drop source info, so the OpenAPI description (src/openapi) reads its texts from here.
 *
 * Option `packages=<prefix>`: only files whose package is the prefix or under it (the third-party
 * protos of .protodeps are generated too, and their comments would only weigh).
 */
import fs from "node:fs";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  CodeGeneratorRequestSchema,
  CodeGeneratorResponse_Feature,
  CodeGeneratorResponseSchema,
  type DescriptorProto,
  type EnumDescriptorProto,
  type FileDescriptorProto,
  type SourceCodeInfo_Location,
} from "@bufbuild/protobuf/wkt";

const OUTPUT = "proto-comments.json";

/** Field numbers of the descriptor messages, as source code info paths use them. */
const FILE_MESSAGE = 4;
const FILE_ENUM = 5;
const FILE_SERVICE = 6;
const MESSAGE_FIELD = 2;
const MESSAGE_NESTED = 3;
const MESSAGE_ENUM = 4;
const ENUM_VALUE = 2;
const SERVICE_METHOD = 2;

const request = fromBinary(CodeGeneratorRequestSchema, fs.readFileSync(0));
const prefix = /(?:^|,)packages=([^,]*)/.exec(request.parameter)?.[1];
if (prefix === undefined) throw new Error("protoc-gen-comments: option packages=<prefix> is required");
const wanted = new Set(request.fileToGenerate);
const comments: Record<string, string> = {};
for (const file of request.protoFile) {
  if (wanted.has(file.name) && (file.package === prefix || file.package.startsWith(`${prefix}.`))) collect(file, comments);
}
const sorted = Object.fromEntries(Object.entries(comments).sort(([a], [b]) => (a < b ? -1 : 1)));
const response = create(CodeGeneratorResponseSchema, {
  supportedFeatures: BigInt(CodeGeneratorResponse_Feature.PROTO3_OPTIONAL),
  file: [{ name: OUTPUT, content: `${JSON.stringify(sorted, null, 2)}\n` }],
});
process.stdout.write(toBinary(CodeGeneratorResponseSchema, response));

function collect(file: FileDescriptorProto, out: Record<string, string>): void {
  const byPath = new Map<string, SourceCodeInfo_Location>();
  for (const l of file.sourceCodeInfo?.location ?? []) byPath.set(l.path.join("."), l);
  // Trailing comments only where a declaration ends its line (`int32 limit = 1; // Default 1000.`):
  // after a service's or message's `{` one is the first comment of its body.
  const note = (name: string, path: readonly number[], trailing: boolean): void => {
    const l = byPath.get(path.join("."));
    const text = clean(l?.leadingComments ?? "") || (trailing ? clean(l?.trailingComments ?? "") : "");
    if (text) out[name] = text;
  };
  const enumOf = (e: EnumDescriptorProto, name: string, path: readonly number[]): void => {
    note(name, path, false);
    e.value.forEach((v, i) => {
      note(`${name}.${v.name}`, [...path, ENUM_VALUE, i], true);
    });
  };
  const messageOf = (m: DescriptorProto, name: string, path: readonly number[]): void => {
    note(name, path, false);
    m.field.forEach((f, i) => {
      note(`${name}.${f.name}`, [...path, MESSAGE_FIELD, i], true);
    });
    m.nestedType.forEach((n, i) => {
      messageOf(n, `${name}.${n.name}`, [...path, MESSAGE_NESTED, i]);
    });
    m.enumType.forEach((e, i) => {
      enumOf(e, `${name}.${e.name}`, [...path, MESSAGE_ENUM, i]);
    });
  };
  const scope = file.package ? `${file.package}.` : "";
  file.messageType.forEach((m, i) => {
    messageOf(m, scope + m.name, [FILE_MESSAGE, i]);
  });
  file.enumType.forEach((e, i) => {
    enumOf(e, scope + e.name, [FILE_ENUM, i]);
  });
  file.service.forEach((s, i) => {
    note(scope + s.name, [FILE_SERVICE, i], false);
    s.method.forEach((m, j) => {
      note(`${scope}${s.name}.${m.name}`, [FILE_SERVICE, i, SERVICE_METHOD, j], false);
    });
  });
}

/** A comment as written after `//`: the space after the marker dropped, the line breaks kept. */
function clean(comment: string): string {
  return comment
    .split("\n")
    .map((line) => (line.startsWith(" ") ? line.slice(1) : line))
    .join("\n")
    .trim();
}
