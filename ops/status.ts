// `npm run status`: what each node of a deployed stack is doing, from the stack's own config.
// Pure parts only: what to expect on each node (from the resolved config), the script a node runs
// to report (as root, over SSH), how its report is read, the rules that make a node unhealthy,
// and the table and JSON printed. ops/cli.ts does the I/O (Pulumi CLI, SSH).
import type { Config, NodeConfig, Runtime } from "../config";
import { envFileReader, pythonReadEnvValue } from "../components/render/host/envFile";
import { runtimeStrategy } from "../components/render/host/runtime";
import { bashScript, heredoc, shellQuote } from "../components/render/host/shell";
import { CONTAINER_NAMES, RAY_ENV_PATH, UNITS, VLLM_SECRETS_PATH } from "../components/render/paths";
import { rayProbeArgv } from "../components/render/ray";
import { gateStoppedFile } from "../components/render/watchdog";

/** Our units on a node, in the order the table lists them. */
export const STATUS_UNITS = [UNITS.vllm, UNITS.vllmFollow, UNITS.ray, UNITS.pfc, UNITS.firewall] as const;
export type StatusUnit = (typeof STATUS_UNITS)[number];

/** The engines' units that have a restart gate: a node reports why the gate stopped one (render/watchdog.ts). */
export const GATED_UNITS = [UNITS.vllm, UNITS.sglang] as const;

/** Seconds each probe on a node may take (the HTTP requests, Ray's node table, nvidia-smi). */
export const PROBE_SECONDS = 5;

/** What the config says one node should be running; everything the node's report is judged against. */
export interface NodeExpectation {
    node: string;
    /** `head`, `rank N` (mp executor), `ray worker`, or `retired`. */
    role: string;
    retired: boolean;
    ssh: NodeConfig["ssh"];
    runtime: Runtime;
    /** Units that must be active: the vLLM unit where a rank runs (not when paused), its follower, Ray. */
    mustRun: StatusUnit[];
    /** Rank 0 (not paused): the API port and the served name /v1/models must list. */
    api?: { port: number; servedName: string };
    /** The Ray head: the GCS address and the nodes and GPUs it must show. */
    ray?: { address: string; nodes: number; gpus: number };
    /** The interconnect addresses (without prefix) and the MTU every link must have. */
    links: { address: string; mtu: number }[];
}

/** What each node of the stack should be running, from the resolved config. */
export function statusExpectations(config: Config): NodeExpectation[] {
    const paused = config.model.paused === true;
    const executor = config.executor;
    return config.nodes.map((node) => {
        const placement = executor.servers.find((s) => s.node === node.name);
        const mustRun: StatusUnit[] = [];
        if (placement && !paused) {
            mustRun.push(UNITS.vllm);
            if (placement.multiNode && placement.rank > 0) mustRun.push(UNITS.vllmFollow);
        }
        const rayHead = executor.ray?.head === node.name;
        if (executor.ray && (rayHead || executor.ray.workers.includes(node.name))) mustRun.push(UNITS.ray);
        const role = node.retired
            ? "retired"
            : node.head
              ? "head"
              : placement?.multiNode
                ? `rank ${placement.rank}`
                : executor.ray?.workers.includes(node.name)
                  ? "ray worker"
                  : "node";
        return {
            node: node.name,
            role,
            retired: node.retired,
            ssh: node.ssh,
            runtime: node.runtime,
            mustRun,
            ...(placement?.rank === 0 && !paused ? { api: { port: config.model.apiPort, servedName: config.model.servedName } } : {}),
            ...(rayHead && executor.ray ? { ray: { address: executor.ray.address, nodes: executor.ray.expectedNodes, gpus: executor.ray.expectedGpus } } : {}),
            links: node.interconnect.map((iface) => ({ address: iface.ip, mtu: config.interconnect.mtu })),
        };
    });
}

/** The Python that asks vLLM on 127.0.0.1 for /health and, with the API key read on the node, /v1/models. */
function vllmProbePython(expect: NodeExpectation, port: number): string {
    return [
        "import json, os, sys, urllib.error, urllib.request",
        pythonReadEnvValue(envFileReader(expect.runtime)),
        `def get(path, key=None):`,
        `    headers = {"Authorization": "Bearer " + key} if key else {}`,
        `    try:`,
        `        with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:${port}" + path, headers=headers), timeout=${PROBE_SECONDS}) as r:`,
        `            return str(r.status), r.read()`,
        `    except urllib.error.HTTPError as e:`,
        `        return str(e.code), b""`,
        `    except Exception as e:`,
        `        return "none", b""`,
        `print("vllm health", get("/health")[0])`,
        `key = None`,
        `if os.path.exists(${JSON.stringify(VLLM_SECRETS_PATH)}):`,
        `    key = read_env_value(${JSON.stringify(VLLM_SECRETS_PATH)}, "VLLM_API_KEY")`,
        `if not key:`,
        `    print("vllm models nokey []")`,
        `    sys.exit(0)`,
        `code, body = get("/v1/models", key)`,
        `try:`,
        `    ids = [m["id"] for m in json.loads(body)["data"]]`,
        `except Exception:`,
        `    ids = []`,
        `print("vllm models", code, json.dumps(ids))`,
    ].join("\n");
}

