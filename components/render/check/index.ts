// The NCCL check: nccl_check.py (beside this file, shipped as text) written to
// the node and run with the runtime's own Python and torch, one rank per node:
// in a throwaway container of the node's image with the vLLM unit's docker
// flags and runtime.env (docker runtime), or with the venv's python and the
// same env file read as systemd reads it (venv runtime). Rank 0's TCP store
// listens on the master port of its interconnect address; NCCL (or gloo on a
// node without a GPU) then opens its own connections between the ranks.
// Pure functions: text in, text out; no @pulumi imports.
import * as fs from "node:fs";
import * as path from "node:path";
import type { Runtime } from "../../../config";
import { isHostOrIpv4 } from "../../../config/ipv4";
import { envValueProblem } from "../host/envFile";
import { HOST_LIB } from "../host/lib";
import { runtimeStrategy } from "../host/runtime";
import { bashScript, heredoc, shellQuote } from "../host/shell";
import { RUNTIME_ENV_PATH, STATE_DIR } from "../../../config/hostPaths";
import { ROCE_PASS_MARK_GBPS } from "../../../config/schema";

/** Default port of rank 0's TCP store (torch.distributed's usual MASTER_PORT; vLLM's mp executor uses 29501). */
export const NCCL_CHECK_PORT = 29500;
/** Where the script is written on the node while it runs (removed afterwards). */
export const NCCL_CHECK_DIR = `${STATE_DIR}/check`;
export const NCCL_CHECK_PATH = `${NCCL_CHECK_DIR}/nccl_check.py`;
/** Name of the throwaway container (docker runtime). */
export const NCCL_CHECK_CONTAINER = "spark-cluster-check";
/** Prefix of every line the script prints; the last one is the result. */
export const NCCL_CHECK_PREFIX = "nccl-check:";

let source: string | undefined;

/**
 * The text of nccl_check.py. It sits beside this file in the source tree; the
 * compiled module (build/components/render/check) finds it there too.
 */
export function ncclCheckSource(): string {
    if (source === undefined) {
        const candidates = [path.join(__dirname, "nccl_check.py"), path.resolve(__dirname, "../../../../components/render/check/nccl_check.py")];
        const found = candidates.find((file) => fs.existsSync(file));
        if (!found) {
            throw new Error(`nccl_check.py not found (looked in ${candidates.join(", ")})`);
        }
        source = fs.readFileSync(found, "utf8");
    }
    return source;
}

export interface NcclCheckSpec {
    /** The node's name, for messages. */
    node: string;
    /** The node's runtime: the check runs with its Python and torch. */
    runtime: Runtime;
    /** This node's rank: 0 on the node whose address is masterAddr. */
    rank: number;
    /** Number of nodes taking part (one rank each). */
    worldSize: number;
    /** Rank 0's interconnect address (no prefix length): its TCP store listens there. */
    masterAddr: string;
    /** Port of rank 0's TCP store. Defaults to {@link NCCL_CHECK_PORT}. */
    masterPort?: number;
    /** Minimum peak bus bandwidth in GB/s. Defaults to {@link ROCE_PASS_MARK_GBPS}. */
    passMarkGBps?: number;
    /** Fail unless NCCL's transport starts with this (e.g. `NET/IB` on a RoCE cluster). */
    requireTransport?: string;
    /** Message sizes (e.g. `["1M", "64M", "256M"]`); the script's defaults otherwise. */
    sizes?: string[];
    /** Seconds for all ranks to join. Defaults to 120. */
    initTimeoutSeconds?: number;
    /** Seconds for the whole check. Defaults to 300. */
    timeoutSeconds?: number;
    /** Variables for the check only, after runtime.env (e.g. NCCL_P2P_DISABLE=1). */
    environment?: Record<string, string>;
    /** The script's text; defaults to {@link ncclCheckSource}. */
    source?: string;
}

