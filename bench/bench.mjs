#!/usr/bin/env node
// `npm run bench`: how long the product takes on the lab, by cluster size, next to `ray up`.
// A benchmark, not a test: it asserts nothing but that each step succeeded, and prints one
// `BENCH` line per measurement (the stable raw format; see docs/speed.md) and a summary table.
//
// Per size N (BENCH_SIZES, default 2,4,8): takes the lab lock (as test/lab/lab-harness.ts does),
// boots `lab/lab.sh up --topology thor-switch-N` (N Thors, venv runtime, one switch), then
// BENCH_REPS times (default 3): cold `up` (bare nodes → chat answered, split per layer), no-op
// `up`, `preview`, a model switch (config change → the new model answering), `destroy`. Before the
// last destroy, the baseline: our Ray units stopped, `ray up` (local provider, run from the
// head) with the very `ray start` argv our units run, timed to a formed cluster, twice.
// Then `lab/lab.sh down` and the lock is given back, so one size holds the lab for minutes only.
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import timeline from "./timeline.js";

/**
 * @typedef {import("./timeline.js").Step} Step
 * @typedef {import("./timeline.js").Timing} Timing
 * @typedef {import("./timeline.js").TimedEvent} TimedEvent
 * @typedef {{ source: string, servedName: string }} Model
 * @typedef {{ seconds: number, out: string }} Timed
 * @typedef {{ start?: number, end?: number }} StepSpan
 * @typedef {{ prelude?: number, firstStep?: number, lastStep?: number, summary?: number }} Marks
 * @typedef {{ resources: number, custom: number, components: number, writes: number, stateBytes: number }} Shape
 * @typedef {{ up: number, formed: number | undefined, start: number }} RayUpTime
 */

/** @param {unknown} err */
const messageOf = (err) => (err instanceof Error ? err.message : String(err));

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SIZES = (process.env.BENCH_SIZES ?? "2,4,8").split(",").map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const LOCK = path.join(os.tmpdir(), "spark-cluster-lab-tests.lock");
/** Where the timelines (SVG per size), their inputs and the table of medians go. */
const OUT = path.resolve(process.env.BENCH_OUT ?? path.join(root, "bench", "out"));
const LAB_KEY = path.join(root, "lab", ".state", "id_ed25519");
/**
 * BENCH_NODE_NICE (0-19, default 0): the lab's nodes run at this nice value (lab/lab.sh's
 * LAB_NODE_NICE), so that the control plane measured here gets the host's cores before them when
 * both want one, as it would on real hardware, where the nodes are other machines.
 */
const NODE_NICE = process.env.BENCH_NODE_NICE ?? "0";
const THORS = ["thor-a", "thor-b", "thor-c", "thor-d", "thor-e", "thor-f", "thor-g", "thor-h"];
/** @param {number} i */
const mgmt = (i) => `10.77.0.${21 + i}`;
const MODELS = [
    { source: "lab/tiny-chat", servedName: "tiny-chat" },
    { source: "Qwen/Qwen2.5-0.5B-Instruct", servedName: "qwen-small" },
];
/**
 * Layers by step name (the resource's name, as components/ name them).
 * @type {[string, RegExp][]}
 */
const LAYERS = [
    ["ssh", /-(ssh|probe)$/],
    ["netplan", /-interconnect-apply$/],
    ["pfc", /-roce-apply$/],
    ["nccl", /-nccl-(files|check)/],
    ["firewall", /-firewall-apply$/],
    // As the issue measures it: the head's unit started → the head ready (every node and GPU).
    ["ray", /-ray-(head-(unit|ready)|worker-unit)$/],
    ["model", /-model-/],
    ["vllm", /-vllm-/],
];

/** @type {{ nodes: number, metric: string, seconds: number }[]} */
const results = [];
const now = () => performance.now() / 1000;
/** Unix seconds, the clock of our provider's timing log. */
const epoch = () => (performance.timeOrigin + performance.now()) / 1000;
/** @param {string} msg */
const log = (msg) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
/**
 * @param {number} nodes
 * @param {number} rep
 * @param {string} metric
 * @param {number} seconds
 */
function record(nodes, rep, metric, seconds) {
    results.push({ nodes, metric, seconds });
    console.log(`BENCH v1 nodes=${nodes} rep=${rep} metric=${metric} seconds=${seconds.toFixed(2)}`);
}

// --- the lab lock (test/lab/lab-harness.ts: an atomic mkdir with the owner's pid in it) ---------
/** @param {number} pid */
function alive(pid) {
    try {
        process.kill(pid, 0);
        return true;
    } catch {
        return false;
    }
}
async function takeLock() {
    const deadline = Date.now() + 3600_000;
    for (;;) {
        try {
            fs.mkdirSync(LOCK);
            fs.writeFileSync(path.join(LOCK, "pid"), String(process.pid));
            return;
        } catch (err) {
            if (/** @type {NodeJS.ErrnoException} */ (err).code !== "EEXIST") throw err;
            const owner = Number(fs.readFileSync(path.join(LOCK, "pid"), { encoding: "utf8", flag: "a+" }) || "0");
            if (owner && !alive(owner)) {
                fs.rmSync(LOCK, { recursive: true, force: true });
                continue;
            }
            if (Date.now() > deadline) throw new Error(`the lab lock ${LOCK} is still held by pid ${owner} after an hour`);
            log(`the lab is in use (lock ${LOCK}, pid ${owner || "?"}): waiting`);
            await new Promise((r) => setTimeout(r, 10_000));
        }
    }
}
function giveLock() {
    try {
        if (fs.readFileSync(path.join(LOCK, "pid"), "utf8") === String(process.pid)) fs.rmSync(LOCK, { recursive: true, force: true });
    } catch {
        // not ours
    }
}

// --- running things ---------------------------------------------------------------------------
/**
 * @param {string} file
 * @param {string[]} args
 * @param {Record<string, string>} [env]
 */
