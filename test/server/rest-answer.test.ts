import { createServiceImplSpec } from "@connectrpc/connect";
import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { create, createFileRegistry, setExtension, type DescMethod, type MessageInitShape } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  MethodOptionsSchema,
} from "@bufbuild/protobuf/wkt";
import { createContextValues, type ServiceImpl } from "@connectrpc/connect";
import { file_google_api_annotations, http as httpOption } from "../../gen/es/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../gen/es/google/api/http_pb.js";
import { file_rock_options_v1_rest, rest_answer, RestAnswerSchema } from "../../gen/es/rock/options/v1/rest_pb.js";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { CallKernel } from "../../src/transport/call/call-kernel.js";
import { createRest } from "../../src/transport/protocols/rest/rest.js";
import { createConnectEs } from "../../src/transport/protocols/rpc/connect-es.js";
import { createFrontRouter } from "../../src/transport/router/front-router.js";
import { compileRestAnswer } from "../../src/transport/protocols/rest/rest-answer.js";
import { RouteTable } from "../../src/transport/protocols/rest/route-table.js";
import { registerService } from "../../src/transport/service-registry.js";
import { rest } from "../support/clients.js";

/**
 * The `rest_answer` option as the edge applies it, over plain HTTP: RService's own routes and options,
 * served by handlers written for this test, so that answers hold what the real handlers never give
 * (ids with `/` and spaces, created fields left unset).
 */
