// `vllm bench serve` on the head node, inside the head's runtime (docker exec
// into the vLLM container, or the venv's own vllm), against the deployed
// endpoint on 127.0.0.1. The API key is read on the node from the root-only
// env file, the way the readiness probe reads it, and reaches vLLM's benchmark
// as OPENAI_API_KEY through the environment: never on a command line.
// scripts/bench-serve.sh renders this from the stack outputs and runs it over SSH.
import type { Runtime } from "../../config";
import { RuntimeSchema } from "../../config/schema";
import type { ClusterSummary } from "../clusterSummary";
import { envFileReader, pythonReadEnvValue } from "./host/envFile";
import { runtimeStrategy } from "./host/runtime";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { CONTAINER_NAMES, UNITS, VLLM_SECRETS_PATH } from "../../config/hostPaths";

/** The benchmark's knobs, as `vllm bench serve` (vLLM 0.33) names them. */
export interface BenchServeOptions {
    /** `--backend`: openai (the /v1/completions API) or openai-chat. */
    backend: string;
    /** `--endpoint`: the API path under the server. */
    endpoint: string;
    /** `--dataset-name`. */
    datasetName: string;
    randomInputLen: number;
    randomOutputLen: number;
    numPrompts: number;
    /** `--request-rate`: requests per second, or `inf` (all at once). */
    requestRate: string;
    /** `--max-concurrency`, unset by default (no limit). */
    maxConcurrency?: number;
    seed: number;
    /** Further `vllm bench serve` flags, appended as given. */
    extraArgs: string[];
}

/** The default benchmark: random data, 1024 tokens in, 128 out, 100 prompts, all at once. */
export const BENCH_DEFAULTS: BenchServeOptions = {
    backend: "openai",
    endpoint: "/v1/completions",
    datasetName: "random",
    randomInputLen: 1024,
    randomOutputLen: 128,
    numPrompts: 100,
    requestRate: "inf",
    seed: 0,
    extraArgs: [],
};

export interface BenchServeSpec extends BenchServeOptions {
    /** The head's runtime: how to reach its vllm, and how its env files are quoted. */
    runtime: Runtime;
    /** The API port on the head (model.apiPort). */
    port: number;
    /** `--model`: the model source (HF id or path), which vLLM's benchmark also loads the tokenizer from. */
    model: string;
    /** `--served-model-name`: the name requests carry (model.servedName). */
    servedName: string;
}

function optionProblems(options: BenchServeOptions): string[] {
    const problems: string[] = [];
    const positive = (name: string, value: number | undefined) => {
        if (value !== undefined && !(Number.isInteger(value) && value > 0)) problems.push(`${name} must be a positive integer (got ${value})`);
    };
    positive("randomInputLen", options.randomInputLen);
    positive("randomOutputLen", options.randomOutputLen);
    positive("numPrompts", options.numPrompts);
    positive("maxConcurrency", options.maxConcurrency);
    if (!Number.isInteger(options.seed) || options.seed < 0) problems.push(`seed must be a non-negative integer (got ${options.seed})`);
    if (!(options.requestRate === "inf" || (/^[0-9]+(\.[0-9]+)?$/.test(options.requestRate) && Number(options.requestRate) > 0))) {
        problems.push(`requestRate must be a positive number or inf (got ${JSON.stringify(options.requestRate)})`);
    }
    if (!/^\/[A-Za-z0-9/_.-]*$/.test(options.endpoint)) problems.push(`endpoint must be a path like /v1/completions (got ${JSON.stringify(options.endpoint)})`);
    if (!/^[a-z0-9-]+$/.test(options.backend)) problems.push(`backend must be a vllm bench serve backend like openai (got ${JSON.stringify(options.backend)})`);
    if (!/^[a-z0-9_-]+$/.test(options.datasetName))
        problems.push(`datasetName must be a dataset name like random (got ${JSON.stringify(options.datasetName)})`);
    return problems;
}

/** `vllm bench serve …` against 127.0.0.1 on the head. No API key here: it travels as OPENAI_API_KEY. */
export function benchServeArgv(spec: BenchServeSpec): string[] {
    const problems = optionProblems(spec);
    if (!Number.isInteger(spec.port) || spec.port < 1 || spec.port > 65535) problems.push(`port must be in 1..65535 (got ${spec.port})`);
    if (problems.length > 0) {
        throw new Error(`vllm bench serve: ${problems.join("; ")}`);
    }
    const argv = [
        "vllm",
        "bench",
        "serve",
        "--backend",
        spec.backend,
        "--host",
        "127.0.0.1",
        "--port",
        String(spec.port),
        "--endpoint",
        spec.endpoint,
        "--model",
        spec.model,
        "--served-model-name",
        spec.servedName,
        "--dataset-name",
        spec.datasetName,
        "--random-input-len",
        String(spec.randomInputLen),
        "--random-output-len",
        String(spec.randomOutputLen),
        "--num-prompts",
        String(spec.numPrompts),
        "--request-rate",
        spec.requestRate,
    ];
    if (spec.maxConcurrency !== undefined) argv.push("--max-concurrency", String(spec.maxConcurrency));
    argv.push("--seed", String(spec.seed));
    return [...argv, ...spec.extraArgs];
}