/**
 * The script one node runs as root: one line per fact, `<what> <fields…>`, never a secret (the API
 * key is read on the node and only sent to 127.0.0.1). It always exits 0: the report says what is
 * wrong, {@link judgeNode} decides.
 */
export function nodeStatusScript(expect: NodeExpectation): string {
    const lines = [
        `for unit in ${STATUS_UNITS.join(" ")}; do`,
        `  systemctl show -p LoadState -p ActiveState -p SubState -p NRestarts -p Result "$unit.service" 2>/dev/null | sed "s/^/unit $unit /" || true`,
        `done`,
        // Why a restart gate stopped an engine's unit: `gate UNIT LINE`, one per line of its cause.
        ...GATED_UNITS.map((unit) => `if [ -r ${gateStoppedFile(unit)} ]; then sed 's/^/gate ${unit} /' ${gateStoppedFile(unit)}; fi`),
        `awk '/^MemTotal:|^MemAvailable:/ { print "mem", $1, $2 }' /proc/meminfo`,
        `if command -v nvidia-smi >/dev/null 2>&1; then`,
        `  timeout ${PROBE_SECONDS} nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -d ' ' | sed 's/^/gpu /' || true`,
        `fi`,
    ];
    for (const link of expect.links) {
        lines.push(
            `ifname=$(ip -o -4 addr show 2>/dev/null | awk -v a=${shellQuote(link.address)} '{ split($4, p, "/"); if (p[1] == a) { print $2; exit } }')`,
            `if [ -n "$ifname" ]; then`,
            `  echo "link ${link.address} $ifname $(cat "/sys/class/net/$ifname/operstate" 2>/dev/null || echo unknown) $(cat "/sys/class/net/$ifname/mtu" 2>/dev/null || echo 0) $(cat "/sys/class/net/$ifname/speed" 2>/dev/null || echo unknown)"`,
            `else`,
            `  echo "link ${link.address} none down 0 unknown"`,
            `fi`,
        );
    }
    if (expect.api) {
        lines.push(
            `vllm_probe=$(mktemp)`,
            heredoc(`cat > "$vllm_probe"`, vllmProbePython(expect, expect.api.port)),
            `timeout ${PROBE_SECONDS * 3} python3 "$vllm_probe" || echo "vllm health none"`,
            `rm -f "$vllm_probe"`,
        );
    }
    if (expect.ray) {
        const strategy = runtimeStrategy(expect.runtime);
        // One look at the GCS's node table (the readiness probe's, with no wait), authenticated like every member.
        lines.push(
            `if [ -r ${RAY_ENV_PATH} ]; then set -a; . ${RAY_ENV_PATH}; set +a; fi`,
            `ray_rc=0`,
            `ray_out=$(timeout 30 ${strategy.execBeside(CONTAINER_NAMES.ray, rayProbeArgv(expect.ray.address, expect.ray.nodes, expect.ray.gpus, 0))} 2>&1) || ray_rc=$?`,
            `echo "ray $ray_rc $(printf '%s\\n' "$ray_out" | tail -n 1)"`,
        );
    }
    return bashScript(lines);
}

/** One of our units as systemd shows it; `loaded: false` when the node has no such unit. */
export interface UnitState {
    loaded: boolean;
    active: string;
    sub: string;
    restarts: number;
    result: string;
}

/** A node's report, read back from {@link nodeStatusScript}'s output. */
export interface NodeReport {
    units: Partial<Record<StatusUnit, UnitState>>;
    memory?: { totalKiB: number; availableKiB: number };
    gpuMemoryMiB?: { used: number; total: number };
    links: { address: string; ifname: string; state: string; mtu: number; speedMbps?: number }[];
    vllm?: { health: string; models: string; ids: string[] };
    ray?: { ok: boolean; text: string };
    /** Units a restart gate stopped, with the cause it wrote (its first line says how many starts; then the journal's last lines). */
    stopped: Record<string, string[]>;
}

