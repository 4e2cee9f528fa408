/**
 * The one Pulumi mock monitor of the tests: every test that renders the program or a SparkCluster
 * under `pulumi.runtime.setMocks` (test/mocked/*, test/process/sinkRender.ts) installs it through
 * {@link setCommandMocks} and differs only in what its mocked commands print and what it records.
 *
 * Mocks are process-global, and the components must be loaded after them: callers load component
 * code with a dynamic `import()` once {@link setCommandMocks} resolved (this module imports none).
 */
import * as pulumi from "@pulumi/pulumi";
import { mockRandomSecret } from "./graphScenarios";

export { LAB_IBDEV2NETDEV, MOCK_HOST_KEY, SECRET_SIG, SECRET_SIG_KEY, mockDerivedSecret, mockRandomSecret } from "./graphScenarios";

export interface CommandMocks {
    /** The `stdout` the mocked step `name` reports (its state is its inputs, this stdout and an empty stderr). */
    stdout: (name: string) => string;
    /** Other outputs the mocked step `name` reports, such as `presentedHostKey`. Defaults to none. */
    outputs?: (name: string) => Record<string, unknown>;
    /** Sees every registration before it is answered; throwing fails that registration. */
    onResource?: (args: pulumi.runtime.MockResourceArgs) => void;
    /** Sees every provider function call before it is refused (every call fails: the program makes none). */
    onCall?: (args: pulumi.runtime.MockCallArgs) => void;
    /** The stack name the program sees (default `dev`). */
    stack?: string;
    /** Run as `pulumi preview` does (default false: as `up`). */
    preview?: boolean;
}

/**
 * Installs the mock monitor: a custom resource gets the ID `<name>-id`, a component none; a
 * step's state is its inputs plus `stdout` from {@link CommandMocks.stdout} (and any
 * {@link CommandMocks.outputs}); every other resource's state is empty.
 */
export async function setCommandMocks(mocks: CommandMocks): Promise<void> {
    await pulumi.runtime.setMocks(
        {
            newResource(args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult {
                mocks.onResource?.(args);
                const state =
                    args.type === "spark-remote:index:Step"
                        ? { ...args.inputs, ...mocks.outputs?.(args.name), stdout: mocks.stdout(args.name), stderr: "" }
                        : args.type === "spark-remote:index:RandomSecret"
                          ? { ...args.inputs, value: mockRandomSecret(args.name, String(args.inputs.generation)) }
                          : {};
                return { id: args.custom ? `${args.name}-id` : undefined, state };
            },
            call(args: pulumi.runtime.MockCallArgs): pulumi.runtime.MockCallResult {
                mocks.onCall?.(args);
                throw new Error(`unexpected call ${args.token}`);
            },
        },
        "spark-cluster",
        mocks.stack ?? "dev",
        mocks.preview ?? false,
    );
}

export function message(err: unknown): string {
    return err instanceof Error ? err.message : String(err);
}

/**
 * Runs the program (index.ts) inside a stack on the installed mocks, as the language host loads
 * it: components/nodeConnection registers its stack transformations first, then `observe`'s,
 * which runs after them and so sees every resource's final options. Errors the program raises
 * are pushed onto `errors`.
 */
export async function runProgramInStack(observe: pulumi.ResourceTransformation, errors: string[]): Promise<void> {
    try {
        await pulumi.runtime.runInPulumiStack(async () => {
            await import("../../components/nodeConnection");
            pulumi.runtime.registerStackTransformation(observe);
            return await import("../../index");
        });
    } catch (err) {
        errors.push(message(err));
    }
}

/** True once every resource's URN is known (each registration reached the mocks), false after `limitMs`. */
export async function allRegistered(resources: readonly pulumi.Resource[], limitMs: number): Promise<boolean> {
    const timeout = new Promise((resolve) => setTimeout(resolve, limitMs, "timeout"));
    const urns = Promise.all(resources.map((res) => new Promise((resolve) => res.urn.apply(resolve))));
    return (await Promise.race([urns, timeout])) !== "timeout";
}

/**
 * `done`, or "stopped" when it does not come (a failed registration never resolves): `limitMs`
 * after the start, or once `errors` has entries and none came for `quietMs` (checked every `tickMs`).
 */
export async function untilSettledOrStalled<T>(
    done: Promise<T>,
    errors: readonly unknown[],
    bounds: { limitMs: number; quietMs: number; tickMs: number },
): Promise<T | "stopped"> {
    let timer: NodeJS.Timeout | undefined;
    const stopped = new Promise<"stopped">((resolve) => {
        const start = Date.now();
        let quietSince = Date.now();
        let count = 0;
        timer = setInterval(() => {
            if (errors.length !== count) {
                count = errors.length;
                quietSince = Date.now();
            }
            if (Date.now() - start > bounds.limitMs || (count > 0 && Date.now() - quietSince > bounds.quietMs)) {
                resolve("stopped");
            }
        }, bounds.tickMs);
    });
    try {
        return await Promise.race([done, stopped]);
    } finally {
        clearInterval(timer);
    }
}
