/**
 * Renders many configs, one after the other, in one process under Pulumi's mocks: the render
 * worker of test/process/sinks.property.test.ts, and {@link RenderPool}, which runs two of them.
 * test/mocked/graphHarness.ts gives each scenario a fresh runtime (a store of its own); the property
 * test renders hundreds, so each worker keeps its runtime and resets only what it records.
 *
 * `node build/test/process/sinkRender.js`: one job per line on stdin (`{ id, values, secretKeys,
 * preview }`), one result per line on fd 3 (`{ id, resources, outputs, errors }`), in order. The
 * mocks answer like graphHarness's (a Spark's twins up, PFC enabled), on every node whatever its
 * name. stdout is left to Pulumi.
 */
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as readline from "node:readline";
import * as pulumi from "@pulumi/pulumi";
import { parseConfig } from "../../config";
import { LAB_IBDEV2NETDEV, MOCK_HOST_KEY, message, setCommandMocks, untilSettledOrStalled } from "../support/mockHarness";

/** One config to render. */
export interface RenderJob {
    id: number;
    /** Stack config values below the spark-cluster: namespace. */
    values: Record<string, unknown>;
    secretKeys: string[];
    /** Render as `pulumi preview` does (a key file is not read). */
    preview: boolean;
}

/** One registered resource: its type and its inputs as the engine would receive them (secrets wrapped). */
export interface RenderedResource {
    type: string;
    name: string;
    inputs: Record<string, unknown>;
}

export interface RenderResult {
    id: number;
    resources: RenderedResource[];
    outputs: Record<string, unknown>;
    errors: string[];
}

/** Worker processes that render jobs, each in turn (`size` of them side by side). */
export class RenderPool {
    readonly #workers: { child: ChildProcess; pending: Map<number, (r: RenderResult) => void> }[] = [];
    #next = 0;
    #id = 0;

    start(size: number): void {
        for (let k = 0; k < size; k++) {
            const child = spawn(process.execPath, [path.join(__dirname, "sinkRender.js")], { stdio: ["pipe", "ignore", "inherit", "pipe"] });
            const pending = new Map<number, (r: RenderResult) => void>();
            const lines = readline.createInterface({ input: child.stdio[3] as NodeJS.ReadableStream });
            lines.on("line", (line) => {
                const result = JSON.parse(line) as RenderResult;
                pending.get(result.id)?.(result);
                pending.delete(result.id);
            });
            this.#workers.push({ child, pending });
        }
    }

    /** Renders `values` as `pulumi preview` does (no key file is read). */
    render(values: Record<string, unknown>, secretKeys: string[]): Promise<RenderResult> {
        const worker = this.#workers[this.#next++ % this.#workers.length];
        const job: RenderJob = { id: this.#id++, values, secretKeys, preview: true };
        return new Promise((resolve) => {
            worker.pending.set(job.id, resolve);
            worker.child.stdin?.write(JSON.stringify(job) + "\n");
        });
    }

    stop(): void {
        for (const w of this.#workers) w.child.stdin?.end();
    }
}

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------

function mockStdout(name: string): string {
    if (name.endsWith("-ssh")) return `ssh ok: ${name.replace(/-ssh$/, "")}\nhost-key=${MOCK_HOST_KEY}\n`;
    // Every node a Spark's twins (whatever its name), and Ray in its runtime.
    if (name.endsWith("-probe")) return `${LAB_IBDEV2NETDEV}ray-version=2.60.0\n`;
    if (name.endsWith("-roce-apply")) return "[spark-cluster] PFC 0,0,0,1,0,0,0,0 set\nstatus=enabled: test";
    if (name.endsWith("-firewall-apply")) return "status=enabled: test";
    return "";
}

/** Serves jobs from stdin until it closes. */
function serve(): void {
    let recorded = new Map<string, RenderedResource>();
    const errors: string[] = [];
    /** The preview flag the mocks were set with (they are process-wide; set again only when it changes). */
    let mocksSet: boolean | undefined;
    process.on("unhandledRejection", (err) => errors.push(message(err)));
    // The SDK takes a stack trace for every promise and resource (debug aids): not needed here, and
    // most of a render's time.
    Error.stackTraceLimit = 0;

    const render = async (job: RenderJob): Promise<RenderResult> => {
        recorded = new Map();
        errors.length = 0;
        if (mocksSet !== job.preview) {
            await setCommandMocks({
                stdout: mockStdout,
                onResource: (args) => void recorded.set(args.name, { type: args.type, name: args.name, inputs: args.inputs }),
                preview: job.preview,
            });
            mocksSet = job.preview;
        }
        const { SparkCluster } = await import("../../components/sparkCluster");
        const created: pulumi.Resource[] = [];
        let cluster: InstanceType<typeof SparkCluster> | undefined;
        try {
            const config = parseConfig({ values: job.values, secretKeys: new Set(job.secretKeys) });
            cluster = new SparkCluster("dev", { config }, { transformations: [(args) => (created.push(args.resource), undefined)] });
        } catch (err) {
            errors.push(message(err));
        }
        const known = Promise.all(created.map((r) => new Promise((resolve) => r.urn.apply(resolve))));
        const outputs = cluster
            ? new Promise<Record<string, unknown>>((resolve) =>
                  pulumi
                      .all([cluster.endpoint, cluster.servedModel, cluster.transport, cluster.dashboard, cluster.hostKeys, cluster.firewall, cluster.ray])
                      .apply(([endpoint, servedModel, transport, dashboard, hostKeys, firewall, ray]) =>
                          resolve({ endpoint, servedModel, transport, dashboard, hostKeys, firewall, ray }),
                      ),
              )
            : Promise.resolve({});
        // A failed registration never resolves: stop 20 s after the start, or once errors were
        // reported and none came for 300 ms.
        const settled = await untilSettledOrStalled(Promise.all([known, outputs]), errors, { limitMs: 20_000, quietMs: 300, tickMs: 50 });
        if (settled === "stopped") errors.push(`not every resource registered (${recorded.size} of ${created.length})`);
        return { id: job.id, resources: [...recorded.values()], outputs: settled === "stopped" ? {} : settled[1], errors: [...new Set(errors)] };
    };

    const out = fs.createWriteStream("", { fd: 3 });
    const lines = readline.createInterface({ input: process.stdin });
    const queue: string[] = [];
    let busy = false;
    let closed = false;
    const pump = async () => {
        if (busy) return;
        busy = true;
        while (queue.length > 0) {
            const job = JSON.parse(queue.shift() as string) as RenderJob;
            const result = await render(job).catch((err: unknown) => ({ id: job.id, resources: [], outputs: {}, errors: [message(err)] }));
            await new Promise((resolve) => out.write(JSON.stringify(result) + "\n", resolve));
        }
        busy = false;
        if (closed) out.end(() => process.exit(0));
    };
    lines.on("line", (line) => {
        queue.push(line);
        void pump();
    });
    lines.on("close", () => {
        closed = true;
        if (!busy) out.end(() => process.exit(0));
    });
}

if (require.main === module) {
    serve();
}
