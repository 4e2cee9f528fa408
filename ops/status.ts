// `npm run status`: what each node of a deployed stack is doing, from the stack's own config.
// Pure parts only: what to expect on each node (from the resolved config), the script a node runs
// to report (as root, over SSH), how its report is read, the rules that make a node unhealthy,
// and the table and JSON printed. ops/cli.ts does the I/O (Pulumi CLI, SSH).
import type { Config, NodeConfig, Runtime } from "../config";
import { type EngineOps, engineStrategy } from "../components/render/engine";
import { runtimeStrategy } from "../components/render/host/runtime";
import { bashScript, heredoc, shellQuote } from "../components/render/host/shell";
import { SCRUB_PY } from "../components/render/host/journal";
import { CONTAINER_NAMES, RAY_ENV_PATH, UNITS, unitPath } from "../config/hostPaths";
import { rayProbeArgv } from "../components/render/ray";
import { gateStoppedFile } from "../components/render/watchdog";

/** Our units on a node, in the order the table lists them (either engine's: a node shows the ones it has). */
export const STATUS_UNITS = [
    UNITS.vllm,
    UNITS.vllmFollow,
    UNITS.sglang,
    UNITS.sglangFollow,
    UNITS.ray,
    UNITS.openWebui,
    UNITS.nodeExporter,
    UNITS.prometheus,
    UNITS.pfc,
    UNITS.firewall,
] as const;
export type StatusUnit = (typeof STATUS_UNITS)[number];

/** `name` as one of {@link STATUS_UNITS} (an engine's unit the list lacks is a bug here, not a node's problem). */
function statusUnit(name: string): StatusUnit {
    const unit = STATUS_UNITS.find((u) => u === name);
    if (unit === undefined) throw new Error(`internal: status does not list the unit ${name}`);
    return unit;
}

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
    /** The serving engine (model.engine): its name, units and API key. */
    engine: EngineOps;
    /** Units that must be active: the engine's unit where a rank runs (not when paused), its follower, Ray, Open WebUI, the metrics units. */
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
    const engine = engineStrategy(config.engine).ops;
    return config.nodes.map((node) => {
        const placement = executor.servers.find((s) => s.node === node.name);
        const mustRun: StatusUnit[] = [];
        if (placement && !paused) {
            mustRun.push(statusUnit(engine.unit));
            if (placement.multiNode && placement.rank > 0) mustRun.push(statusUnit(engine.followUnit));
        }
        const rayHead = executor.ray?.head === node.name;
        if (executor.ray && (rayHead || executor.ray.workers.includes(node.name))) mustRun.push(UNITS.ray);
        if (config.openWebui?.node === node.name) mustRun.push(UNITS.openWebui);
        if (config.metrics !== undefined) mustRun.push(...(node.head ? [UNITS.nodeExporter, UNITS.prometheus] : [UNITS.nodeExporter]));
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
            engine,
            mustRun,
            ...(placement?.rank === 0 && !paused ? { api: { port: config.model.apiPort, servedName: config.model.servedName } } : {}),
            ...(rayHead && executor.ray ? { ray: { address: executor.ray.address, nodes: executor.ray.expectedNodes, gpus: executor.ray.expectedGpus } } : {}),
            links: node.interconnect.map((iface) => ({ address: iface.ip, mtu: config.interconnect.mtu })),
        };
    });
}

/**
 * The Python that asks the engine on 127.0.0.1 for /health, its /metrics (the requests running and
 * waiting, the KV cache's use: `api load {...}`) and, with the API key read on the node, /v1/models.
 */
