/**
 * The cluster's plan (components/plan/clusterPlan.ts) evaluated without Pulumi: every named value
 * resolved from fixtures of what the nodes report (a step's stdout, a node's host key) and of the
 * stack's secrets, and every step's scripts wrapped as NodeHost.command wraps them (as root, or as
 * the login user). test/unit/clusterPlan.test.ts reads the graph from it; test/mocked/graph.test.ts
 * checks that the materializer registered exactly this.
 */
import type { Config } from "../../config";
import { type ClusterPlan, type Ref, type Val, isDerived } from "../../components/plan/types";
import { remoteCommand, rootAccessOf, shellQuote } from "../../components/render/host/shell";

/** What the evaluation reads from outside the plan. */
export interface PlanFixtures {
    /** What step `name` printed at its last run. */
    stdout(name: string): string;
    /** The host key node `node` is pinned to. */
    hostKey(node: string): string;
    /** A secret of the stack (`apiKey`, `hfToken`, …). */
    secret(key: string): string;
    /** A secret derived from the root secret for `purpose`. */
    derived(purpose: string): string;
}

/** One planned resource, its values resolved. */
export interface PlannedResource {
    kind: "component" | "step" | "secret";
    type: string;
    name: string;
    /** The parent's name (the cluster's for none). */
    parent: string;
    dependsOn: string[];
    aliasParents: string[];
    createTimeout?: string;
    deleteBeforeReplace: boolean;
    retired: boolean;
    /** A step's inputs as NodeHost.command makes them (create with its header, delete and read as root); stdin and secret triggers as "<secret>". */
    inputs: { create?: string; delete?: string; read?: string; logging?: string; stdin?: string; triggers?: string[] };
    /** The values behind "<secret>": stdin's, and the triggers'. */
    secretValues: { stdin?: string; triggers?: string[] };
}

/** The plan's resources in order, its warnings and its outputs, for the cluster `cluster` of `config`. */
export function evaluatePlan(
    plan: ClusterPlan,
    cluster: string,
    config: Config,
    fixtures: PlanFixtures,
): { resources: PlannedResource[]; warnings: string[]; outputs: Record<string, unknown> } {
    const memo = new Map<string, unknown>();
    /** Whether each shared value is secret, once known. */
    const secretValues = new Map<string, boolean>();
    const ref = (r: Ref): unknown => {
        const [kind, ...rest] = r.split(":");
        if (kind === "step") {
            const output = rest[rest.length - 1];
            const step = rest.slice(0, -1).join(":");
            return output === "hostKey" ? fixtures.hostKey(step.replace(/-ssh$/, "")) : fixtures.stdout(step);
        }
        if (kind === "secret") return fixtures.secret(rest.join(":"));
        if (kind === "derived") return fixtures.derived(rest.join(":"));
        const name = rest.join(":");
        if (!memo.has(name)) {
            const planned = plan.values[name];
            if (planned === undefined) throw new Error(`the plan uses the value ${name}, which it does not make`);
            memo.set(name, resolve(planned));
        }
        return memo.get(name);
    };
    /** Whether a value is secret: it is marked so, or it uses a secret (as Pulumi marks it). */
    const isSecret = (value: Val<unknown>): boolean => {
        if (!isDerived(value)) return false;
        return (
            value.secret === true ||
            value.uses.some((r) => r.startsWith("secret:") || r.startsWith("derived:") || (r.startsWith("value:") && secretValue(r.slice("value:".length))))
        );
    };
    const secretValue = (name: string): boolean => {
        if (!secretValues.has(name)) {
            secretValues.set(name, false); // while its uses are read: a value that used itself would not recurse
            const planned = plan.values[name];
            secretValues.set(name, planned !== undefined && isSecret(planned));
        }
        return secretValues.get(name) === true;
    };
    function resolve<T>(value: Val<T>): T {
        return isDerived(value) ? value.make(value.uses.map(ref) as never[]) : value;
    }

    const resources: PlannedResource[] = [];
    const nodeOf = new Map(config.nodes.map((n) => [n.name, n]));
    for (const item of plan.items) {
        const common = { dependsOn: [] as string[], aliasParents: [] as string[], deleteBeforeReplace: false, retired: false, inputs: {}, secretValues: {} };
        if (item.kind === "secret") {
            resources.push({ ...common, kind: "secret", type: "spark-remote:index:RandomSecret", name: item.name, parent: cluster });
        } else if (item.kind === "component") {
            resources.push({
                ...common,
                kind: "component",
                type: `spark-cluster:index:${item.type}`,
                name: item.name,
                parent: item.parent ?? cluster,
                dependsOn: [...item.after],
                aliasParents: item.aliasCluster ? [cluster] : [],
                retired: item.retired === true,
            });
        } else {
            const node = nodeOf.get(item.node);
            if (node === undefined) throw new Error(`${item.name} runs on ${item.node}, which is not a node`);
            const wrap = item.spec.asLoginUser
                ? (s: string) => `bash -c ${shellQuote(s)}`
                : (s: string) => remoteCommand(s, node.ssh.user, rootAccessOf(node.ssh.user, node.ssh.sudoPassword !== undefined));
            const spec = item.spec;
            resources.push({
                ...common,
                kind: "step",
                type: "spark-remote:index:Step",
                name: item.name,
                parent: item.parent ?? cluster,
                dependsOn: [...item.after],
                aliasParents: item.aliasCluster ? [cluster] : [],
                ...(item.timeouts !== undefined ? { createTimeout: item.timeouts.create } : {}),
                deleteBeforeReplace: item.deleteBeforeReplace === true,
                retired: item.retired === true,
                inputs: {
                    create: (spec.header !== undefined ? resolve(spec.header) : "") + wrap(resolve(spec.create)),
                    ...(spec.delete !== undefined ? { delete: wrap(resolve(spec.delete)) } : {}),
                    ...(spec.read !== undefined ? { read: wrap(resolve(spec.read)) } : {}),
                    ...(spec.logging !== undefined ? { logging: spec.logging } : {}),
                    ...(spec.stdin !== undefined ? { stdin: "<secret>" } : {}),
                    ...(spec.triggers !== undefined ? { triggers: spec.triggers.map((t) => (isSecret(t) ? "<secret>" : resolve(t))) } : {}),
                },
                secretValues: {
                    ...(spec.stdin !== undefined ? { stdin: resolve(spec.stdin) } : {}),
                    ...(spec.triggers !== undefined ? { triggers: spec.triggers.map((t) => resolve(t)) } : {}),
                },
            });
        }
    }
    const warnings = plan.warnings.flatMap((w) => [...resolve(w.text)]);
    const outputs = Object.fromEntries(Object.entries(plan.outputs).map(([key, value]) => [key, resolve(value)]));
    return { resources, warnings, outputs };
}