function checkSpec(spec: NcclCheckSpec): void {
    const problems: string[] = [];
    if (!Number.isInteger(spec.worldSize) || spec.worldSize < 2) problems.push(`worldSize must be an integer >= 2 (got ${spec.worldSize})`);
    if (!Number.isInteger(spec.rank) || spec.rank < 0 || spec.rank >= spec.worldSize) {
        problems.push(`rank must be an integer in [0, ${spec.worldSize}) (got ${spec.rank})`);
    }
    if (!isHostOrIpv4(spec.masterAddr))
        problems.push(`masterAddr must be an address or host name without a prefix length (got ${JSON.stringify(spec.masterAddr)})`);
    const port = spec.masterPort ?? NCCL_CHECK_PORT;
    if (!Number.isInteger(port) || port < 1 || port > 65535) problems.push(`masterPort must be in 1..65535 (got ${port})`);
    if (spec.passMarkGBps !== undefined && !(Number.isFinite(spec.passMarkGBps) && spec.passMarkGBps >= 0)) {
        problems.push(`passMarkGBps must be a number >= 0 (0: report only; got ${spec.passMarkGBps})`);
    }
    for (const [name, value] of [
        ["initTimeoutSeconds", spec.initTimeoutSeconds],
        ["timeoutSeconds", spec.timeoutSeconds],
    ] as const) {
        if (value !== undefined && !(Number.isFinite(value) && value > 0)) problems.push(`${name} must be a positive number (got ${value})`);
    }
    for (const size of spec.sizes ?? []) {
        if (!/^[0-9]+(\.[0-9]+)?([KMG](i?B)?|B)?$/i.test(size)) problems.push(`sizes: ${JSON.stringify(size)} is not a size like 64M`);
    }
    if (spec.requireTransport !== undefined && !/^[A-Za-z0-9/_-]+$/.test(spec.requireTransport)) {
        problems.push(`requireTransport must look like NET/IB (got ${JSON.stringify(spec.requireTransport)})`);
    }
    for (const [key, value] of Object.entries(spec.environment ?? {})) {
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) problems.push(`environment: not a variable name: ${JSON.stringify(key)}`);
        const problem = envValueProblem(value);
        if (problem) problems.push(`environment.${key} ${problem}`);
    }
    if (problems.length > 0) {
        throw new Error(`NCCL check on ${spec.node}: ${problems.join("; ")}`);
    }
}

/** The script's own arguments (after the interpreter and the script). */
export function ncclCheckArgs(spec: NcclCheckSpec): string[] {
    checkSpec(spec);
    const args = [
        "--rank",
        String(spec.rank),
        "--world-size",
        String(spec.worldSize),
        "--master-addr",
        spec.masterAddr,
        "--master-port",
        String(spec.masterPort ?? NCCL_CHECK_PORT),
        "--pass-mark",
        String(spec.passMarkGBps ?? ROCE_PASS_MARK_GBPS),
        "--init-timeout",
        String(spec.initTimeoutSeconds ?? 120),
        "--timeout",
        String(spec.timeoutSeconds ?? 300),
    ];
    if (spec.requireTransport !== undefined) args.push("--require-transport", spec.requireTransport);
    if (spec.sizes !== undefined && spec.sizes.length > 0) args.push("--sizes", spec.sizes.join(","));
    return args;
}

/**
 * The command that runs the script at `scriptPath` in the node's runtime. Docker: a
 * throwaway container of the image with the vLLM unit's docker flags (GPUs, host
 * network and IPC, RDMA devices, memlock) and runtime.env, the script on stdin.
 * Venv: the venv's python, which loads runtime.env itself as systemd would.
 */
export function ncclCheckCommand(spec: NcclCheckSpec, scriptPath: string = NCCL_CHECK_PATH): string {
    return runtimeStrategy(spec.runtime).pythonScript({
        container: NCCL_CHECK_CONTAINER,
        scriptPath,
        args: ncclCheckArgs(spec),
        envFile: RUNTIME_ENV_PATH,
        environment: spec.environment ?? {},
    });
}

/**
 * The bash script one node runs (as root): writes nccl_check.py, runs its rank with
 * the runtime's Python, removes the script again. Bounded: the script's own timeout,
 * and `timeout` around it. Exit status is the script's: 0 pass, 1 below the pass mark
 * (or wrong sum / transport), 2 error, 124 timeout.
 */