describe("REST answer option (rest_answer)", () => {
  let server: http.Server;
  let url: string;
  /** What CreateSession answers next. */
  let nextSession: { id: string } | undefined;

  const handlers: Partial<ServiceImpl<typeof RService>> = {
    createSession: () => ({ session: nextSession }),
    getSession: (req) => ({ session: { id: req.id } }),
    deleteSession: () => ({}),
    installPackage: () => ({ version: "1.0.0" }),
    // The path id comes back as the command's session: a value decoded from the path, encoded again in the Location.
    async *evalStream(req) {
      const script = Buffer.from(req.script?.data ?? []).toString();
      if (!req.async) yield { answer: { case: "chunk", value: { contentType: "application/json", data: Buffer.from("[2]") } } };
      else yield { answer: { case: "command", value: { sessionId: req.id, id: script === "no id" ? "" : "7", status: "PENDING" } } };
    },
    getCommandResult: (req) => {
      if (req.cmdId === "none") return {};
      const data = req.cmdId === "blank" ? new Uint8Array(0) : Buffer.from('"done"');
      return { result: { contentType: "application/json", data } };
    },
  };

  before(async () => {
    // Routes without a handler here answer UNIMPLEMENTED; none is called.
    const table = new RouteTable([registerService(RService, handlers as ServiceImpl<typeof RService>, { alwaysEmitImplicit: true })]);
    const shutdown = new AbortController();
    const kernel = new CallKernel({ contextValues: () => createContextValues(), shutdownSignal: shutdown.signal });
    const onInternalError = (err: unknown) => {
      throw err;
    };
    const router = createFrontRouter({
      connect: createConnectEs({ routes: () => undefined, kernel, onHandlerError: onInternalError }),
      fastUnary: undefined,
      rest: createRest({ interceptors: [], kernel, maxBodyBytes: 1 << 16, maxUploadBytes: 1 << 16, onInternalError }),
      restRoutes: table,
      resources: new Map(),
      kernel,
    });
    server = http.createServer(router.handle);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => new Promise<void>((resolve) => server.close(() => resolve())));

  const script = (text: string) => ({ body: text, headers: { "content-type": "application/x-rscript" } });

  it("answers 201 with a Location filled from the response, each value percent-encoded as one segment", async () => {
    nextSession = { id: "a b/c?d" };
    const res = await rest(url, "POST", "/r/sessions");
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`${url}/r/session/a%20b%2Fc%3Fd`);
    expect(res.json()).to.include({ id: "a b/c?d" });
  });

  it("fills a template of two fields of a oneof member, the value decoded from the request path encoded again", async () => {
    const res = await rest(url, "POST", "/r/session/s%201%2Fx/_eval?async=true", script("1"));
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`${url}/r/session/s%201%2Fx/command/7`);
    expect(res.json()).to.include({ sessionId: "s 1/x", id: "7" });
  });

  it("answers the route's status without a Location unless every field the template names is set", async () => {
    nextSession = undefined;
    const noSession = await rest(url, "POST", "/r/sessions");
    expect([noSession.status, noSession.headers.get("location"), noSession.text]).to.deep.equal([200, null, ""]);
    const emptyId = await rest(url, "POST", "/r/session/s1/_eval?async=true", script("no id"));
    expect([emptyId.status, emptyId.headers.get("location")]).to.deep.equal([200, null]);
    expect(emptyId.json()).to.include({ sessionId: "s1", id: "" });
    const otherMember = await rest(url, "POST", "/r/session/s1/_eval", script("1 + 1"));
    expect([otherMember.status, otherMember.headers.get("location"), otherMember.text]).to.deep.equal([200, null, "[2]"]);
  });

  it("answers empty_status when the body is empty, and the status when it is set, even to no bytes", async () => {
    const none = await rest(url, "GET", "/r/session/s1/command/none/result");
    expect([none.status, none.text, none.headers.get("content-type")]).to.deep.equal([204, "", null]);
    const done = await rest(url, "GET", "/r/session/s1/command/1/result");
    expect([done.status, done.text]).to.deep.equal([200, '"done"']);
    const blank = await rest(url, "GET", "/r/session/s1/command/blank/result");
    expect([blank.status, blank.text, blank.headers.get("content-type")]).to.deep.equal([200, "", "application/json"]);
  });

  it("answers status 204 without a body, even for a message with fields; no option: 200", async () => {
    const deleted = await rest(url, "DELETE", "/r/session/s1");
    expect([deleted.status, deleted.text]).to.deep.equal([204, ""]);
    const installed = await rest(url, "POST", "/rserver/packages?name=p");
    expect([installed.status, installed.text]).to.deep.equal([204, ""]);
    const got = await rest(url, "GET", "/r/session/s1");
    expect(got.status).to.equal(200);
    expect(got.json()).to.include({ id: "s1" });
  });

  describe("at start-up", () => {
    /** One RPC `Make` answering `Res { Thing thing; repeated string tags; }`, `Thing { string id; bytes data; }`, with the option given. */
    function methodWith(answer: MessageInitShape<typeof RestAnswerSchema>): DescMethod {
      const options = create(MethodOptionsSchema);
      setExtension(options, httpOption, create(HttpRuleSchema, { pattern: { case: "post", value: "/things" } }));
      setExtension(options, rest_answer, create(RestAnswerSchema, answer));
      const scalar = (name: string, number: number, type: FieldDescriptorProto_Type) => ({
        name,
        number,
        type,
        label: FieldDescriptorProto_Label.OPTIONAL,
        jsonName: name,
      });
      const file = create(FileDescriptorProtoSchema, {
        name: "test/things.proto",
        package: "test.v1",
        syntax: "proto3",
        dependency: ["google/api/annotations.proto", "rock/options/v1/rest.proto"],
        messageType: [
          { name: "Thing", field: [scalar("id", 1, FieldDescriptorProto_Type.STRING), scalar("data", 2, FieldDescriptorProto_Type.BYTES)] },
          { name: "MakeRequest" },
          {
            name: "MakeResponse",
            field: [
              { ...scalar("thing", 1, FieldDescriptorProto_Type.MESSAGE), typeName: ".test.v1.Thing" },
              { ...scalar("tags", 2, FieldDescriptorProto_Type.STRING), label: FieldDescriptorProto_Label.REPEATED },
            ],
          },
        ],
        service: [
          { name: "Things", method: [{ name: "Make", inputType: ".test.v1.MakeRequest", outputType: ".test.v1.MakeResponse", options }] },
        ],
      });
      const deps = new Map([
        ["google/api/annotations.proto", file_google_api_annotations],
        ["rock/options/v1/rest.proto", file_rock_options_v1_rest],
      ]);
      const registry = createFileRegistry(file, (name) => deps.get(name));
      return registry.getService("test.v1.Things")!.methods[0]!;
    }

    it("compiles a template of existing fields", () => {
      const rule = compileRestAnswer(methodWith({ created: "/things/{thing.id}" }));
      expect(rule.status).to.equal(200);
      expect(rule.created?.fields.map((f) => f.name)).to.deep.equal(["thing"]);
    });

    it("refuses to start on a template naming a field the response lacks, or no single value", () => {
      const cases: [string, RegExp][] = [
        ["/things/{thing.name}", /Make: rest_answer created '\/things\/\{thing.name\}': test.v1.Thing has no field 'name'/],
        ["/things/{nope}", /test.v1.MakeResponse has no field 'nope'/],
        ["/things/{thing}", /'thing' is not a string or a number/],
        ["/things/{thing.data}", /'thing.data' is not a string or a number/],
        ["/things/{tags.id}", /'tags' of test.v1.MakeResponse is not a message field/],
        ["/things/{thing.id=**}", /one path segment/],
        ["/things", /names no response field/],
      ];
      for (const [created, error] of cases) {
        const method = methodWith({ created });
        expect(() => compileRestAnswer(method), created).to.throw(error);
        // The route table compiles it when the server starts.
        expect(
          () =>
            new RouteTable([{ desc: method.parent, spec: createServiceImplSpec(method.parent, {}), rest: { alwaysEmitImplicit: false } }]),
          created,
        ).to.throw(error);
      }
    });

    it("refuses statuses the edge does not answer with", () => {
      expect(() => compileRestAnswer(methodWith({ status: 201 }))).to.throw(/rest_answer status 201 is not one of 200, 204/);
      expect(() => compileRestAnswer(methodWith({ emptyStatus: 404 }))).to.throw(/rest_answer status 404/);
      expect(() => compileRestAnswer(methodWith({ status: 204, emptyStatus: 200 }))).to.throw(/never has a body/);
    });
  });
});