/** Reads a node's report (unknown lines are ignored). */
export function parseNodeReport(stdout: string): NodeReport {
    const report: NodeReport = { units: {}, links: [], stopped: {} };
    const units: Record<string, Record<string, string>> = {};
    const mem: Record<string, number> = {};
    for (const line of stdout.split("\n")) {
        const [what, ...rest] = line.trim().split(" ");
        if (what === "unit" && rest.length >= 2) {
            const [unit, property] = rest;
            const eq = property.indexOf("=");
            if (eq > 0)
                (units[unit] ??= {})[property.slice(0, eq)] = rest
                    .slice(1)
                    .join(" ")
                    .slice(eq + 1);
        } else if (what === "gate" && rest.length >= 1) {
            (report.stopped[rest[0]] ??= []).push(line.trim().slice(`gate ${rest[0]}`.length).trim());
        } else if (what === "mem" && rest.length === 2) {
            mem[rest[0].replace(/:$/, "")] = Number(rest[1]);
        } else if (what === "gpu" && rest.length === 1) {
            const [used, total] = rest[0].split(",").map(Number);
            if (Number.isFinite(used) && Number.isFinite(total)) report.gpuMemoryMiB = { used, total };
        } else if (what === "link" && rest.length === 5) {
            const speed = Number(rest[4]);
            report.links.push({
                address: rest[0],
                ifname: rest[1],
                state: rest[2],
                mtu: Number(rest[3]),
                ...(Number.isFinite(speed) && speed > 0 ? { speedMbps: speed } : {}),
            });
        } else if (what === "vllm" && rest[0] === "health") {
            report.vllm = { health: rest[1] ?? "none", models: report.vllm?.models ?? "none", ids: report.vllm?.ids ?? [] };
        } else if (what === "vllm" && rest[0] === "models") {
            let ids: string[] = [];
            try {
                const parsed = JSON.parse(rest.slice(2).join(" ")) as unknown;
                if (Array.isArray(parsed)) ids = parsed.map(String);
            } catch {
                ids = [];
            }
            report.vllm = { health: report.vllm?.health ?? "none", models: rest[1] ?? "none", ids };
        } else if (what === "ray") {
            report.ray = {
                ok: rest[0] === "0",
                text: rest
                    .slice(1)
                    .join(" ")
                    .replace(/^ray: /, "")
                    .replace(/ after [0-9.]+ s$/, ""),
            };
        }
    }
    for (const unit of STATUS_UNITS) {
        const props = units[unit];
        if (props === undefined) continue;
        report.units[unit] = {
            loaded: props.LoadState === "loaded",
            active: props.ActiveState ?? "unknown",
            sub: props.SubState ?? "unknown",
            restarts: Number(props.NRestarts ?? 0) || 0,
            result: props.Result ?? "unknown",
        };
    }
    if (mem.MemTotal !== undefined && mem.MemAvailable !== undefined) report.memory = { totalKiB: mem.MemTotal, availableKiB: mem.MemAvailable };
    return report;
}

/** One node's verdict: its report (none when it could not be asked) and what is wrong, each naming the node. */
export interface NodeStatus {
    node: string;
    role: string;
    report?: NodeReport;
    /** Why the node could not be asked (SSH, host key). */
    error?: string;
    problems: string[];
}

/**
 * The rules: a node is unhealthy when it cannot be asked; when a unit it must run is not active
 * (or not there); when any of our units failed; when rank 0's /health or /v1/models does not
 * answer 200 or does not list the served name; when the Ray head does not show every node and
 * GPU; when an interconnect address is on no interface, or its link is not up, or its MTU is not
 * the configured one. Memory and link speed are shown, never judged.
 */
export function judgeNode(expect: NodeExpectation, report: NodeReport | undefined, error?: string): NodeStatus {
    const base = { node: expect.node, role: expect.role };
    if (expect.retired) return { ...base, problems: [] };
    if (report === undefined) return { ...base, error: error ?? "no report", problems: [`${expect.node}: cannot ask the node: ${error ?? "no report"}`] };
    const problems: string[] = [];
    for (const unit of expect.mustRun) {
        const state = report.units[unit];
        if (!state?.loaded) problems.push(`${expect.node}: ${unit}.service is not installed`);
        else if (state.active !== "active") problems.push(`${expect.node}: ${unit}.service is ${state.active} (${state.sub}, result ${state.result})`);
    }
    for (const unit of STATUS_UNITS) {
        const state = report.units[unit];
        if (state?.loaded && state.active === "failed" && !expect.mustRun.includes(unit)) {
            problems.push(`${expect.node}: ${unit}.service failed (result ${state.result})`);
        }
    }
    for (const [unit, cause] of Object.entries(report.stopped)) {
        problems.push(
            `${expect.node}: ${cause[0] ?? `${unit} was stopped by its restart gate`}. Last lines of its journal: ` +
                (cause.slice(1).join(" | ") || "none") +
                `. Next: fix the cause (journalctl -u ${unit}.service on ${expect.node}), then run pulumi up --refresh, which starts it again`,
        );
    }
    if (expect.api) {
        const vllm = report.vllm;
        if (vllm === undefined || vllm.health !== "200")
            problems.push(`${expect.node}: vLLM /health on port ${expect.api.port} answered ${vllm?.health ?? "nothing"}`);
        else if (vllm.models !== "200") problems.push(`${expect.node}: vLLM /v1/models answered ${vllm.models}`);
        else if (!vllm.ids.includes(expect.api.servedName))
            problems.push(`${expect.node}: vLLM /v1/models lists ${JSON.stringify(vllm.ids)}, not ${JSON.stringify(expect.api.servedName)}`);
    }
    if (expect.ray && !report.ray?.ok) {
        problems.push(`${expect.node}: Ray does not show ${expect.ray.nodes} nodes and ${expect.ray.gpus} GPUs: ${report.ray?.text || "no answer"}`);
    }
    for (const link of expect.links) {
        const seen = report.links.find((l) => l.address === link.address);
        if (seen === undefined || seen.ifname === "none") problems.push(`${expect.node}: no interface has the interconnect address ${link.address}`);
        else if (seen.state !== "up") problems.push(`${expect.node}: ${seen.ifname} (${link.address}) is ${seen.state}`);
        else if (seen.mtu !== link.mtu) problems.push(`${expect.node}: ${seen.ifname} has MTU ${seen.mtu}, not ${link.mtu}`);
    }
    return { ...base, report, problems };
}

