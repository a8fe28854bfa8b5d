import { expect } from "chai";
import { parsePathTemplate } from "../../src/transport/protocols/rest/path-template.js";
import { MethodsAllowed, RouteTrie, type Binding } from "../../src/transport/router/route-trie.js";

/** `GET /a/{x}` → a binding. */
function bound(line: string): Binding {
  const [httpMethod, source] = line.split(" ") as [string, string];
  return { httpMethod, template: parsePathTemplate(source) };
}

/** What a request finds: the binding's line, the methods of a 405, or undefined. */
function lookup(trie: RouteTrie<Binding>, method: string, path: string): string | readonly string[] | undefined {
  const found = trie.find(method, path.split("/").slice(1));
  if (found instanceof MethodsAllowed) return found.methods;
  return found && `${found.httpMethod} ${found.template.source}`;
}

describe("REST route trie", () => {
  it("tries a literal before a variable before `**` at each segment, going back when a branch ends nowhere", () => {
    const trie = new RouteTrie(["GET /a/{x}/c", "GET /a/b/{y}", "GET /a/{rest=**}", "GET /a/b/d/e"].map(bound));
    // The literal `b` wins at the second segment, though the other template has more literals.
    expect(lookup(trie, "GET", "/a/b/c")).to.equal("GET /a/b/{y}");
    expect(lookup(trie, "GET", "/a/q/c")).to.equal("GET /a/{x}/c");
    // The literal `d` leads only to a longer template: back to the variable beside it, then to `**`.
    expect(lookup(trie, "GET", "/a/b/d")).to.equal("GET /a/b/{y}");
    expect(lookup(trie, "GET", "/a/b/d/f")).to.equal("GET /a/{rest=**}");
    expect(lookup(trie, "GET", "/a/b/d/e")).to.equal("GET /a/b/d/e");
    expect(lookup(trie, "GET", "/a/b")).to.equal("GET /a/{rest=**}");
  });

  it("takes a variable for one non-empty segment and `**` for one segment or more", () => {
    const trie = new RouteTrie(["GET /a/{x}/c", "GET /b/{rest=**}"].map(bound));
    expect(lookup(trie, "GET", "/a//c")).to.equal(undefined);
    expect(lookup(trie, "GET", "/a/x/c/")).to.equal(undefined);
    expect(lookup(trie, "GET", "/b")).to.equal(undefined);
    expect(lookup(trie, "GET", "/b/")).to.equal("GET /b/{rest=**}");
    expect(lookup(trie, "GET", "/b/x/y/z")).to.equal("GET /b/{rest=**}");
  });

  it("finds, in the same walk, the methods a path takes when none is the request's: every branch's, once each", () => {
    const trie = new RouteTrie(["GET /a/b", "DELETE /a/b", "POST /a/{x}", "GET /a/{x}", "PUT /a/{rest=**}"].map(bound));
    expect(lookup(trie, "PATCH", "/a/b")).to.deep.equal(["GET", "DELETE", "POST", "PUT"]);
    expect(lookup(trie, "PATCH", "/a/z")).to.deep.equal(["POST", "GET", "PUT"]);
    expect(lookup(trie, "POST", "/a/b")).to.equal("POST /a/{x}");
    expect(lookup(trie, "PATCH", "/c")).to.equal(undefined);
  });

  it("refuses, when built, two bindings of one method that take the same paths, naming both", () => {
    expect(() => new RouteTrie(["GET /a/{x}", "GET /a/{y=*}"].map(bound))).to.throw("GET /a/{y=*} takes the same paths as GET /a/{x}");
    expect(() => new RouteTrie(["PUT /a/{x}/{p=**}", "PUT /a/{y}/{q=**}"].map(bound))).to.throw(
      "PUT /a/{y}/{q=**} takes the same paths as PUT /a/{x}/{p=**}",
    );
    expect(() => new RouteTrie(["GET /a/{x}", "POST /a/{y}", "GET /a/b", "GET /a/{x}/{y=**}"].map(bound))).to.not.throw();
  });

  it("refuses a template whose `**` is not its last segment", () => {
    expect(() => parsePathTemplate("/a/{x=**}/b")).to.throw("'**' must be the last segment");
  });
});
