import { getOption, hasOption, ScalarType, type DescField, type DescMessage, type DescMethod, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { rest_answer as restAnswerOption } from "../../../../gen/es/rock/options/v1/rest_pb.js";
import { parsePathTemplate, type PathTemplate } from "./path-template.js";

/** The statuses a REST answer takes without creating anything; 201 comes only with `created`. */
export type PlainStatus = 200 | 204;
const PLAIN_STATUSES: readonly number[] = [200, 204] satisfies PlainStatus[];
const isPlain = (status: number): status is PlainStatus => PLAIN_STATUSES.includes(status);

/** A field of the response message named by a `created` variable: the message fields leading to it, then the value's field. */
interface FieldPath {
  readonly messages: readonly (DescField & { fieldKind: "message" })[];
  readonly value: DescField & { fieldKind: "scalar" };
}

export interface CreatedTemplate {
  /** Literal segments as they are, variables as the response field they read. */
  readonly segments: readonly (string | FieldPath)[];
  /** The top-level response fields the variables start from: the part of the answer that tells what was created. */
  readonly fields: readonly DescField[];
}

/** The `rest_answer` option of an RPC (proto/rock/options/v1/rest.proto), compiled at start-up. */
export interface RestAnswerRule {
  readonly status: PlainStatus;
  /** The status of an answer without a body; `status` when undefined. */
  readonly emptyStatus: PlainStatus | undefined;
  readonly created: CreatedTemplate | undefined;
}

const DEFAULT_RULE: RestAnswerRule = { status: 200, emptyStatus: undefined, created: undefined };

/** Throws, naming the RPC, when the option asks for a status the edge does not give or names a field the response lacks. */
export function compileRestAnswer(method: DescMethod): RestAnswerRule {
  if (!hasOption(method, restAnswerOption)) return DEFAULT_RULE;
  const option = getOption(method, restAnswerOption);
  const plain = (s: number): PlainStatus => {
    if (!isPlain(s)) throw new Error(`${method.name}: rest_answer status ${s} is not one of ${PLAIN_STATUSES.join(", ")}`);
    return s;
  };
  const status = option.status === 0 ? 200 : plain(option.status);
  const emptyStatus = option.emptyStatus === 0 ? undefined : plain(option.emptyStatus);
  if (status === 204 && emptyStatus !== undefined)
    throw new Error(`${method.name}: rest_answer empty_status with status 204, which never has a body`);
  const created = option.created === "" ? undefined : compileCreated(method, option.created);
  return { status, emptyStatus, created };
}

function compileCreated(method: DescMethod, source: string): CreatedTemplate {
  const where = `${method.name}: rest_answer created '${source}'`;
  let template: PathTemplate;
  try {
    template = parsePathTemplate(source);
  } catch (err) {
    throw new Error(`${where}: ${(err as Error).message}`);
  }
  const segments = template.segments.map((s) => {
    if (s.kind === "literal") return s.text;
    if (s.rest) throw new Error(`${where}: a variable is one path segment ('{${s.field}=**}' is not)`);
    return fieldPath(where, method.output, s.field);
  });
  const paths = segments.filter((s): s is FieldPath => typeof s !== "string");
  if (paths.length === 0) throw new Error(`${where}: names no response field`);
  const fields = [...new Set(paths.map((p) => p.messages[0] ?? p.value))];
  return { segments, fields };
}

function fieldPath(where: string, output: DescMessage, source: string): FieldPath {
  const names = source.split(".");
  const messages: (DescField & { fieldKind: "message" })[] = [];
  let message = output;
  const find = (name: string): DescField => {
    const field = message.fields.find((f) => f.name === name);
    if (!field) throw new Error(`${where}: ${message.typeName} has no field '${name}'`);
    return field;
  };
  for (const name of names.slice(0, -1)) {
    const field = find(name);
    if (field.fieldKind !== "message") throw new Error(`${where}: '${name}' of ${message.typeName} is not a message field`);
    messages.push(field);
    message = field.message;
  }
  const value = find(names.at(-1)!);
  if (value.fieldKind !== "scalar" || value.scalar === ScalarType.BYTES)
    throw new Error(`${where}: '${source}' is not a string or a number`);
  return { messages, value };
}

/**
 * The path of what the call created, each value percent-encoded as one segment; undefined unless
 * the response has every field the template names set and not empty.
 */
export function createdPath(template: CreatedTemplate, schema: DescMessage, msg: Message): string | undefined {
  const root = reflect(schema, msg);
  let path = "";
  for (const segment of template.segments) {
    if (typeof segment === "string") {
      path += `/${segment}`;
      continue;
    }
    const value = valueAt(root, segment);
    if (value === undefined) return undefined;
    path += `/${encodeURIComponent(value)}`;
  }
  return path;
}

function valueAt(root: ReflectMessage, path: FieldPath): string | undefined {
  let message = root;
  for (const field of path.messages) {
    if (!message.isSet(field)) return undefined;
    message = message.get(field);
  }
  if (!message.isSet(path.value)) return undefined;
  const value = String(message.get(path.value));
  return value === "" ? undefined : value;
}
