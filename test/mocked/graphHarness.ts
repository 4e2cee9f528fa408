/**
 * Builds one SparkCluster against Pulumi's mock monitor and records the resource graph: every
 * resource's type, name, inputs as the engine would receive them, parent and explicit dependsOn.
 *
 * Pulumi's mocks live in the SDK's store, one per process unless a program runs inside the SDK's
 * own `withLocalStorage` (what its automation server does for each inline program), so materialize.test.ts
 * runs a batch of scenarios in one process, one after the other, each in a store of its own:
 * `node build/test/mocked/graphHarness.js --batch <dir>` with `{ name: scenario }` (stack config
 * values and the names of the secret keys) as JSON on stdin writes `<dir>/<name>.json` for each.
 * Where this SDK has no `withLocalStorage` (an internal of `@pulumi/pulumi/runtime/state`), the
 * batch says so and the test runs each scenario in its own process instead:
 * `node build/test/mocked/graphHarness.js <out.json>` with the scenario on stdin. stdout is left
 * to Pulumi's own log lines.
 *
 * The mocks answer like the lab (test/support/graphScenarios.ts, mockStdout).
 * Any resource type other than `spark-cluster:index:*` or `spark-remote:index:Step`/`RandomSecret` is recorded
 * as unexpected and fails its registration.
 */
import * as fs from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import { parseConfig } from "../../config";
import { MOCK_HOST_KEY, message, setCommandMocks, untilSettledOrStalled } from "../support/mockHarness";
import { type Scenario, mockStdout, sshHostKey } from "../support/graphScenarios";
import type { RecordedResource, ScenarioResult } from "../support/planGraph";

export type { Scenario } from "../support/graphScenarios";

export type { RecordedResource, ScenarioResult } from "../support/planGraph";

const EXPECTED_TYPE = /^(spark-cluster:index:[A-Za-z]+|spark-remote:index:(Step|RandomSecret))$/;

/**
 * The names of a dependsOn list. A Promise (a step made after its dependents, such as the
 * cluster's vLLM check, or a list of them, such as a ring's forwarding steps) is named once it
 * resolved, as Pulumi's own gatherExplicitDependencies reads it; an Output is not a dependency we write.
 */
async function namesOf(dependsOn: unknown): Promise<string[]> {
    if (dependsOn === undefined) return [];
    if (Array.isArray(dependsOn)) return (await Promise.all(dependsOn.map(namesOf))).flat();
    if (dependsOn instanceof Promise) return namesOf(await dependsOn);
    return [pulumi.Resource.isInstance(dependsOn) ? pulumi.resourceName(dependsOn) : "<not a resource: an Output>"];
}