export function engineApiProbePython(expect: NodeExpectation, port: number): string {
    return [
        "import json, os, sys, urllib.error, urllib.request",
        `def get(path, key=None):`,
        `    headers = {"Authorization": "Bearer " + key} if key else {}`,
        `    try:`,
        `        with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:${port}" + path, headers=headers), timeout=${PROBE_SECONDS}) as r:`,
        `            return str(r.status), r.read()`,
        `    except urllib.error.HTTPError as e:`,
        `        return str(e.code), b""`,
        `    except Exception as e:`,
        `        return "none", b""`,
        `print("api health", get("/health")[0])`,
        // The gauges, summed over their label sets (one per served name).
        `wanted = {metric: what for what, metric in ${JSON.stringify(expect.engine.loadMetrics)}.items()}`,
        `load = {}`,
        `for line in get("/metrics")[1].decode("utf-8", "replace").splitlines():`,
        `    fields = line.split("{", 1)[0].split()`,
        `    if not fields or fields[0] not in wanted:`,
        `        continue`,
        `    try:`,
        `        value = float(line.rsplit(" ", 1)[-1])`,
        `    except ValueError:`,
        `        continue`,
        `    load[wanted[fields[0]]] = load.get(wanted[fields[0]], 0.0) + value`,
        `print("api load", json.dumps(load))`,
        ...expect.engine.readApiKeyPython(expect.runtime),
        `if not key:`,
        `    print("api models nokey []")`,
        `    sys.exit(0)`,
        `code, body = get("/v1/models", key)`,
        `try:`,
        `    ids = [m["id"] for m in json.loads(body)["data"]]`,
        `except Exception:`,
        `    ids = []`,
        `print("api models", code, json.dumps(ids))`,
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
        // (Its journal lines scrubbed of the stack's secrets, as every tail we print.)
        ...GATED_UNITS.map(
            (unit) =>
                `if [ -r ${gateStoppedFile(unit)} ]; then python3 -c ${shellQuote(SCRUB_PY)} < ${gateStoppedFile(unit)} | sed 's/^/gate ${unit} /' || true; fi`,
        ),
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
            `api_probe=$(mktemp)`,
            heredoc(`cat > "$api_probe"`, engineApiProbePython(expect, expect.api.port)),
            `timeout ${PROBE_SECONDS * 3} python3 "$api_probe" || echo "api health none"`,
            `rm -f "$api_probe"`,
        );
    }
    if (runtimeStrategy(expect.runtime).image !== undefined) lines.push(...imageReportLines(expect.runtime));
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

/**
 * The report's lines on the image (docker runtime): `image tag <ID>` (the ID the tag names now;
 * nothing after `tag` when the node has no such image), and per unit of ours that starts an image by
 * its ID (the serving units, RuntimeStrategy.pinned) `image unit <unit> <ID> present|absent`.
 */
