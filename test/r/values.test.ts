import { expect } from "chai";
import { Fault } from "../../src/errors/fault.js";
import { create } from "@bufbuild/protobuf";
import { HttpBodySchema } from "../../gen/es/google/api/httpbody_pb.js";
import type { RSession } from "../../src/r/session/session.js";
import { caller, collect, ctxOf, rscript, startRig, text, type Rig } from "./support.js";

const CONVERT = `
conv <- function(x) {
  j <- tryCatch(jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null", digits = NA),
                error = function(e) jsonlite::serializeJSON(x))
  if (identical(as.character(j), "{}")) "null" else as.character(j)
}`;

/** What jsonlite itself gives for each expression, computed by a separate R process. */
function jsonliteOf(exprs: readonly string[]): string[] {
  const literals = exprs.map((e) => JSON.stringify(e)).join(",\n");
  const out = rscript(`${CONVERT}
exprs <- c(${literals})
for (e in exprs) cat(paste(as.character(charToRaw(enc2utf8(conv(eval(parse(text = e)))))), collapse = ""), "\\n")`);
  return out
    .trim()
    .split("\n")
    .map((line) => Buffer.from(line.trim(), "hex").toString("utf8"));
}

const SHAPES = [
  "NULL",
  "NA",
  "TRUE",
  "FALSE",
  "1L",
  "-5L",
  "NA_integer_",
  ".Machine$integer.max",
  "1",
  "-0",
  "0.1",
  "pi",
  "1e-20",
  "1e15",
  "1e300",
  "123456.789",
  "1/3",
  "2^53",
  "100000",
  "NaN",
  "Inf",
  "-Inf",
  "NA_real_",
  "'a'",
  "''",
  "'\\u00e9\\u4e2d'",
  "'a\"b\\\\c\\n\\t/'",
  "'\\001'",
  "NA_character_",
  "c(1.5, NA)",
  "1:3",
  "character(0)",
  "list(a = 1, b = 'x')",
  "data.frame(a = c(1, NA))",
  "head(mtcars, 2)",
  "1i",
  "new.env()",
  "factor('a')",
  "as.Date('2020-01-02')",
  "matrix(1:4, 2)",
  "list()",
  "c(a = 1)",
  "structure(1, class = 'foo')",
  "function(x) x",
  "as.POSIXct('2020-01-02 03:04:05', tz = 'UTC')",
  "c(TRUE, NA)",
  "list(NULL)",
  "raw(2)",
];

/** Doubles of every magnitude, written with 17 digits so both R processes parse the same value. */
function doubles(count: number): string[] {
  let seed = 42;
  const random = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const values: string[] = [];
  for (let i = 0; i < count; i++) {
    const exponent = Math.floor(random() * 60) - 30;
    const sign = random() < 0.3 ? -1 : 1;
    const value = random() < 0.3 ? Math.round(random() * 10 ** (exponent % 17)) : sign * random() * 10 ** exponent;
    values.push(value.toPrecision(17));
  }
  return values;
}

