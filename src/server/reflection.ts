import { toBinary, type DescFile, type FileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ServerReflection as ReflectionV1 } from "../../gen/es/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ReflectionV1Alpha } from "../../gen/es/grpc/reflection/v1alpha/reflection_pb.js";

/** The request of both reflection versions (identical shapes, different packages). */
interface ReflectionRequest {
  host: string;
  messageRequest:
    | { case: "fileByFilename"; value: string }
    | { case: "fileContainingSymbol"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: "allExtensionNumbersOfType"; value: string }
    | { case: "listServices"; value: string }
    | { case: undefined; value?: undefined };
}

const NOT_FOUND = 5;
const INVALID_ARGUMENT = 3;

/**
 * gRPC server reflection (v1 and v1alpha) over the registry of the served services, so that
 * `buf curl` and grpcurl work without a schema. Files come with their dependencies, dependencies first.
 */
export function createReflection(registry: FileRegistry, serviceNames: readonly string[]) {
  const encoded = new Map<DescFile, Uint8Array>();
  const bytesOf = (f: DescFile) => {
    let b = encoded.get(f);
    if (!b) encoded.set(f, (b = toBinary(FileDescriptorProtoSchema, f.proto)));
    return b;
  };
  const withDeps = (file: DescFile): Uint8Array[] => {
    const out: DescFile[] = [];
    const visit = (f: DescFile) => {
      if (out.includes(f)) return;
      f.dependencies.forEach(visit);
      out.push(f);
    };
    visit(file);
    return out.map(bytesOf);
  };
  const fileOfSymbol = (symbol: string): DescFile | undefined => {
    const direct = registry.get(symbol);
    if (direct) return direct.file;
    // Methods, fields and enum values are named after their parent.
    const parent = registry.get(symbol.slice(0, Math.max(0, symbol.lastIndexOf("."))));
    return parent?.file;
  };

  const answer = (req: ReflectionRequest) => {
    const base = { validHost: req.host, originalRequest: req };
    const notFound = (what: string) => ({
      ...base,
      messageResponse: { case: "errorResponse" as const, value: { errorCode: NOT_FOUND, errorMessage: `${what} not found` } },
    });
    const files = (f: DescFile | undefined, what: string) =>
      f
        ? { ...base, messageResponse: { case: "fileDescriptorResponse" as const, value: { fileDescriptorProto: withDeps(f) } } }
        : notFound(what);
    const m = req.messageRequest;
    switch (m.case) {
      case "listServices":
        return {
          ...base,
          messageResponse: { case: "listServicesResponse" as const, value: { service: serviceNames.map((name) => ({ name })) } },
        };
      case "fileByFilename":
        return files(registry.getFile(m.value), `file ${m.value}`);
      case "fileContainingSymbol":
        return files(fileOfSymbol(m.value), `symbol ${m.value}`);
      case "fileContainingExtension": {
        const msg = registry.getMessage(m.value.containingType);
        const ext = msg ? registry.getExtensionFor(msg, m.value.extensionNumber) : undefined;
        return files(ext?.file, `extension ${m.value.extensionNumber} of ${m.value.containingType}`);
      }
      case "allExtensionNumbersOfType": {
        const msg = registry.getMessage(m.value);
        if (!msg) return notFound(`type ${m.value}`);
        const numbers: number[] = [];
        for (const t of registry) if (t.kind === "extension" && t.extendee.typeName === msg.typeName) numbers.push(t.number);
        return {
          ...base,
          messageResponse: {
            case: "allExtensionNumbersResponse" as const,
            value: { baseTypeName: msg.typeName, extensionNumber: numbers },
          },
        };
      }
      default:
        return {
          ...base,
          messageResponse: { case: "errorResponse" as const, value: { errorCode: INVALID_ARGUMENT, errorMessage: "empty request" } },
        };
    }
  };

  const v1: ServiceImpl<typeof ReflectionV1> = {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield answer(req);
    },
  };
  const v1alpha: ServiceImpl<typeof ReflectionV1Alpha> = {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield answer(req);
    },
  };
  return { v1, v1alpha };
}

export { ReflectionV1, ReflectionV1Alpha };