function imageReportLines(runtime: Runtime): string[] {
    return [
        ...runtimeStrategy(runtime).imageIdLines("image tag "),
        `for unit in ${Object.values(UNITS).join(" ")}; do`,
        `  f=${unitPath("$unit")}`,
        `  [ -r "$f" ] || continue`,
        `  id=$(grep -m 1 '^ExecStart=' "$f" | grep -o -E -e ' -- sha256:[0-9a-f]{64}( |$)' | head -n 1 | tr -d ' ' | sed 's/^--//' || true)`,
        `  [ -n "$id" ] || continue`,
        `  if docker image inspect -- "$id" >/dev/null 2>&1; then present=present; else present=absent; fi`,
        `  echo "image unit $unit $id $present"`,
        `done`,
    ];
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
    /** Rank 0's engine API: /health's status, /v1/models' status and the model names it lists. */
    api?: { health: string; models: string; ids: string[] };
    /** Rank 0's /metrics: requests running and waiting, and the KV cache's use (0-1), where the engine serves them. */
    load?: { running?: number; waiting?: number; kvCache?: number };
    ray?: { ok: boolean; text: string };
    /** Docker runtime: the ID the tag names now (undefined: no such image), and the ID each unit of ours starts, and whether the node has it. */
    image?: { tagId?: string; units: { unit: string; id: string; present: boolean }[] };
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
        } else if (what === "api" && rest[0] === "health") {
            report.api = { health: rest[1] ?? "none", models: report.api?.models ?? "none", ids: report.api?.ids ?? [] };
        } else if (what === "api" && rest[0] === "models") {
            let ids: string[] = [];
            try {
                const parsed = JSON.parse(rest.slice(2).join(" ")) as unknown;
                if (Array.isArray(parsed)) ids = parsed.map(String);
            } catch {
                ids = [];
            }
            report.api = { health: report.api?.health ?? "none", models: rest[1] ?? "none", ids };
        } else if (what === "api" && rest[0] === "load") {
            try {
                const parsed = JSON.parse(rest.slice(1).join(" ")) as Record<string, unknown>;
                const load: NonNullable<NodeReport["load"]> = {};
                for (const key of ["running", "waiting", "kvCache"] as const) if (typeof parsed[key] === "number") load[key] = parsed[key];
                if (Object.keys(load).length > 0) report.load = load;
            } catch {
                // not JSON: no load shown
            }
        } else if (what === "image" && rest[0] === "tag") {
            report.image = { units: report.image?.units ?? [], ...(rest[1] ? { tagId: rest[1] } : {}) };
        } else if (what === "image" && rest[0] === "unit" && rest.length === 4) {
            report.image = { ...report.image, units: [...(report.image?.units ?? []), { unit: rest[1], id: rest[2], present: rest[3] === "present" }] };
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
    /** What differs from what up deployed without keeping the node from serving (the image its tag names now). Defaults to none. */
    drift?: string[];
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
        const api = report.api;
        const engine = expect.engine.label;
        if (api === undefined || api.health !== "200")
            problems.push(`${expect.node}: ${engine} /health on port ${expect.api.port} answered ${api?.health ?? "nothing"}`);
        else if (api.models !== "200") problems.push(`${expect.node}: ${engine} /v1/models answered ${api.models}`);
        else if (!api.ids.includes(expect.api.servedName))
            problems.push(`${expect.node}: ${engine} /v1/models lists ${JSON.stringify(api.ids)}, not ${JSON.stringify(expect.api.servedName)}`);
    }
    if (expect.ray && !report.ray?.ok) {
        problems.push(`${expect.node}: Ray does not show ${expect.ray.nodes} nodes and ${expect.ray.gpus} GPUs: ${report.ray?.text || "no answer"}`);
    }
    const { problems: imageProblems, drift } = judgeImage(expect, report);
    problems.push(...imageProblems);
    for (const link of expect.links) {
        const seen = report.links.find((l) => l.address === link.address);
        if (seen === undefined || seen.ifname === "none") problems.push(`${expect.node}: no interface has the interconnect address ${link.address}`);
        else if (seen.state !== "up") problems.push(`${expect.node}: ${seen.ifname} (${link.address}) is ${seen.state}`);
        else if (seen.mtu !== link.mtu) problems.push(`${expect.node}: ${seen.ifname} has MTU ${seen.mtu}, not ${link.mtu}`);
    }
    return { ...base, report, problems, ...(drift.length > 0 ? { drift } : {}) };
}

/**
 * The image (docker runtime): our units start it by the ID up found (RuntimeStrategy.pinned). The
 * tag naming another image now (a `docker pull` of a republished tag, a re-tag) is drift: the units
 * still run what up deployed, and `pulumi up --refresh` judges the new ID (docs/operations.md, "Image
 * identity"). An ID the node no longer has is a problem: the unit's next start fails.
 */
function judgeImage(expect: NodeExpectation, report: NodeReport): { problems: string[]; drift: string[] } {
    const tag = runtimeStrategy(expect.runtime).image;
    const image = report.image;
    if (tag === undefined || image === undefined) return { problems: [], drift: [] };
    const problems = image.units
        .filter((u) => !u.present)
        .map(
            (u) =>
                `${expect.node}: ${u.unit}.service starts the image ${u.id}, which is no longer on the node: its next start fails. ` +
                `Fix: docker pull ${tag}, then pulumi up --refresh`,
        );
    const drift: string[] = [];
    const byId = new Map<string, string[]>();
    for (const u of image.units.filter((u) => u.id !== image.tagId)) byId.set(u.id, [...(byId.get(u.id) ?? []), `${u.unit}.service`]);
    for (const [id, units] of byId) {
        drift.push(
            `${expect.node}: the tag ${tag} names ${image.tagId ?? "no image"} now; ${units.join(" and ")} ${units.length > 1 ? "start" : "starts"} ${id}, ` +
                "the image up deployed (pulumi preview --refresh shows it; pulumi up --refresh refuses while the nodes' IDs differ, and otherwise restarts onto the new one)",
        );
    }
    return { problems, drift };
}