/** How the head runs the benchmark: `docker exec` with OPENAI_API_KEY passed by name, or the venv's vllm (the variable is exported). */
export function benchServeCommand(spec: BenchServeSpec): string {
    return runtimeStrategy(spec.runtime).execBesideWithApiKey(CONTAINER_NAMES.vllm, benchServeArgv(spec));
}

/**
 * The script the head runs as root: the vLLM unit must be active; the API key is
 * read from the root-only env file with the readiness probe's reader (systemd
 * quoting for venv nodes, verbatim for docker); then the benchmark runs. Exit 1
 * when no request succeeded or any failed (vLLM's own tool exits 0 then).
 */
export function benchServeScript(spec: BenchServeSpec): string {
    const reader = envFileReader(spec.runtime);
    const readKey = [pythonReadEnvValue(reader), `print(read_env_value(${JSON.stringify(VLLM_SECRETS_PATH)}, "VLLM_API_KEY"))`].join("\n");
    const command = benchServeCommand(spec);
    return bashScript([
        `if ! systemctl is-active --quiet ${UNITS.vllm}.service; then`,
        `  echo "bench: ${UNITS.vllm} is not running on $(hostname)" >&2`,
        `  exit 1`,
        `fi`,
        heredoc(`OPENAI_API_KEY=$(python3 -`, readKey) + "\n)",
        `if [ -z "$OPENAI_API_KEY" ]; then`,
        `  echo "bench: no VLLM_API_KEY in ${VLLM_SECRETS_PATH}" >&2`,
        `  exit 1`,
        `fi`,
        `export OPENAI_API_KEY`,
        `out=$(mktemp)`,
        `trap 'rm -f "$out"' EXIT`,
        `echo ${shellQuote(`bench: ${benchServeArgv(spec).join(" ")}`)}`,
        `rc=0`,
        `${command} </dev/null 2>&1 | tee "$out" || rc=$?`,
        `[ "$rc" = 0 ] || exit "$rc"`,
        `ok=$(sed -n 's/^Successful requests: *\\([0-9]*\\).*/\\1/p' "$out" | tail -n 1)`,
        `failed=$(sed -n 's/^Failed requests: *\\([0-9]*\\).*/\\1/p' "$out" | tail -n 1)`,
        `if [ -z "$ok" ] || [ "$ok" = 0 ] || [ "\${failed:-0}" != 0 ]; then`,
        `  echo "bench: \${ok:-no} successful and \${failed:-?} failed requests: not a valid measurement" >&2`,
        `  exit 1`,
        `fi`,
    ]);
}

/** Where to SSH for the head, and the benchmark's spec, from the stack's `cluster` output. */
export interface BenchTarget {
    node: string;
    ssh: { user: string; host: string; port: number };
    spec: BenchServeSpec;
}

/** The head's SSH target as the `cluster` output holds it, checked (the output is read back as JSON). */
function sshTargetOf(node: string, ssh: unknown): BenchTarget["ssh"] {
    const target = ssh as Partial<BenchTarget["ssh"]> | undefined;
    if (typeof target?.user !== "string" || typeof target.host !== "string" || !Number.isInteger(target.port)) {
        throw new Error(`the cluster output's ssh of ${node} is not { user, host, port }: ${JSON.stringify(ssh)}`);
    }
    return { user: target.user, host: target.host, port: target.port as number };
}

/** The head's runtime as the `cluster` output holds it, checked with the config's own schema. */
function runtimeOf(node: string, runtime: unknown): Runtime {
    const parsed = RuntimeSchema.safeParse(runtime);
    if (!parsed.success) throw new Error(`the cluster output's runtime of ${node} is not a runtime: ${JSON.stringify(runtime)}`);
    return parsed.data;
}

/** The head, its runtime and the served model from the `cluster` output, with the given options. */
export function benchTargetFromCluster(cluster: Pick<ClusterSummary, "head" | "nodes" | "model">, options: Partial<BenchServeOptions> = {}): BenchTarget {
    const head = cluster.nodes.find((node) => node.name === cluster.head) ?? cluster.nodes.find((node) => node.head);
    if (!head) throw new Error(`the cluster output names head ${JSON.stringify(cluster.head)} but no such node`);
    const merged: BenchServeOptions = { ...BENCH_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
    const spec: BenchServeSpec = {
        ...merged,
        runtime: runtimeOf(head.name, head.runtime),
        port: cluster.model.apiPort,
        model: cluster.model.source,
        servedName: cluster.model.servedName,
    };
    benchServeArgv(spec); // validates
    return { node: head.name, ssh: sshTargetOf(head.name, head.ssh), spec };
}
