/**
 * The cluster's plan (components/plan/clusterPlan.ts) evaluated without Pulumi: every named value
 * resolved from fixtures of what the nodes report (a step's stdout, a node's host key) and of the
 * stack's secrets, and every step's scripts wrapped as NodeHost.command wraps them (as root, or as
 * the login user). test/unit/clusterPlan.test.ts and test/unit/graph.test.ts read the graph from it
 * (the latter as {@link planResult}: a scenario's graph in the shape the mock monitor records);
 * test/mocked/materialize.test.ts checks that the materializer registers exactly this.
 */
import { type Config, parseConfig } from "../../config";
import { clusterPlan } from "../../components/plan/clusterPlan";
import { type ClusterPlan, type Ref, type Val, isDerived } from "../../components/plan/types";
import type { RoceChain } from "../../components/render/roceChain";
import { remoteCommand, rootAccessOf, shellQuote } from "../../components/render/host/shell";
import { MOCK_HOST_KEY, SECRET_SIG, SECRET_SIG_KEY, type Scenario, mockDerivedSecret, mockStdout, sshHostKey } from "./graphScenarios";

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
    /** The root secret's generation (a secret only). */
    generation?: string;
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
            resources.push({
                ...common,
                kind: "secret",
                type: "spark-remote:index:RandomSecret",
                name: item.name,
                parent: cluster,
                generation: item.generation,
            });
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

/** One resource of a graph as Pulumi's mock monitor records it (test/mocked/graphHarness.ts), or as {@link planResult} makes it from the plan. */
export interface RecordedResource {
    type: string;
    name: string;
    custom: boolean;
    /** The inputs as the mock monitor received them; a secret is `{ [SECRET_SIG_KEY]: SECRET_SIG, value }`. */
    inputs: Record<string, unknown>;
    /** The parent's name; undefined for the SparkCluster itself (its parent is the stack). */
    parent?: string;
    /** Names of the resources given in the `dependsOn` option, in order. */
    dependsOn: string[];
    /** The `replaceOnChanges` option (a step sets `triggers[*]` itself). */
    replaceOnChanges: string[];
    /** The `deleteBeforeReplace` option. */
    deleteBeforeReplace: boolean;
    /** The `customTimeouts` option's create timeout, if any. */
    createTimeout?: string;
    /** The `aliases` option, each as the name of the parent it names (`(stack)` for none). */
    aliasParents: string[];
}

/** A scenario's graph: what the mock monitor recorded, or what {@link planResult} made of the plan. */
export interface ScenarioResult {
    resources: RecordedResource[];
    /** Type tokens outside spark-cluster:index:*, spark-remote:index:Step and spark-remote:index:RandomSecret. */
    unexpectedTypes: string[];
    /** Errors raised while building or registering (message only). */
    errors: string[];
    /** What the program warned (pulumi.log.warn; the mock has no engine, so the SDK prints it with console.warn). */
    warnings: string[];
    /** The SparkCluster's outputs. */
    outputs: { endpoint?: string; servedModel?: string; transport?: string; dashboard?: string; roce?: Record<string, RoceChain> };
}

/** Whether a recorded input is a secret (marked as Pulumi marks a serialized secret). */
export function isSecret(value: unknown): value is { value: unknown } {
    return typeof value === "object" && value !== null && (value as Record<string, unknown>)[SECRET_SIG_KEY] === SECRET_SIG;
}

/** A recorded input's value, secret or not. */
export function plain(value: unknown): unknown {
    return isSecret(value) ? value.value : value;
}

/** Every place a string containing `needle` sits in `value` (a recorded input), and whether it is inside a secret. */
export function occurrences(value: unknown, needle: string, at = "", secret = false): { path: string; secret: boolean }[] {
    if (isSecret(value)) return occurrences(value.value, needle, at, true);
    if (typeof value === "string") return value.includes(needle) ? [{ path: at, secret }] : [];
    if (Array.isArray(value)) return value.flatMap((item, i) => occurrences(item, needle, `${at}[${i}]`, secret));
    if (typeof value === "object" && value !== null)
        return Object.entries(value).flatMap(([key, item]) => occurrences(item, needle, at ? `${at}.${key}` : key, secret));
    return [];
}

/** The plan of a scenario, evaluated with what the mocks report (graphScenarios.ts's mockStdout and host keys, the mocks' secrets). */
export function planOf(scenario: Scenario): ReturnType<typeof evaluatePlan> {
    const config = parseConfig({ values: scenario.values, secretKeys: new Set(scenario.secretKeys) });
    const secrets: Record<string, string | undefined> = {
        apiKey: config.apiKey.reveal(),
        hfToken: config.hfToken?.reveal(),
        rayAuthToken: config.rayAuthToken?.reveal(),
        openWebuiAdminPassword: config.openWebui?.adminPassword.reveal(),
    };
    return evaluatePlan(clusterPlan(scenario.clusterName, config), scenario.clusterName, config, {
        stdout: (step) => mockStdout(scenario, step),
        hostKey: (node) => config.nodes.find((n) => n.name === node)?.ssh.hostKey ?? (sshHostKey(scenario, `${node}-ssh`) === "none" ? "" : MOCK_HOST_KEY),
        secret: (key) => secrets[key] ?? "",
        derived: (purpose) => mockDerivedSecret(purpose, config.secretsGeneration),
    });
}

/**
 * A scenario's graph from its plan, in the shape the mock monitor records (the cluster first, then
 * each planned resource; secrets marked as Pulumi marks them), with no Pulumi: every input a step
 * registers but its connection, which the materializer makes from the node's config (the mocked
 * test, test/mocked/materialize.test.ts, checks the two agree and covers the connections).
 */
export function planResult(scenario: Scenario): ScenarioResult {
    const planned = planOf(scenario);
    const secret = (value: unknown) => ({ [SECRET_SIG_KEY]: SECRET_SIG, value });
    const resources: RecordedResource[] = planned.resources.map((r) => ({
        type: r.type,
        name: r.name,
        custom: r.kind !== "component",
        inputs:
            r.kind === "secret"
                ? { generation: r.generation }
                : r.kind === "component"
                  ? {}
                  : {
                        ...r.inputs,
                        ...(r.inputs.stdin !== undefined ? { stdin: secret(r.secretValues.stdin) } : {}),
                        ...(r.inputs.triggers?.includes("<secret>") ? { triggers: secret(r.secretValues.triggers) } : {}),
                    },
        parent: r.parent,
        dependsOn: r.dependsOn,
        replaceOnChanges: r.kind === "step" ? ["triggers[*]"] : r.kind === "secret" ? ["bytes", "generation"] : [],
        deleteBeforeReplace: r.deleteBeforeReplace,
        ...(r.createTimeout !== undefined ? { createTimeout: r.createTimeout } : {}),
        aliasParents: r.aliasParents,
    }));
    const cluster: RecordedResource = {
        type: "spark-cluster:index:SparkCluster",
        name: scenario.clusterName,
        custom: false,
        inputs: {},
        dependsOn: [],
        replaceOnChanges: [],
        deleteBeforeReplace: false,
        aliasParents: [],
    };
    const { endpoint, servedModel, transport, dashboard, roce } = planned.outputs as ScenarioResult["outputs"];
    // As the recorded graph comes back from its harness: through JSON (no undefined values).
    return JSON.parse(
        JSON.stringify({
            resources: [cluster, ...resources],
            unexpectedTypes: [],
            errors: [],
            warnings: planned.warnings,
            outputs: { endpoint, servedModel, transport, dashboard, roce },
        }),
    ) as ScenarioResult;
}