describe("R values", function () {
  this.timeout(60_000);
  let rig: Rig;
  let session: RSession;
  const user = caller("alice", "user");

  before(async () => {
    rig = await startRig();
    session = await rig.engine.createSession("alice");
  });
  after(async () => rig?.close());

  it("answers JSON byte for byte as jsonlite does, fast path included", async () => {
    const exprs = [...SHAPES, ...doubles(300)];
    const expected = jsonliteOf(exprs);
    expect(expected).to.have.length(exprs.length);
    for (let i = 0; i < exprs.length; i++) {
      const json = await session.eval(text(exprs[i]!), "json");
      expect(json.toString("utf8"), exprs[i]).to.equal(expected[i]);
    }
  });

  it("round-trips R serialization byte for byte (assign x-rdata, eval as octet-stream)", async () => {
    const base64 = rscript("cat(jsonlite::base64_enc(serialize(list(a = 1:3, b = 'x', m = head(mtcars), z = 1i), NULL)))").replace(
      /\s/g,
      "",
    );
    const body = create(HttpBodySchema, { contentType: "application/x-rdata", data: text(base64) });
    const ctx = ctxOf(user);
    await rig.handlers.assign!({ $typeName: "rock.r.v1.AssignRequest", id: session.id, symbol: "x", async: false, body }, ctx);
    const answer = await rig.handlers.eval!(
      {
        $typeName: "rock.r.v1.EvalRequest",
        id: session.id,
        async: false,
        accept: "application/octet-stream, application/json",
        script: create(HttpBodySchema, { data: text("x") }),
      },
      ctx,
    );
    expect(answer.answer?.case).to.equal("value");
    const value = answer.answer?.value as { contentType: string; data: Uint8Array };
    expect(value.contentType).to.equal("application/octet-stream");
    expect(Buffer.from(value.data).toString("base64")).to.equal(base64);
  });

  it("answers an R error as InvalidArgument with R's message", async () => {
    const error = await session.eval(text("f <- function() stop('boom'); f()"), "json").catch((e: unknown) => e);
    expect(error).to.be.instanceOf(Fault);
    expect((error as Fault).kind).to.equal("invalid");
    expect((error as Fault).message).to.equal("Error in f(): boom");
    const top = await session.eval(text("stop('top')"), "json").catch((e: unknown) => e);
    expect((top as Fault).message).to.equal("Error: top");
  });

  it("evaluates a failing script once", async () => {
    await session.eval(text("counter <- 0"), "json");
    await session.eval(text("counter <- counter + 1; stop('no')"), "json").catch(() => undefined);
    await session.eval(text("counter <- counter + 1; new.env()"), "json");
    expect((await session.eval(text("counter"), "json")).toString()).to.equal("2");
  });

  it("takes several expressions and a trailing comment, answering the last value", async () => {
    expect((await session.eval(text("a <- 1; a + 1 # the end"), "json")).toString()).to.equal("2");
    expect((await session.eval(text("b <- 2\nb * 10\n# comment\n"), "json")).toString()).to.equal("20");
  });

  it("assigns from an R expression, sync and async", async () => {
    const ctx = ctxOf(user);
    const body = create(HttpBodySchema, { contentType: "application/x-rscript", data: text("c(1, 2) # two") });
    const sync = await rig.handlers.assign!({ $typeName: "rock.r.v1.AssignRequest", id: session.id, symbol: "v", async: false, body }, ctx);
    expect(sync.command).to.equal(undefined);
    expect((await session.eval(text("v"), "json")).toString()).to.equal("[1,2]");
    const queued = await rig.handlers.assign!(
      { $typeName: "rock.r.v1.AssignRequest", id: session.id, symbol: "w", async: true, body },
      ctx,
    );
    expect(queued.command?.script).to.equal("w <- c(1, 2) # two");
    expect((await session.eval(text("w"), "json")).toString()).to.equal("[1,2]");
  });

  /** Every event of an Execute call, as the handler streams them. */
  const execute = (script: string) =>
    collect(
      rig.handlers.execute!(
        { $typeName: "rock.r.v1.ExecuteRequest", id: session.id, accept: "", script: create(HttpBodySchema, { data: text(script) }) },
        ctxOf(user),
      ),
    );

  it("keeps order and text when printed output holds control bytes", async () => {
    const events = await execute("cat('a\\001b\\n'); message('m'); cat('\\002c\\n'); 42");
    const flat = events.map((e) => {
      const event = (e as { event: { case: string; value: unknown } }).event;
      return [event.case, event.case === "json" ? (event.value as { kind: { value: unknown } }).kind.value : event.value];
    });
    expect(flat).to.deep.equal([
      ["output", "a\u0001b\n"],
      ["message", "m\n"],
      ["output", "\u0002c\n"],
      ["json", 42],
    ]);
  });

  it("streams output, messages and warnings of Execute in order, then the value", async () => {
    const events = await execute("cat('one\\n'); message('two'); warning('three'); print('four'); list(five = 5)");
    const flat = events.map((e) => {
      const event = (e as { event: { case: string; value: unknown } }).event;
      return [event.case, event.case === "json" ? JSON.stringify(event.value) : event.value];
    });
    expect(flat[0]).to.deep.equal(["output", "one\n"]);
    expect(flat[1]).to.deep.equal(["message", "two\n"]);
    expect(flat[2]).to.deep.equal(["warning", "three"]);
    expect(
      flat
        .slice(3, -1)
        .map((f) => f[1])
        .join(""),
    ).to.equal('[1] "four"\n');
    expect(flat.at(-1)?.[0]).to.equal("json");
    const last = events.at(-1) as { event: { value: { kind: { case: string } } } };
    expect(last.event.value.kind.case).to.equal("structValue");
  });

  it("reports an R error as the last Execute event", async () => {
    const events = await execute("cat('x'); stop('bad')");
    const last = events.at(-1) as { event: { case: string; value: string } };
    expect(last.event).to.deep.include({ case: "error", value: "Error: bad" });
  });
});