/** The exit status: 0 when no node has a problem, 1 otherwise. */
export function statusExitCode(statuses: readonly NodeStatus[]): number {
    return statuses.some((s) => s.problems.length > 0) ? 1 : 0;
}

const UNIT_SHORT: Record<StatusUnit, string> = {
    [UNITS.vllm]: "vllm",
    [UNITS.vllmFollow]: "follow",
    [UNITS.ray]: "ray",
    [UNITS.pfc]: "pfc",
    [UNITS.firewall]: "firewall",
};

function gib(kib: number): string {
    return (kib / 1024 / 1024).toFixed(1);
}

/** The cells of one node's row: node, role, units, vLLM, Ray, memory, links, health. */
export function statusRow(status: NodeStatus): string[] {
    const r = status.report;
    const health = status.role === "retired" ? "retired" : status.problems.length === 0 ? "ok" : "UNHEALTHY";
    if (r === undefined) return [status.node, status.role, status.error ? `unreachable: ${status.error}` : "-", "-", "-", "-", "-", health];
    const units =
        STATUS_UNITS.filter((u) => r.units[u]?.loaded)
            .map((u) => {
                const s = r.units[u] as UnitState;
                return `${UNIT_SHORT[u]}=${s.active}${s.restarts > 0 ? `(${s.restarts} restarts)` : ""}`;
            })
            .join(" ") || "none";
    const vllm = r.vllm ? `health ${r.vllm.health}, models ${r.vllm.models} ${r.vllm.ids.join(",") || "-"}` : "-";
    const ray = r.ray ? r.ray.text : "-";
    const memory = r.memory
        ? `${gib(r.memory.totalKiB - r.memory.availableKiB)}/${gib(r.memory.totalKiB)} GiB` +
          (r.gpuMemoryMiB ? `, GPU ${(r.gpuMemoryMiB.used / 1024).toFixed(1)}/${(r.gpuMemoryMiB.total / 1024).toFixed(1)} GiB` : "")
        : "-";
    const links = r.links.map((l) => `${l.ifname} ${l.state} mtu ${l.mtu}${l.speedMbps ? ` ${l.speedMbps / 1000}G` : ""}`).join("; ") || "-";
    return [status.node, status.role, units, vllm, ray, memory, links, health];
}

export const STATUS_HEADER = ["NODE", "ROLE", "UNITS", "VLLM", "RAY", "MEMORY USED", "INTERCONNECT", "HEALTH"];

/** The table (one row per node, columns padded), then each problem on its own line. */
export function renderStatus(statuses: readonly NodeStatus[], paused: boolean): string {
    const rows = [STATUS_HEADER, ...statuses.map(statusRow)];
    const widths = STATUS_HEADER.map((_, i) => Math.max(...rows.map((row) => row[i].length)));
    const table = rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join("  "));
    const problems = statuses.flatMap((s) => s.problems);
    return [
        ...table,
        ...(paused ? ["", "serving is paused (model.paused: true): no vLLM unit is expected"] : []),
        ...(problems.length > 0 ? ["", `unhealthy (${problems.length}):`, ...problems.map((p) => `  ${p}`)] : ["", "healthy"]),
    ].join("\n");
}

/** The `--json` document. */
export function statusJson(stack: string, statuses: readonly NodeStatus[], paused: boolean): string {
    return JSON.stringify({ stack, paused, healthy: statusExitCode(statuses) === 0, nodes: statuses }, null, 2);
}
