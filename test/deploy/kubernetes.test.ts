import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { ISOLATION_CAPABILITIES } from "../../src/r/confine/capabilities.js";
import { defaults, loadConfig } from "../../src/config/load.js";
import { ROOT } from "../support/main-process.js";

const DIR = join(ROOT, "deploy/kubernetes");

/** Every document of every manifest, as its file has it. */
function manifests(): Array<{ file: string; doc: Record<string, unknown> }> {
  return readdirSync(DIR)
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((d) => ({ file, doc: d.toJSON() as Record<string, unknown> })),
    );
}

/** The model of the Kubernetes API schema for each kind the manifests use (kubernetes-models validates against it). */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "apps/v1/StatefulSet": StatefulSet,
  "v1/Service": Service,
  "v1/Secret": Secret,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
};

interface Container {
  env: Array<{ name: string; value?: string }>;
  readinessProbe: { httpGet?: { path: string } };
  livenessProbe: { tcpSocket?: unknown; httpGet?: unknown };
  securityContext: { capabilities: { drop: string[]; add: string[] }; allowPrivilegeEscalation: boolean };
}

describe("deploy/kubernetes: the manifests", () => {
  it("are valid against the Kubernetes API schemas, each kind known", () => {
    const docs = manifests();
    expect(docs.map((d) => `${d.doc.apiVersion as string}/${d.doc.kind as string}`).sort()).to.deep.equal(
      [
        "apps/v1/StatefulSet",
        "networking.k8s.io/v1/NetworkPolicy",
        "policy/v1/PodDisruptionBudget",
        "v1/Secret",
        "v1/Service",
        "v1/Service",
      ].sort(),
    );
    for (const { file, doc } of docs) {
      const Model = MODELS[`${doc.apiVersion as string}/${doc.kind as string}`]!;
      expect(() => new Model(doc as never).validate(), `${file}: ${doc.kind as string}`).to.not.throw();
    }
  });

  it("would be refused by the schemas when wrong (the check can fail)", () => {
    const set = manifests().find((d) => d.doc.kind === "StatefulSet")!.doc as { spec: { replicas: unknown } };
    expect(() => new StatefulSet({ ...set, spec: { ...set.spec, replicas: "three" } } as never).validate()).to.throw();
  });

  it("close the link-local range (the cloud's metadata address) to the rock pods, DNS excepted", () => {
    const policy = manifests().find((d) => d.doc.kind === "NetworkPolicy")!.doc as {
      spec: {
        podSelector: { matchLabels: Record<string, string> };
        egress: Array<{ to: Array<{ ipBlock?: { cidr: string; except?: string[] } }> }>;
      };
    };
    const set = manifests().find((d) => d.doc.kind === "StatefulSet")!.doc as {
      spec: { template: { metadata: { labels: Record<string, string> } } };
    };
    expect(policy.spec.podSelector.matchLabels).to.deep.equal(set.spec.template.metadata.labels);
    const everywhere = policy.spec.egress.flatMap((e) => e.to).find((t) => t.ipBlock?.cidr === "0.0.0.0/0");
    expect(everywhere?.ipBlock?.except).to.deep.equal(["169.254.0.0/16"]);
  });

  describe("the StatefulSet", () => {
    const set = () =>
      manifests().find((d) => d.doc.kind === "StatefulSet")!.doc as {
        spec: {
          replicas: number;
          serviceName: string;
          template: { spec: { terminationGracePeriodSeconds: number; containers: Container[] } };
        };
      };
    const container = () => set().spec.template.spec.containers[0]!;
    const env = () => Object.fromEntries(container().env.map((e) => [e.name, e.value ?? "(from the API)"]));

    it("is ready on /_check and alive on TCP, never killed by /_check while R restarts", () => {
      expect(container().readinessProbe.httpGet?.path).to.equal("/_check");
      expect(container().livenessProbe.tcpSocket).to.not.equal(undefined);
      expect(container().livenessProbe.httpGet).to.equal(undefined);
    });

    it("has the container image's security context: the six capabilities of isolation, those of the sessions' restricted network, and nothing else", () => {
      const sc = container().securityContext;
      expect(sc.capabilities.drop).to.deep.equal(["ALL"]);
      expect([...sc.capabilities.add].sort()).to.deep.equal(
        [...ISOLATION_CAPABILITIES.map((c) => c.name), "NET_ADMIN", "SYS_ADMIN"].sort(),
      );
      expect(sc.allowPrivilegeEscalation).to.equal(false);
    });

    it("lists every replica as a peer at the headless service's names, and gives the drain its time", () => {
      const { replicas, serviceName } = set().spec;
      const peers = env().ROCK_PEERS!.split(",");
      expect(peers).to.deep.equal(Array.from({ length: replicas }, (_, i) => `rock-${i}=http://rock-${i}.${serviceName}:8085`));
      expect(env().ROCK_CATALOG_NODE).to.equal("rock-0");
      expect(set().spec.template.spec.terminationGracePeriodSeconds).to.be.greaterThan(defaults().server.drainSeconds);
    });

    it("sets only variables this server knows, with values it takes", () => {
      const values = {
        ...env(),
        ROCK_ID: "rock-1",
        ROCK_SERVER: "http://rock-1.rock-nodes.default.svc.cluster.local:8085",
        ROCK_USERS: "admin:x:administrator",
      };
      const rock = Object.fromEntries(Object.entries(values).filter(([k]) => k.startsWith("ROCK_")));
      const config = loadConfig(undefined, rock);
      expect(config.node.id).to.equal("rock-1");
      expect(config.cluster.peers).to.have.length(3);
    });
  });
});