function sh(file, args, env = {}, timeoutS = 1200) {
    try {
        return execFileSync(file, args, {
            cwd: root,
            encoding: "utf8",
            timeout: timeoutS * 1000,
            maxBuffer: 256 * 2 ** 20, // `stack export` of an 8-node stack is over the 1 MiB default
            stdio: ["ignore", "pipe", "pipe"],
            env: { ...process.env, ...env },
        });
    } catch (err) {
        const e = /** @type {Error & { stdout?: string, stderr?: string }} */ (err);
        throw new Error(`${path.basename(file)} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
    }
}
/**
 * @param {string} host
 * @param {string} script
 */
const sshArgs = (host, script) => [
    "-i",
    LAB_KEY,
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "BatchMode=yes",
    `root@${host}`,
    script,
];
/**
 * @param {string} host
 * @param {string} script
 */
const ssh = (host, script, timeoutS = 300) => sh("ssh", sshArgs(host, script), {}, timeoutS);
/**
 * Times a command; resolves with its seconds.
 * @param {string} file
 * @param {string[]} args
 * @param {Record<string, string>} [env]
 * @param {() => void} [onLine]
 * @param {(child: import("node:child_process").ChildProcess) => void} [onStart]
 * @returns {Promise<Timed>}
 */
function timed(file, args, env = {}, onLine = undefined, onStart = undefined) {
    return new Promise((resolve, reject) => {
        const start = now();
        const child = spawn(file, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
        onStart?.(child);
        let out = "";
        child.stdout.on("data", (d) => (out += d));
        child.stderr.on("data", (d) => (out += d));
        const poll = onLine ? setInterval(onLine, 100) : undefined;
        child.on("close", (code) => {
            if (poll) clearInterval(poll);
            if (onLine) onLine();
            const seconds = now() - start;
            if (code === 0) resolve({ seconds, out });
            else reject(new Error(`${path.basename(file)} ${args.join(" ")} exited ${code}:\n${out.slice(-6000)}`));
        });
    });
}

// --- the control plane's CPU, by process ---------------------------------------------------------
const CLK_TCK = 100; // USER_HZ on Linux
/**
 * CPU seconds of each process under `root` (the bench's child), sampled from /proc: the last value
 * seen per process, so a process's last 0.1 s before it exits may be missed.
 */
class ProcessCpu {
    constructor() {
        /** @type {number | undefined} */
        this.root = undefined;
        /** @type {Map<number, { comm: string, args: string, cpu: number }>} */
        this.seen = new Map();
    }
    sample() {
        if (!this.root) return;
        /** @type {Map<number, { ppid: number, comm: string, cpu: number }>} */
        const table = new Map();
        for (const entry of fs.readdirSync("/proc")) {
            if (!/^\d+$/.test(entry)) continue;
            let stat;
            try {
                stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
            } catch {
                continue; // gone
            }
            const close = stat.lastIndexOf(")");
            const comm = stat.slice(stat.indexOf("(") + 1, close);
            const f = stat.slice(close + 2).split(" ");
            table.set(Number(entry), { ppid: Number(f[1]), comm, cpu: (Number(f[11]) + Number(f[12])) / CLK_TCK });
        }
        const mine = new Set([this.root]);
        for (let grew = true; grew;) {
            grew = false;
            for (const [pid, p] of table) {
                if (!mine.has(pid) && mine.has(p.ppid)) {
                    mine.add(pid);
                    grew = true;
                }
            }
        }
        for (const pid of mine) {
            const p = table.get(pid);
            if (!p) continue;
            const known = this.seen.get(pid);
            let args = known?.args;
            if (args === undefined) {
                try {
                    args = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
                } catch {
                    args = "";
                }
            }
            this.seen.set(pid, { comm: p.comm, args, cpu: p.cpu });
        }
    }
    /** CPU seconds by role: the CLI's run, its other invocations (pulumi.sh's `stack select`), the plugins, Node.js. */
    byRole() {
        /** @type {Record<"cli" | "cli_other" | "language_host" | "provider" | "node" | "other", number>} */
        const roles = { cli: 0, cli_other: 0, language_host: 0, provider: 0, node: 0, other: 0 };
        for (const p of this.seen.values()) {
            const role =
                p.comm === "pulumi"
                    ? / (up|destroy|preview) /.test(` ${p.args} `)
                        ? "cli"
                        : "cli_other"
                    : p.comm.startsWith("pulumi-language")
                      ? "language_host"
                      : p.comm.startsWith("pulumi-resource")
                        ? "provider"
                        : p.comm === "node" || p.comm.startsWith("node")
                          ? "node"
                          : "other";
            roles[role] += p.cpu;
        }
        return roles;
    }
}

// --- the stack --------------------------------------------------------------------------------
/**
 * @param {number} n
 * @param {Model} model
 */
function stackConfig(n, model) {
    const dev = fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8");
    /** @param {RegExp} re */
    const keep = (re) => {
        const m = re.exec(dev);
        if (!m) throw new Error(`Pulumi.dev.yaml has no ${re}`);
        return m[0];
    };
    const nodes = THORS.slice(0, n).flatMap((name, i) => [
        `    - name: ${name}`,
        "      kind: thor",
        ...(i === 0 ? ["      head: true"] : []),
        `      ssh: {host: ${mgmt(i)}}`,
        "      gpus: 1",
        "      runtime: {kind: venv, path: /opt/lab-venv}",
        "      interconnect:",
        `        - {name: enp1s0f1np1, address: 192.168.100.${21 + i}/24}`,
    ]);
    return [
        "config:",
        "  spark-cluster:nodes:",
        ...nodes,
        keep(/^ {2}spark-cluster:sshPrivateKeyPath: .*$/m),
        "  spark-cluster:interconnect: {topology: switch, mtu: 9000}",
        keep(/^ {2}spark-cluster:ray:\n\s+objectStoreMemoryMb: .*$/m),
        keep(/^ {2}spark-cluster:check:\n\s+enabled: false$/m),
        `  spark-cluster:model: {source: ${model.source}, servedName: ${model.servedName}, tensorParallel: 1, pipelineParallel: ${n}, executor: ray}`,
        keep(/^ {2}spark-cluster:apiKey:\n\s+secure: .*$/m),
        keep(/^encryptionsalt: .*$/m),
        "",
    ].join("\n");
}

class Stack {
    /** @param {number} n */
    constructor(n) {
        this.n = n;
        this.work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-bench-"));
        this.backend = path.join(this.work, "backend");
        this.configFile = path.join(this.work, "Pulumi.dev.yaml");
        fs.mkdirSync(this.backend);
        // ?metadata=skip as in scripts/env.sh's default backend: what a user of the scripts runs.
        this.env = { PULUMI_BACKEND_URL: `file://${this.backend}?metadata=skip`, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "" };
        /** @type {Model} */
        this.model = MODELS[0];
        this.setModel(MODELS[0]);
    }
    /** @param {Model} model */
    setModel(model) {
        this.model = model;
        fs.writeFileSync(this.configFile, stackConfig(this.n, model));
    }
    /**
     * @param {string[]} a
     * @returns {[string, string[]]}
     */
    args(...a) {
        return [path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", ...a, "--config-file", this.configFile]];
    }
    /** @param {string[]} a */
    run(...a) {
        const [file, args] = this.args(...a);
        return timed(file, args, this.env);
    }
    /**
     * An `up` (or `preview`) with the engine's event log read as it grows, by wall clock: each
     * step's start and end, and the phases of the run.
     * @param {string[]} extra
     */
    async upWithLayers(...extra) {
        const events = path.join(this.work, `events-${Date.now()}.jsonl`);
        fs.writeFileSync(events, "");
        /** @type {Map<string, StepSpan>} */
        const steps = new Map();
        /** @type {Marks} the wall clock of the first prelude, first/last step event, summary */
        const marks = {};
        /** @type {TimedEvent[]} t: Unix seconds when the line arrived */
        const timedEvents = [];
        let offset = 0;
        let rest = "";
        const read = () => {
            const fd = fs.openSync(events, "r");
            const size = fs.fstatSync(fd).size;
            if (size > offset) {
                const buf = Buffer.alloc(size - offset);
                fs.readSync(fd, buf, 0, buf.length, offset);
                offset = size;
                const lines = (rest + buf.toString("utf8")).split("\n");
                rest = lines.pop() ?? "";
                const t = now();
                const te = epoch();
                for (const line of lines) {
                    if (!line.trim()) continue;
                    const e = JSON.parse(line);
                    timedEvents.push({ t: te, event: e });
                    if (e.preludeEvent) marks.prelude ??= t;
                    if (e.resourcePreEvent) marks.firstStep ??= t;
                    if (e.resourcePreEvent || e.resOutputsEvent) marks.lastStep = t;
                    if (e.summaryEvent) marks.summary ??= t;
                    const pre = e.resourcePreEvent?.metadata;
                    const post = e.resOutputsEvent?.metadata;
                    const meta = pre ?? post;
                    if (!meta || meta.type !== "spark-remote:index:Step") continue;
                    // By resource and operation: a replacement's create and its delete are two steps.
                    const op = meta.op === "same" || meta.op === "update" || meta.op === "create" ? "" : `:${meta.op}`;
                    const name = meta.urn.split("::").pop() + op;
                    const step = steps.get(name) ?? {};
                    if (pre) step.start = t;
                    else step.end = t;
                    steps.set(name, step);
                }
            }
            fs.closeSync(fd);
        };
        const [file, args] = this.args(...(extra.length ? extra : ["up", "--yes", "--skip-preview"]), "--event-log", events);
        // The control plane's CPU: bash's `times` after the run, the CPU of every process under it
        // that was waited for (pulumi.sh, its `stack select`, the CLI, and the CLI's plugins and
        // Node.js, which it waits for); the lab's nodes run under their own systemd, not under it.
        // And a split by process, sampled from /proc every 0.1 s (a lower bound per process).
        const timesFile = path.join(this.work, `times-${Date.now()}.txt`);
        const timingLog = path.join(this.work, `timing-${Date.now()}.jsonl`);
        const wrapped = ["-c", '"$@"; rc=$?; times > "$SPARK_BENCH_TIMES"; exit $rc', "bench-cpu", file, ...args];
        const procs = new ProcessCpu();
        const start = now();
        const startEpoch = epoch();
        // The host's busy CPU time, sampled 4 times a second, so a layer's span can be given its
        // share (cpuBusySeconds).
        /** @type {[number, number][]} */
        const samples = [[start, cpuBusySeconds()]];
        const sampler = setInterval(() => samples.push([now(), cpuBusySeconds()]), 250);
        // --event-log is one of the CLI's debug flags.
        /** @type {number} */
        let seconds;
        /** @type {string} */
        let out;
        try {
            ({ seconds, out } = await timed(
                "bash",
                wrapped,
                { ...this.env, PULUMI_DEBUG_COMMANDS: "true", SPARK_BENCH_TIMES: timesFile, SPARK_COMMAND_TIMING_LOG: timingLog },
                () => {
                    read();
                    procs.sample();
                },
                (child) => (procs.root = child.pid),
            ));
        } finally {
            clearInterval(sampler);
        }
        samples.push([now(), cpuBusySeconds()]);
        /** @param {number} t */
        const busyAt = (t) => {
            const i = samples.findIndex(([ts]) => ts >= t);
            if (i <= 0) return samples[Math.max(i, 0)][1];
            const [[t0, b0], [t1, b1]] = [samples[i - 1], samples[i]];
            return b0 + ((b1 - b0) * (t - t0)) / Math.max(t1 - t0, 1e-9);
        };
        /** @type {Record<string, number>} */
        const layerCpuFloor = {};
        /** @type {Record<string, number>} */
        const layers = {};
        for (const [layer, re] of LAYERS) {
            const mine = [...steps]
                .filter(([name]) => re.test(name))
                .map(([, s]) => s)
                .filter((s) => s.start && s.end);
            if (!mine.length) continue;
            const [from, to] = [Math.min(...mine.map((s) => s.start ?? 0)), Math.max(...mine.map((s) => s.end ?? 0))];
            layers[layer] = to - from;
            layerCpuFloor[layer] = (busyAt(to) - busyAt(from)) / os.cpus().length;
        }
        // Where the time goes, by the events' arrival: before the prelude (the CLI, the backend,
        // the stack's state and config), prelude → first step (the language host, the program's
        // start and its first registration, the provider plugin), first → last step (the
        // resources), last step → exit (the summary, the state written, plugins shut down).
        const end = start + seconds;
        const phases =
            marks.prelude && marks.firstStep && marks.lastStep
                ? {
                      cli: marks.prelude - start,
                      program: marks.firstStep - marks.prelude,
                      steps: marks.lastStep - marks.firstStep,
                      tail: end - marks.lastStep,
                  }
                : undefined;
        // The longest single step (a wait of its own, or a step waiting on SSH or on a probe).
        const longest = [...steps]
            .filter(([, st]) => st.start && st.end)
            .map(([name, st]) => ({ name, seconds: (st.end ?? 0) - (st.start ?? 0) }))
            .reduce(
                /** @param {{ name: string, seconds: number } | undefined} a @param {{ name: string, seconds: number }} b */
                (a, b) => (b.seconds > (a?.seconds ?? -1) ? b : a),
                undefined,
            );
        const controlCpu = timeline.childrenCpuSeconds(fs.readFileSync(timesFile, "utf8"));
        /** @type {Timing[]} */
        const timings = fs.existsSync(timingLog)
            ? fs
                  .readFileSync(timingLog, "utf8")
                  .split("\n")
                  .filter((l) => l.trim())
                  .map((l) => JSON.parse(l))
            : [];
        return {
            seconds,
            out,
            layers,
            layerCpuFloor,
            start,
            phases,
            longest,
            events,
            marks,
            timedEvents,
            timings,
            startEpoch,
            endEpoch: startEpoch + seconds,
            controlCpu,
            cpuByProcess: procs.byRole(),
        };
    }
    /** `pulumi stack export`'s JSON. */
    exported() {
        return JSON.parse(sh(path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", "stack", "export"], this.env));
    }
    stateBytes() {
        return stateFileBytes(this.backend, "spark-cluster");
    }
    /** @param {string} name */
    output(name) {
        return sh(path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", "stack", "output", name], this.env).trim();
    }
    apiKey() {
        const [file, args] = this.args("config", "get", "spark-cluster:apiKey");
        return sh(file, args, this.env).trim();
    }
    remove() {
        fs.rmSync(this.work, { recursive: true, force: true });
    }
}

/**
 * @param {string} endpoint
 * @param {string} key
 * @param {string} model
 */
async function chat(endpoint, key, model, limitS = 120) {
    const start = now();
    let last = "";
    while (now() - start < limitS) {
        try {
            const r = await fetch(`${endpoint}/chat/completions`, {
                method: "POST",
                headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
                body: JSON.stringify({ model, messages: [{ role: "user", content: "Where do you run?" }], max_tokens: 16 }),
                signal: AbortSignal.timeout(10_000),
            });
            if (r.ok) return now() - start;
            last = `HTTP ${r.status}`;
        } catch (err) {
            last = messageOf(err);
        }
        await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`${model} did not answer within ${limitS} s: ${last}`);
}

// --- the baseline: `ray up` with the same `ray start` argv ----------------------------------
/**
 * The argv our unit runs on a node (its ExecStart, venv runtime), without --block.
 * @param {string} host
 */
function unitRayStart(host) {
    const line = ssh(host, "grep ^ExecStart= /etc/systemd/system/spark-cluster-ray.service").trim();
    return line
        .slice("ExecStart=".length)
        .split(" ")
        .filter((w) => w !== "--block")
        .join(" ");
}
/**
 * @param {number} n
 * @returns {Promise<RayUpTime[]>}
 */
async function rayUpBaseline(n) {
    const hosts = THORS.slice(0, n).map((_, i) => mgmt(i));
    const starts = hosts.map(unitRayStart);
    /** @param {RegExp} re @param {string} text */
    const group1 = (re, text) => {
        const m = re.exec(text);
        if (!m) throw new Error(`no ${re} in ${text}`);
        return m[1];
    };
    /** @param {string} start */
    const nodeIp = (start) => group1(/--node-ip-address=(\S+)/, start);
    const address = group1(/--address=(\S+)/, starts[1]);
    // Our units stopped, vLLM first, then the workers' Ray (a worker stopped after its head waits
    // 30 s for the GCS, then systemd kills it), then the head's; each group in parallel.
    /**
     * @param {string[]} group
     * @param {string} units
     */
    const stop = (group, units) =>
        Promise.all(
            group.map((host) =>
                timed("ssh", sshArgs(host, `systemctl stop ${units} 2>/dev/null || true; /opt/lab-venv/bin/ray stop --force >/dev/null 2>&1 || true`)),
            ),
        );
    await Promise.all(hosts.map((host) => timed("ssh", sshArgs(host, "systemctl stop spark-cluster-vllm 2>/dev/null || true"))));
    await stop(hosts.slice(1), "spark-cluster-ray");
    await stop(hosts.slice(0, 1), "spark-cluster-ray");
    // The token our units read, so the baseline runs with authentication like them.
    const env = "set -a; . /etc/spark-cluster/runtime.env; . /etc/spark-cluster/ray.env; set +a; export PATH=/opt/lab-venv/bin:$PATH";
    // The local provider finds a node by the address Ray registers it with: the interconnect
    // address our units pin. So `ray up` runs on the head and reaches every node there (SSH).
    const yaml = [
        "cluster_name: bench",
        `provider: {type: local, head_ip: ${nodeIp(starts[0])}, worker_ips: [${starts.slice(1).map(nodeIp).join(", ")}]}`,
        "auth: {ssh_user: root, ssh_private_key: /root/.ssh/bench_key}",
        `min_workers: ${n - 1}`,
        `max_workers: ${n - 1}`,
        "upscaling_speed: 100",
        "setup_commands: []",
        // Autoscaler v1: `ray up` (Ray >= 2.50) prefixes the head's start commands with
        // RAY_enable_autoscaler_v2=1 unless RAY_UP_enable_autoscaler_v2=0 (autoscaler/_private/
        // commands.py, get_or_create_head_node), and v2 with the local provider never launches a
        // worker. The head's GCS decides which monitor runs (is_autoscaler_v2(fetch_from_server)),
        // so its start says v1 too.
        "head_start_ray_commands:",
        `  - ${JSON.stringify(`${env}; export RAY_enable_autoscaler_v2=0; ray stop --force >/dev/null 2>&1; ${starts[0]} --autoscaling-config=~/ray_bootstrap_config.yaml`)}`,
        "worker_start_ray_commands:",
        `  - ${JSON.stringify(`${env}; ray stop --force >/dev/null 2>&1; ${starts[1].replace(/--node-ip-address=\S+/, "--node-ip-address=$(ip -4 -o addr show enp1s0f1np1 | awk '{print $4}' | cut -d/ -f1)")}`)}`,
        "",
    ].join("\n");
    sh("scp", [
        "-i",
        LAB_KEY,
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        LAB_KEY,
        `root@${hosts[0]}:/root/.ssh/bench_key`,
    ]);
    ssh(hosts[0], `chmod 600 /root/.ssh/bench_key; cat > /root/bench-cluster.yaml <<'YAML'\n${yaml}YAML`);
    const probe = fs.readFileSync(path.join(root, "components", "render", "ray.ts"), "utf8");
    // Our readiness probe, counting only nodes that started after a given time (argv 5, ms):
    // the second `ray up` starts while the first cluster still stands.
    const alive = "alive = list(client.get_all_node_info(timeout=5, state_filter=GcsNodeInfo.GcsNodeState.ALIVE).values())";
    const py0 = group1(/export const RAY_PROBE_PY = String\.raw`([\s\S]*?)`;/, probe);
    if (!py0.includes(alive)) throw new Error("components/render/ray.ts: RAY_PROBE_PY no longer reads the node table as bench expects");
    const py = py0.replace(alive, `${alive}\n        alive = [n for n in alive if n.start_time_ms >= int(sys.argv[5])]`);
    ssh(hosts[0], `cat > /root/bench-probe.py <<'PY'\n${py}PY`);
    /** @type {RayUpTime[]} */
    const times = [];
    for (const round of [1, 2]) {
        const start = now();
        /** @type {Promise<Timed | { err: unknown }>} */
        const formed = timed("ssh", sshArgs(hosts[0], `${env}; python3 /root/bench-probe.py ${address} ${n} ${n} 180 ${Date.now()}`)).catch((err) => ({ err }));
        const up = await timed(
            "ssh",
            sshArgs(hosts[0], `${env}; RAY_UP_enable_autoscaler_v2=0 RAY_enable_autoscaler_v2=0 ray up -y --no-config-cache /root/bench-cluster.yaml`),
        );
        const f = await formed;
        if ("err" in f) {
            log(`ray up #${round}: returned after ${up.seconds.toFixed(1)} s; the cluster did not form within 180 s: ${messageOf(f.err).slice(-300)}`);
            try {
                log(
                    `the head's monitor.log:\n${ssh(hosts[0], "tail -n 40 /tmp/ray/session_latest/logs/monitor.log; tail -n 20 /tmp/ray/session_latest/logs/monitor.err")}`,
                );
            } catch (err) {
                log(`no monitor.log: ${messageOf(err).slice(0, 200)}`);
            }
            times.push({ up: up.seconds, formed: undefined, start });
        } else {
            times.push({ up: up.seconds, formed: f.seconds, start });
            log(`ray up #${round}: returned after ${up.seconds.toFixed(1)} s, cluster formed after ${f.seconds.toFixed(1)} s`);
        }
        // The second `ray up` restarts Ray on the head (the way `ray up` applies its commands).
    }
    // No `ray down`: in the lab it hung (over 100 s, 2 nodes); `ray stop` on every node does its work.
    for (const host of hosts)
        ssh(
            host,
            "/opt/lab-venv/bin/ray stop --force >/dev/null 2>&1 || true; rm -f /root/bench-probe.py /root/bench-cluster.yaml /root/.ssh/bench_key /tmp/cluster-bench.state /tmp/cluster-bench.lock",
        );
    return times;
}

/** Memory in use on the host (MemTotal - MemAvailable: page cache left out). */
function memUsedGib() {
    const info = fs.readFileSync("/proc/meminfo", "utf8");
    /** @param {string} key */
    const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(info)?.[1]);
    return (kib("MemTotal") - kib("MemAvailable")) / 2 ** 20;
}

/**
 * CPU time the whole host has spent busy (every core; /proc/stat's first line, all but idle and
 * iowait), in seconds. Divided by the cores, a span's busy time is the least wall time that work
 * could take on this machine: the lab's nodes share its cores, where N Sparks would have N CPUs.
 */
function cpuBusySeconds() {
    const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return (user + nice + system + irq + softirq + (steal ?? 0)) / 100; // USER_HZ: 100 on Linux
}

// --- what the program itself costs -------------------------------------------------------------
/**
 * A cold `up`'s cost apart from the lab: its critical path (from the event log and the stack's
 * dependency graph), the overhead (its wall time minus the time inside the critical path's
 * remote scripts, from our provider's timing log), and the control plane's CPU seconds.
 * Writes the timeline (SVG) and its inputs to OUT.
 * @param {number} n
 * @param {number} rep
 * @param {{ seconds: number, timedEvents: TimedEvent[], timings: Timing[], startEpoch: number, endEpoch: number, controlCpu: number, cpuByProcess: Record<string, number> }} up
 * @param {{ deps: import("./timeline.js").Deps, parents: import("./timeline.js").Parents }} graph
 */
function costOfColdUp(n, rep, up, graph) {
    const steps = timeline.stepsFromEvents(up.timedEvents);
    const crit = timeline.criticalPath(steps, graph.deps, graph.parents);
    const o = timeline.overhead(up.seconds, crit, up.timings, up.startEpoch);
    record(n, rep, "cold_up", up.seconds);
    record(n, rep, "critical_path_scripts", o.inside);
    record(n, rep, "overhead", o.overhead);
    if (o.parts) for (const [part, s] of Object.entries(o.parts)) record(n, rep, `overhead_${part}`, s);
    record(n, rep, "control_cpu", up.controlCpu);
    record(n, rep, "control_cpu_per_node", up.controlCpu / n);
    for (const [role, cpu] of Object.entries(up.cpuByProcess)) if (cpu > 0) record(n, rep, `cpu_${role}`, cpu);
    log(
        `critical path of the cold up (${crit.length} steps): ` +
            crit.map((s) => `${s.name} ${(s.end - s.start).toFixed(1)} s (script ${timeline.scriptSeconds(s, up.timings).toFixed(1)})`).join(" → "),
    );
    fs.mkdirSync(OUT, { recursive: true });
    const base = path.join(OUT, `cold-up-${n}-rep-${rep}`);
    fs.writeFileSync(`${base}-events.jsonl`, up.timedEvents.map((e) => JSON.stringify(e)).join("\n") + "\n");
    fs.writeFileSync(`${base}-timing.jsonl`, up.timings.map((e) => JSON.stringify(e)).join("\n") + "\n");
    fs.writeFileSync(`${base}-graph.json`, JSON.stringify(graph));
    const svg = timeline.renderSvg({
        title: `Cold up, ${n} nodes (rep ${rep}), ${new Date().toISOString().slice(0, 16)}Z on ${os.hostname()} (${os.cpus().length} cores)${NODE_NICE === "0" ? "" : `, lab nodes at nice ${NODE_NICE}`}`,
        start: up.startEpoch,
        end: up.endEpoch,
        steps,
        path: crit,
        timings: up.timings,
        nodes: THORS.slice(0, n),
    });
    fs.writeFileSync(`${base}.svg`, svg);
    fs.writeFileSync(path.join(OUT, `cold-up-${n}.svg`), svg); // the latest of this size
}

// --- one size -----------------------------------------------------------------------------------
/**
 * @param {number} n
 * @returns {Promise<Shape | undefined>}
 */
async function benchSize(n) {
    await takeLock();
    const stack = new Stack(n);
    /** @type {Shape | undefined} the cluster's stack after a cold up: its resources, state writes and state size */
    let shape;
    try {
        sh(path.join(root, "lab", "lab.sh"), ["down"], {}, 600);
        const lab = await timed(path.join(root, "lab", "lab.sh"), ["up", "--topology", `thor-switch-${n}`], { LAB_NODE_NICE: NODE_NICE });
        log(`lab thor-switch-${n} up in ${lab.seconds.toFixed(0)} s`);
        // The nodes run at the nice value asked for (a node left up by an earlier run keeps its own).
        for (let i = 0; i < n; i++) {
            const seen = ssh(mgmt(i), "ps -o ni= -p 1").trim();
            if (seen !== NODE_NICE) throw new Error(`${THORS[i]} runs at nice ${seen}, not BENCH_NODE_NICE=${NODE_NICE}`);
        }
        const key = stack.apiKey();
        for (let rep = 1; rep <= REPS; rep++) {
            stack.setModel(MODELS[0]);
            const busyBefore = cpuBusySeconds();
            // BENCH_CLI_PROFILE=DIR: the cold up runs with the CLI's --profiling (Go's CPU and memory
            // profiles of the pulumi process, DIR/cold-N-R.<pid>.cpu); a diagnostic, it costs CPU itself.
            const profileDir = process.env.BENCH_CLI_PROFILE;
            const profile = profileDir ? ["up", "--yes", "--skip-preview", "--profiling", path.join(path.resolve(profileDir), `cold-${n}-${rep}`)] : [];
            if (profileDir) fs.mkdirSync(path.resolve(profileDir), { recursive: true });
            const up = await stack.upWithLayers(...profile);
            const endpoint = stack.output("endpoint");
            const chatS = await chat(endpoint, key, MODELS[0].servedName);
            record(n, rep, "cold_converge", up.seconds + chatS);
            // Not seconds of wall time: CPU seconds, and those divided by the cores (see cpuBusySeconds).
            const busy = cpuBusySeconds() - busyBefore;
            record(n, rep, "cold_cpu_busy", busy);
            record(n, rep, "cold_cpu_floor", busy / os.cpus().length);
            const exported = stack.exported();
            costOfColdUp(n, rep, up, timeline.graphFromExport(exported));
            shape = { ...timeline.coldUpStateWrites(exported), stateBytes: stack.stateBytes() };
            for (const [layer] of LAYERS) if (up.layers[layer] !== undefined) record(n, rep, `layer_${layer}`, up.layers[layer]);
            // The CPU floor of the Ray layer's span: how much of it this machine's cores were busy.
            if (up.layerCpuFloor.ray !== undefined) record(n, rep, "layer_ray_cpu_floor", up.layerCpuFloor.ray);
            if (up.longest) {
                record(n, rep, "longest_step", up.longest.seconds);
                log(`longest step of the cold up: ${up.longest.name} ${up.longest.seconds.toFixed(1)} s`);
            }
            // What the steps said while they waited (sc_wait and the probes, every 10 s).
            for (const line of up.out
                .split("\n")
                .filter((l) => /waiting for|gave up/.test(l))
                .slice(0, 20))
                log(`cold up said: ${line.trim().slice(0, 300)}`);
            // Where memory or CPU would stop a larger lab: the host's use with the cluster serving.
            console.log(`BENCH v1 nodes=${n} rep=${rep} mem_used_gib=${memUsedGib().toFixed(1)} load1=${os.loadavg()[0].toFixed(1)}`);
            const noop = await stack.upWithLayers("up", "--yes", "--skip-preview", "--expect-no-changes");
            record(n, rep, "noop_up", noop.seconds);
            record(n, rep, "noop_control_cpu", noop.controlCpu);
            if (noop.phases) for (const [phase, s] of Object.entries(noop.phases)) record(n, rep, `noop_${phase}`, s);
            // BENCH_NOOP_PROFILE=DIR keeps the no-op up's event log (with the wall clock of each
            // phase mark) and runs one more no-op up with the engine's own log (-v=7, timestamped),
            // to see where its time goes.
            if (process.env.BENCH_NOOP_PROFILE) {
                const dir = path.join(process.env.BENCH_NOOP_PROFILE, `nodes-${n}-rep-${rep}`);
                fs.mkdirSync(dir, { recursive: true });
                fs.copyFileSync(noop.events, path.join(dir, "noop-events.jsonl"));
                fs.writeFileSync(path.join(dir, "noop-marks.json"), JSON.stringify({ start: noop.start, seconds: noop.seconds, ...noop.marks }, null, 1));
                const v = await stack.upWithLayers("up", "--yes", "--skip-preview", "--expect-no-changes", "--logtostderr", "-v=7");
                fs.writeFileSync(path.join(dir, "noop-v7.log"), v.out);
                fs.copyFileSync(v.events, path.join(dir, "noop-v7-events.jsonl"));
                fs.writeFileSync(path.join(dir, "noop-v7-marks.json"), JSON.stringify({ start: v.start, seconds: v.seconds, ...v.marks }, null, 1));
                log(`no-op up with -v=7: ${v.seconds.toFixed(1)} s; kept in ${dir}`);
            }
            record(n, rep, "preview", (await stack.run("preview", "--expect-no-changes")).seconds);
            stack.setModel(MODELS[1]);
            const sw = await stack.upWithLayers();
            if (sw.longest) log(`longest step of the model switch: ${sw.longest.name} ${sw.longest.seconds.toFixed(1)} s (up ${sw.seconds.toFixed(1)} s)`);
            if (process.env.BENCH_NOOP_PROFILE)
                fs.copyFileSync(sw.events, path.join(process.env.BENCH_NOOP_PROFILE, `nodes-${n}-rep-${rep}`, "switch-events.jsonl"));
            record(n, rep, "model_switch", sw.seconds + (await chat(endpoint, key, MODELS[1].servedName)));
            record(n, rep, "model_switch_up", sw.seconds);
            if (rep === REPS && process.env.BENCH_RAY_UP !== "0") {
                const base = await rayUpBaseline(n);
                if (base[0].formed !== undefined) record(n, rep, "rayup_formed", base[0].formed);
                record(n, rep, "rayup_returned", base[0].up);
                if (base[1].formed !== undefined) record(n, rep, "rayup_second_formed", base[1].formed);
                record(n, rep, "rayup_second_returned", base[1].up);
            }
            const destroy = await stack.upWithLayers("destroy", "--yes", "--skip-preview");
            if (destroy.longest)
                log(`longest step of destroy: ${destroy.longest.name} ${destroy.longest.seconds.toFixed(1)} s (destroy ${destroy.seconds.toFixed(1)} s)`);
            // A unit's stop that took long: what systemd said of it on that node (the journal outlives the unit).
            const slowUnit = destroy.longest && destroy.longest.seconds >= 20 && /^(thor-[a-h])-(ray|vllm)-.*unit:delete$/.exec(destroy.longest.name);
            if (slowUnit) {
                const host = mgmt(THORS.indexOf(slowUnit[1]));
                const unit = slowUnit[2] === "ray" ? "spark-cluster-ray" : "spark-cluster-vllm";
                const journal = ssh(
                    host,
                    `journalctl -u ${unit} --since -3min --no-pager -o short-precise | grep -E 'Stopping|timed out|Kill|SIGTERM|Stopped|Failed|exited' | tail -n 30`,
                );
                log(`${unit} on ${host}, its stop:\n${journal}`);
            }
            record(n, rep, "destroy", destroy.seconds);
        }
    } finally {
        stack.remove();
        try {
            sh(path.join(root, "lab", "lab.sh"), ["down"], {}, 600);
        } finally {
            giveLock();
        }
    }
    return shape;
}

/**
 * The size of the dev stack's state file as the file backend in `backendDir` wrote it (Pulumi 3.274's layout).
 * @param {string} backendDir
 * @param {string} project
 */
function stateFileBytes(backendDir, project) {
    return fs.statSync(path.join(backendDir, ".pulumi", "stacks", project, "dev.json")).size;
}

// --- Pulumi alone -------------------------------------------------------------------------------
/**
 * What Pulumi itself costs for a stack of the cluster's shape, with nothing of ours in it but the
 * toolchain (bench/pulumi-alone.js, in a project of its own, the same CLI, environment, file
 * backend and ts-register.js): a cold `up` that writes the state as many times as the cluster's
 * cold `up` did (its components, 3 writes each, to a state of the same size), and a no-op `up` of
 * as many resources. No lab: after the size's lab is down. CPU as for the cluster (bash's `times`).
 * @param {number} n
 * @param {Shape} shape
 */
async function pulumiAlone(n, shape) {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-bench-alone-"));
    try {
        const project = path.join(work, "project");
        fs.mkdirSync(project);
        fs.mkdirSync(path.join(work, "backend"));
        // The Node.js language host splits nodeargs at spaces, with no quoting.
        const register = path.join(root, "toolchain", "ts-register.js");
        if (/\s/.test(register)) throw new Error(`the Pulumi-alone runs need a checkout path without spaces, not ${register}`);
        fs.copyFileSync(path.join(root, "bench", "pulumi-alone.js"), path.join(project, "index.js"));
        fs.symlinkSync(path.join(root, "node_modules"), path.join(project, "node_modules"));
        fs.writeFileSync(path.join(project, "package.json"), '{"name": "pulumi-alone", "private": true}\n');
        fs.writeFileSync(
            path.join(project, "Pulumi.yaml"),
            [
                "name: pulumi-alone",
                "runtime:",
                "  name: nodejs",
                "  options:",
                "    typescript: false",
                `    nodeargs: --require ${register}`,
                "main: index.js",
                "",
            ].join("\n"),
        );
        const timesFile = path.join(work, "times.txt");
        const env = {
            PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}?metadata=skip`,
            PULUMI_CONFIG_PASSPHRASE: "pulumi-alone",
            PULUMI_CONFIG_PASSPHRASE_FILE: "",
            SPARK_BENCH_TIMES: timesFile,
            SPARK_BENCH_PROJECT: project,
        };
        const script =
            'source "$SPARK_ROOT_FOR_BENCH/scripts/env.sh" && cd "$SPARK_BENCH_PROJECT" && { pulumi "$@"; rc=$?; times > "$SPARK_BENCH_TIMES"; exit $rc; }';
        /**
         * @param {number} resources
         * @param {number} bytes
         * @param {string[]} args
         */
        const pulumi = async (resources, bytes, ...args) => {
            const r = await timed("bash", ["-c", script, "pulumi-alone", ...args, "--stack", "dev", "--non-interactive"], {
                ...env,
                SPARK_ROOT_FOR_BENCH: root,
                ALONE_RESOURCES: String(resources),
                ALONE_BYTES: String(bytes),
            });
            return { seconds: r.seconds, cpu: timeline.childrenCpuSeconds(fs.readFileSync(timesFile, "utf8")) };
        };
        const stateBytes = () => stateFileBytes(path.join(work, "backend"), "pulumi-alone");
        await pulumi(0, 0, "stack", "select", "--create");
        // As many writes as the cluster's cold up: 3 per component, the stack's own among them.
        const fillers = Math.max(0, Math.round(shape.writes / 3) - 1);
        // Sized so that the state file is as large as the cluster's: one untimed cold up measures
        // what the fillers' URNs and types add.
        await pulumi(fillers, shape.stateBytes, "up", "--yes", "--skip-preview");
        const bytes = Math.max(0, 2 * shape.stateBytes - stateBytes());
        await pulumi(0, 0, "destroy", "--yes", "--skip-preview");
        let sized = 0;
        for (let rep = 1; rep <= REPS; rep++) {
            const cold = await pulumi(fillers, bytes, "up", "--yes", "--skip-preview");
            sized = stateBytes();
            record(n, rep, "alone_cold_up", cold.seconds);
            record(n, rep, "alone_cold_cpu", cold.cpu);
            await pulumi(0, 0, "destroy", "--yes", "--skip-preview");
            // The no-op: as many resources as the cluster's stack (less the stack itself).
            await pulumi(shape.resources - 1, bytes, "up", "--yes", "--skip-preview");
            const noop = await pulumi(shape.resources - 1, bytes, "up", "--yes", "--skip-preview", "--expect-no-changes");
            record(n, rep, "alone_noop_up", noop.seconds);
            record(n, rep, "alone_noop_cpu", noop.cpu);
            await pulumi(0, 0, "destroy", "--yes", "--skip-preview");
        }
        console.log(
            `BENCH v1 nodes=${n} alone_fillers=${fillers} alone_state_mb=${(sized / 1e6).toFixed(2)} cluster_state_mb=${(shape.stateBytes / 1e6).toFixed(2)} cluster_writes=${shape.writes} cluster_resources=${shape.resources}`,
        );
    } finally {
        fs.rmSync(work, { recursive: true, force: true });
    }
}

// --- the table ----------------------------------------------------------------------------------
/** @param {number[]} values */
function stats(values) {
    const s = [...values].sort((a, b) => a - b);
    return { n: s.length, min: s[0], median: s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2, max: s[s.length - 1] };
}
function table() {
    const metrics = [...new Set(results.map((r) => r.metric))];
    const sizes = [...new Set(results.map((r) => r.nodes))];
    /**
     * @param {number} nodes
     * @param {string} metric
     */
    const med = (nodes, metric) => {
        const v = results.filter((r) => r.nodes === nodes && r.metric === metric).map((r) => r.seconds);
        return v.length ? stats(v).median : undefined;
    };
    const lines = [`| metric | nodes | n | min s | median s | max s |`, `| --- | ---: | ---: | ---: | ---: | ---: |`];
    for (const metric of metrics) {
        for (const nodes of sizes) {
            const v = results.filter((r) => r.nodes === nodes && r.metric === metric).map((r) => r.seconds);
            if (!v.length) continue;
            const s = stats(v);
            lines.push(`| ${metric} | ${nodes} | ${s.n} | ${s.min.toFixed(1)} | ${s.median.toFixed(1)} | ${s.max.toFixed(1)} |`);
        }
    }
    lines.push("", "| ratio (medians) | nodes | value |", "| --- | ---: | ---: |");
    /**
     * @param {string} name
     * @param {number} nodes
     * @param {number | undefined} a
     * @param {number | undefined} b
     */
    const ratio = (name, nodes, a, b) => {
        if (a !== undefined && b !== undefined && b > 0) lines.push(`| ${name} | ${nodes} | ${(a / b).toFixed(2)} |`);
    };
    for (const nodes of sizes) {
        ratio("Ray layer / ray up (formed)", nodes, med(nodes, "layer_ray"), med(nodes, "rayup_formed"));
        ratio("Ray layer / second ray up (formed)", nodes, med(nodes, "layer_ray"), med(nodes, "rayup_second_formed"));
        ratio("cold converge / ray up (formed)", nodes, med(nodes, "cold_converge"), med(nodes, "rayup_formed"));
        ratio("cold converge CPU floor / cold converge", nodes, med(nodes, "cold_cpu_floor"), med(nodes, "cold_converge"));
        ratio("Ray layer CPU floor / Ray layer", nodes, med(nodes, "layer_ray_cpu_floor"), med(nodes, "layer_ray"));
    }
    const first = sizes[0];
    for (const nodes of sizes.slice(1)) {
        ratio(`cold_cpu_floor at ${nodes} / cold_converge at ${first}`, nodes, med(nodes, "cold_cpu_floor"), med(first, "cold_converge"));
        for (const metric of ["cold_converge", "cold_cpu_busy", "noop_up", "preview", "model_switch", "destroy", "layer_ray"]) {
            ratio(`${metric} at ${nodes} / at ${first}`, nodes, med(nodes, metric), med(first, metric));
        }
    }
    return lines.join("\n");
}

/**
 * The small table of medians of what the program itself costs (written to OUT/medians.md).
 * @param {Date} when
 */
function costTable(when) {
    const sizes = [...new Set(results.map((r) => r.nodes))];
    /**
     * @param {number} nodes
     * @param {string} metric
     */
    const med = (nodes, metric) => {
        const v = results.filter((r) => r.nodes === nodes && r.metric === metric).map((r) => r.seconds);
        return v.length ? stats(v).median.toFixed(2) : "–";
    };
    const rows = [
        ["cold up, wall s", "cold_up"],
        ["critical path: inside its scripts, s", "critical_path_scripts"],
        ["overhead, s (target ≤ 1.5)", "overhead"],
        ["– before the path's first step, s", "overhead_before"],
        ["– in the path's steps, outside their scripts, s", "overhead_inSteps"],
        ["– between the path's steps, s", "overhead_between"],
        ["– after the path's last step, s", "overhead_after"],
        ["control-plane CPU, s", "control_cpu"],
        ["– the pulumi CLI, s", "cpu_cli"],
        ["– Node.js (the program), s", "cpu_node"],
        ["– the spark-remote provider, s", "cpu_provider"],
        ["control-plane CPU per node, s (target ≤ 0.5)", "control_cpu_per_node"],
        ["no-op up, wall s (target ≤ 2.0 at 8)", "noop_up"],
        ["no-op up, control-plane CPU s", "noop_control_cpu"],
        ["Pulumi alone: cold up, as many state writes, wall s", "alone_cold_up"],
        ["Pulumi alone: cold up, CPU s", "alone_cold_cpu"],
        ["Pulumi alone: no-op up, as many resources, wall s", "alone_noop_up"],
        ["Pulumi alone: no-op up, CPU s", "alone_noop_cpu"],
    ];
    return [
        `Medians, ${when.toISOString().slice(0, 16)}Z, host ${os.hostname()} (${os.cpus().length} cores), lab nodes at nice ${NODE_NICE}, ${REPS} repetition(s) per size:`,
        "",
        `| metric | ${sizes.map((n) => `${n} nodes`).join(" | ")} |`,
        `| --- | ${sizes.map(() => "---:").join(" | ")} |`,
        ...rows.map(([label, metric]) => `| ${label} | ${sizes.map((n) => med(n, metric)).join(" | ")} |`),
    ].join("\n");
}

const started = new Date();
console.log(
    `BENCH v1 start=${started.toISOString()} host=${os.hostname()} cpus=${os.cpus().length} mem_gib=${(os.totalmem() / 2 ** 30).toFixed(0)} sizes=${SIZES.join(",")} reps=${REPS} node_nice=${NODE_NICE}`,
);
for (const n of SIZES) {
    try {
        const shape = await benchSize(n);
        if (shape) await pulumiAlone(n, shape);
    } catch (err) {
        console.log(`BENCH v1 nodes=${n} error=${JSON.stringify(messageOf(err).split("\n")[0])}`);
        log(messageOf(err).slice(0, 4000));
    }
}
console.log("");
console.log(table());
fs.mkdirSync(OUT, { recursive: true });
fs.writeFileSync(path.join(OUT, "medians.md"), costTable(started) + "\n");
console.log("");
console.log(costTable(started));
