import { expect } from "chai";
import { rest } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";

/** As many sessions as Opal's one account holds for a busy site's users at once. */
const SESSIONS = 50;

describe("sessions of one account (Opal's service account, Armadillo's administrator)", function () {
  this.timeout(180_000);
  let server: TestServer;

  // The default limits (r.maxSessions, r.maxSessionsPerUser, r.spareSessions, a range of 100 uids):
  // only R's start is asked for.
  before(async () => (server = await startTestServer({ r: { startOnBoot: true } })));
  after(() => server?.stop());

  it(`opens ${SESSIONS} at once with the default limits, each evaluating in a process of its own, then closes them`, async () => {
    const created = await Promise.all(Array.from({ length: SESSIONS }, () => rest(server.url, "POST", "/r/sessions", { user: "user" })));
    expect(
      created.map((res) => res.status),
      created.find((res) => res.status !== 201)?.text,
    ).to.deep.equal(Array(SESSIONS).fill(201));
    const ids = created.map((res) => res.json<{ id: string }>().id);

    const evaluated = await Promise.all(
      ids.map((id) =>
        rest(server.url, "POST", `/r/session/${id}/_eval`, {
          user: "user",
          body: "Sys.getpid()",
          headers: { "content-type": "application/x-rscript" },
        }),
      ),
    );
    expect(evaluated.map((res) => res.status)).to.deep.equal(Array(SESSIONS).fill(200));
    expect(new Set(evaluated.map((res) => res.text)).size, "one R process per session").to.equal(SESSIONS);

    const listed = await rest(server.url, "GET", "/r/sessions", { user: "user" });
    expect(listed.json<{ id: string }[]>().map((s) => s.id)).to.have.members(ids);

    const deleted = await Promise.all(ids.map((id) => rest(server.url, "DELETE", `/r/session/${id}`, { user: "user" })));
    expect(deleted.map((res) => res.status)).to.deep.equal(Array(SESSIONS).fill(204));
    expect((await rest(server.url, "GET", "/r/sessions", { user: "user" })).json()).to.deep.equal([]);
  });
});