/** Builds the cluster of `scenario` on the mock monitor and records its graph. */
export async function runScenario(scenario: Scenario): Promise<ScenarioResult> {
    const unexpectedTypes: string[] = [];
    const errors: string[] = [];
    const inputsByName = new Map<string, { type: string; custom: boolean; inputs: Record<string, unknown> }>();
    const optionsByName = new Map<string, Pick<RecordedResource, "parent" | "replaceOnChanges" | "deleteBeforeReplace" | "createTimeout" | "aliasParents">>();
    const dependsOnByName = new Map<string, Promise<string[]>>();
    const created: pulumi.Resource[] = [];
    const onRejection = (err: unknown) => errors.push(message(err));
    process.on("unhandledRejection", onRejection);
    const warnings: string[] = [];
    const consoleWarn = console.warn;
    console.warn = (...args: unknown[]) => {
        const text = args.map(String).join(" ");
        if (text.startsWith("warning: [runtime] ")) warnings.push(text.slice("warning: [runtime] ".length));
        else consoleWarn(...args);
    };

    await setCommandMocks({
        stdout: (name) => mockStdout(scenario, name),
        outputs: (name) => (name.endsWith("-ssh") && sshHostKey(scenario, name) === "presented" ? { presentedHostKey: MOCK_HOST_KEY } : {}),
        onResource: (args) => {
            if (!EXPECTED_TYPE.test(args.type)) {
                unexpectedTypes.push(args.type);
                throw new Error(`unexpected resource type ${args.type} (${args.name})`);
            }
            inputsByName.set(args.name, { type: args.type, custom: args.custom ?? false, inputs: args.inputs });
        },
        onCall: (args) => unexpectedTypes.push(`call ${args.token}`),
    });

    // Only now load the component code, so every resource it creates meets the mocks.
    const { SparkCluster } = await import("../../components/sparkCluster");
    const config = parseConfig({ values: scenario.values, secretKeys: new Set(scenario.secretKeys) });

    let cluster: InstanceType<typeof SparkCluster> | undefined;
    try {
        cluster = new SparkCluster(
            scenario.clusterName,
            { config },
            {
                // Transformations run for the cluster and, inherited, for every descendant: they see
                // each resource's options before it registers.
                transformations: [
                    (args) => {
                        created.push(args.resource);
                        dependsOnByName.set(args.name, namesOf(args.opts.dependsOn));
                        optionsByName.set(args.name, {
                            parent: args.opts.parent ? pulumi.resourceName(args.opts.parent) : undefined,
                            replaceOnChanges: args.opts.replaceOnChanges ?? [],
                            deleteBeforeReplace: (args.opts as pulumi.CustomResourceOptions).deleteBeforeReplace ?? false,
                            createTimeout: (args.opts as pulumi.CustomResourceOptions).customTimeouts?.create,
                            aliasParents: (args.opts.aliases ?? []).map((alias) => {
                                const parent = typeof alias === "object" && "parent" in alias ? alias.parent : undefined;
                                return pulumi.Resource.isInstance(parent) ? pulumi.resourceName(parent) : "(not a parent alias)";
                            }),
                        });
                        return undefined;
                    },
                ],
            },
        );
    } catch (err) {
        errors.push(message(err));
    }

    // Every registration has reached the mocks once every URN is known (bounded: a failed
    // registration never resolves its URN).
    const urnsKnown = Promise.all(created.map((res) => new Promise((resolve) => res.urn.apply(resolve))));
    const outputsKnown = cluster
        ? new Promise<ScenarioResult["outputs"]>((resolve) =>
              pulumi
                  .all([cluster.endpoint, cluster.servedModel, cluster.transport, cluster.dashboard, cluster.roce])
                  .apply(([endpoint, servedModel, transport, dashboard, roce]) => resolve({ endpoint, servedModel, transport, dashboard, roce })),
          )
        : Promise.resolve({});
    // A failed registration never resolves: stop 15 s after the start, or once errors were
    // reported and none came for half a second.
    const settled = await untilSettledOrStalled(Promise.all([urnsKnown, outputsKnown]), errors, { limitMs: 15_000, quietMs: 500, tickMs: 100 });
    let outputs: ScenarioResult["outputs"] = {};
    if (settled === "stopped") {
        errors.push(`not every resource registered (${inputsByName.size} of ${created.length})`);
    } else {
        outputs = settled[1];
    }

    // Bounded too: a promised dependency whose step was never made stays unnamed.
    const unresolved = new Promise<string[]>((resolve) => setTimeout(() => resolve(["<a Promise that never resolved>"]), 1000).unref());
    const dependsOn = new Map(await Promise.all([...dependsOnByName].map(async ([name, names]) => [name, await Promise.race([names, unresolved])] as const)));
    const resources: RecordedResource[] = [...optionsByName.entries()].flatMap(([name, options]) => {
        const registered = inputsByName.get(name);
        return registered ? [{ name, ...registered, ...options, dependsOn: dependsOn.get(name) ?? [] }] : [];
    });
    console.warn = consoleWarn;
    process.off("unhandledRejection", onRejection);
    return { resources, unexpectedTypes, errors: [...new Set(errors)], warnings, outputs };
}

/** The SDK's own way to run a program in a store of its own (undefined where this SDK has none). */
function sdkLocalStorage(): (<T>(run: () => Promise<T>) => Promise<T>) | undefined {
    try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const state = require("@pulumi/pulumi/runtime/state") as { withLocalStorage?: <T>(run: () => Promise<T>) => Promise<T> };
        return typeof state.withLocalStorage === "function" ? state.withLocalStorage : undefined;
    } catch {
        return undefined;
    }
}

/** Exit status of a batch this SDK cannot run in one process (materialize.test.ts then runs one process per scenario). */
export const NO_LOCAL_STORAGE_EXIT = 3;

/** Each scenario of `batch` in turn, each in a store of its own; `<dir>/<name>.json` for each. */
async function runBatch(dir: string, batch: Record<string, Scenario>): Promise<void> {
    const withLocalStorage = sdkLocalStorage();
    if (withLocalStorage === undefined) {
        console.error("graphHarness: this @pulumi/pulumi has no runtime/state withLocalStorage; run one scenario a process");
        process.exit(NO_LOCAL_STORAGE_EXIT);
    }
    for (const [name, scenario] of Object.entries(batch)) {
        const result = await withLocalStorage(() =>
            runScenario(scenario).catch((err: unknown): ScenarioResult => ({
                resources: [],
                unexpectedTypes: [],
                errors: [message(err)],
                warnings: [],
                outputs: {},
            })),
        );
        fs.writeFileSync(`${dir}/${name}.json`, JSON.stringify(result));
    }
}

if (require.main === module && process.argv[2] === "--batch") {
    const batch = JSON.parse(fs.readFileSync(0, "utf8")) as Record<string, Scenario>;
    runBatch(process.argv[3], batch).then(
        // Mocked registrations can leave handles open; every result is written.
        () => process.exit(0),
        (err: unknown) => {
            console.error(message(err));
            process.exit(1);
        },
    );
} else if (require.main === module) {
    const out = process.argv[2];
    if (!out) {
        throw new Error("usage: node graphHarness.js <out.json>  (scenario JSON on stdin)");
    }
    const scenario = JSON.parse(fs.readFileSync(0, "utf8")) as Scenario;
    runScenario(scenario).then(
        (result) => {
            fs.writeFileSync(out, JSON.stringify(result));
            // Mocked registrations can leave handles open; the result is written.
            process.exit(0);
        },
        (err: unknown) => {
            fs.writeFileSync(out, JSON.stringify({ resources: [], unexpectedTypes: [], errors: [message(err)], warnings: [], outputs: {} }));
            process.exit(0);
        },
    );
}