/** The exit status: 0 when no node has a problem, 1 otherwise. */
export function statusExitCode(statuses: readonly NodeStatus[]): number {
    return statuses.some((s) => s.problems.length > 0) ? 1 : 0;
}

const UNIT_SHORT: Record<StatusUnit, string> = {
    [UNITS.vllm]: "vllm",
    [UNITS.vllmFollow]: "follow",
    [UNITS.sglang]: "sglang",
    [UNITS.sglangFollow]: "follow",
    [UNITS.ray]: "ray",
    [UNITS.openWebui]: "open-webui",
    [UNITS.nodeExporter]: "exporter",
    [UNITS.prometheus]: "prometheus",
    [UNITS.pfc]: "pfc",
    [UNITS.firewall]: "firewall",
};

function gib(kib: number): string {
    return (kib / 1024 / 1024).toFixed(1);
}

/** The cells of one node's row: node, role, units, the engine's API, Ray, memory, links, health. */
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
    const load = r.load
        ? `; ${r.load.running ?? "?"} running, ${r.load.waiting ?? "?"} waiting` +
          (r.load.kvCache !== undefined ? `, KV cache ${(r.load.kvCache * 100).toFixed(0)}%` : "")
        : "";
    const api = r.api ? `health ${r.api.health}, models ${r.api.models} ${r.api.ids.join(",") || "-"}${load}` : "-";
    const ray = r.ray ? r.ray.text : "-";
    const memory = r.memory
        ? `${gib(r.memory.totalKiB - r.memory.availableKiB)}/${gib(r.memory.totalKiB)} GiB` +
          (r.gpuMemoryMiB ? `, GPU ${(r.gpuMemoryMiB.used / 1024).toFixed(1)}/${(r.gpuMemoryMiB.total / 1024).toFixed(1)} GiB` : "")
        : "-";
    const links = r.links.map((l) => `${l.ifname} ${l.state} mtu ${l.mtu}${l.speedMbps ? ` ${l.speedMbps / 1000}G` : ""}`).join("; ") || "-";
    return [status.node, status.role, units, api, ray, memory, links, health];
}

export const STATUS_HEADER = ["NODE", "ROLE", "UNITS", "ENGINE API", "RAY", "MEMORY USED", "INTERCONNECT", "HEALTH"];

/** The table (one row per node, columns padded), then each problem on its own line. */
export function renderStatus(statuses: readonly NodeStatus[], paused: boolean): string {
    const rows = [STATUS_HEADER, ...statuses.map(statusRow)];
    const widths = STATUS_HEADER.map((_, i) => Math.max(...rows.map((row) => row[i].length)));
    const table = rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join("  "));
    const problems = statuses.flatMap((s) => s.problems);
    const drift = statuses.flatMap((s) => s.drift ?? []);
    return [
        ...table,
        ...(paused ? ["", "serving is paused (model.paused: true): no engine unit is expected"] : []),
        ...(drift.length > 0 ? ["", `drift (${drift.length}), the units still run what up deployed:`, ...drift.map((d) => `  ${d}`)] : []),
        ...(problems.length > 0 ? ["", `unhealthy (${problems.length}):`, ...problems.map((p) => `  ${p}`)] : ["", "healthy"]),
    ].join("\n");
}

/** The `--json` document. */
export function statusJson(stack: string, statuses: readonly NodeStatus[], paused: boolean): string {
    return JSON.stringify({ stack, paused, healthy: statusExitCode(statuses) === 0, nodes: statuses }, null, 2);
}