export function ncclCheckScript(spec: NcclCheckSpec): string {
    const command = ncclCheckCommand(spec);
    const bound = Math.ceil((spec.timeoutSeconds ?? 300) + 60);
    // A container left by an interrupted check would block the name.
    const removeContainer = runtimeStrategy(spec.runtime).removeThrowaway(NCCL_CHECK_CONTAINER);
    return bashScript([
        HOST_LIB,
        `mkdir -p ${NCCL_CHECK_DIR}`,
        heredoc(`cat > ${NCCL_CHECK_PATH}`, spec.source ?? ncclCheckSource()),
        `sc_check_cleanup() {`,
        ...removeContainer.map((line) => `  ${line}`),
        `  rm -f ${NCCL_CHECK_PATH}`,
        `  rmdir ${NCCL_CHECK_DIR} 2>/dev/null || true`,
        `  sc_cleanup_state`,
        `}`,
        `trap sc_check_cleanup EXIT`,
        ...removeContainer,
        `sc_log ${shellQuote(`NCCL check on ${spec.node}: rank ${spec.rank} of ${spec.worldSize}, master ${spec.masterAddr}:${spec.masterPort ?? NCCL_CHECK_PORT}`)}`,
        `rc=0`,
        `timeout --kill-after=15 ${bound} ${command} || rc=$?`,
        `[ "$rc" = 0 ] || sc_log "NCCL check on ${spec.node} exited $rc"`,
        `exit "$rc"`,
    ]);
}

export interface NcclCheckResult {
    result: "pass" | "fail" | "error";
    /** Peak bus bandwidth over the sizes, GB/s. */
    busbwGBps?: number;
    algbwGBps?: number;
    passMarkGBps?: number;
    /** What NCCL used between the ranks: NET/IB, NET/Socket, P2P, SHM; or gloo/TCP. */
    transport?: string;
    /** Every key=value of the line, as printed. */
    fields: Record<string, string>;
}

/** The last `nccl-check:` result line of a run's output, parsed; undefined when there is none. */
export function parseNcclCheckResult(output: string): NcclCheckResult | undefined {
    const lines = output.split("\n").filter((line) => line.startsWith(`${NCCL_CHECK_PREFIX} `) && / result=(pass|fail|error)\b/.test(line));
    const line = lines.at(-1);
    if (line === undefined) return undefined;
    const fields: Record<string, string> = {};
    for (const match of line.slice(NCCL_CHECK_PREFIX.length).matchAll(/(\w+)=(\S+)/g)) {
        fields[match[1]] = match[2];
    }
    const number = (key: string) => (fields[key] === undefined ? undefined : Number(fields[key]));
    return {
        result: fields["result"] as NcclCheckResult["result"],
        busbwGBps: number("busbw"),
        algbwGBps: number("algbw"),
        passMarkGBps: number("pass_mark"),
        transport: fields["transport"],
        fields,
    };
}

/** Everything the NCCL check puts on one node: its step's script (run again when the NCCL environment changes) and its summary. */
export interface NcclCheckPlan {
    /** The step's create script: a comment naming the runtime env's hash (its change re-runs the check), then the check. */
    create(envHash: string): string;
    /** The summary line of a run's output: bus bandwidth, transport, pass mark (or that there is no result line). */
    summary(stdout: string): string;
}

/** The NCCL check's plan for one node, asked for once by its component. */
export function ncclCheckPlan(spec: NcclCheckSpec): NcclCheckPlan {
    const script = ncclCheckScript(spec);
    return {
        create: (envHash) => `# runtime.env ${envHash}\n${script}`,
        summary: (stdout) => {
            const parsed = parseNcclCheckResult(stdout);
            return parsed
                ? `${parsed.result}: busbw ${parsed.busbwGBps ?? "?"} GB/s over ${parsed.transport ?? "?"} (pass mark ${parsed.passMarkGBps ?? "?"} GB/s)`
                : "no result line";
        },
    };
}
