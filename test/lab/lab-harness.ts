/**
 * Shared helpers for the lab self-tests (test/lab/*.test.ts): run lab/lab.sh, ssh into nodes,
 * bounded waits, and the "nothing left behind" inspection used after `lab.sh down`.
 * Nothing here is skipped silently: a missing precondition throws with a message saying what to do.
 */
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before } from "node:test";
import {
    CONFIG_DIR,
    FIREWALLED_UNITS,
    HF_HOME_DIR,
    NCCL_CONF_PATH,
    NETPLAN_PATH,
    PEERMEM_CONF,
    STATE_DIR,
    UNITS,
    dropInDir,
    unitPath,
} from "../../config/hostPaths";
import { findRepoRoot } from "../support/repoRoot";

export const repoRoot = findRepoRoot(__dirname);
export const labSh = path.join(repoRoot, "lab", "lab.sh");
export const stateDir = path.join(repoRoot, "lab", ".state");
export const keyPath = path.join(stateDir, "id_ed25519");

export const nodeAddr: Record<string, string> = {
    "spark-a": "10.77.0.11",
    "spark-b": "10.77.0.12",
    // mesh-3 and ring-4: spark-c and spark-d.
    "spark-c": "10.77.0.13",
    "spark-d": "10.77.0.14",
    "thor-a": "10.77.0.21",
    "thor-b": "10.77.0.22",
    // thor-switch-N (N up to 8): thor-c … thor-h.
    ...Object.fromEntries(["c", "d", "e", "f", "g", "h"].map((x, i) => [`thor-${x}`, `10.77.0.${23 + i}`])),
    "ws-a": "10.77.0.31",
    outsider: "10.77.0.99",
};

/** The lab node that is in no stack (booted in every topology; on the ic0 fabric in hetero-4). */
export const outsiderNode = "outsider";

/** Ray in every node's /opt/lab-venv and in the Ray-carrying image (lab/lib/common.sh LAB_RAY_VERSION). */
export const labRayVersion = "2.60.0";

/** Container images present in every Docker-running (Spark) node (lab/lib/nodes.sh LAB_DOCKER_IMAGES; {@link labImageVllmVersion} reads their versions there). */
export const labImages = {
    /** Ray + the vLLM stand-in playing vLLM 0.10.1.1, like NGC 25.09-py3. */
    withRay: "nvcr.io/nvidia/vllm:25.09-py3",
    /** The stand-in playing vLLM 0.20.1, without Ray (no `import ray`, no `ray` binary), like NGC 26.05-py3. */
    withoutRay: "nvcr.io/nvidia/vllm:26.05-py3",
    /** The stand-in playing vLLM 0.31.0, without Ray, like NGC 26.10-py3 (the product's default image to be). */
    newest: "nvcr.io/nvidia/vllm:26.10-py3",
} as const;

function nodesSh(): string {
    return fs.readFileSync(path.join(repoRoot, "lab", "lib", "nodes.sh"), "utf8");
}

/** Every lab image as lab/lib/nodes.sh lists it: tag, variant (ray | noray), the vLLM version its stand-in plays. */
export function labImageList(): { tag: string; variant: string; vllm: string }[] {
    const m = /^LAB_DOCKER_IMAGES=\(\n?([\s\S]*?)\)$/m.exec(nodesSh());
    if (!m) throw new Error("lab/lib/nodes.sh has no LAB_DOCKER_IMAGES=(...)");
    return [...m[1].matchAll(/"(\S+) (\S+) (\S+)"/g)].map((x) => ({ tag: x[1], variant: x[2], vllm: x[3] }));
}

/** The vLLM version the stand-in in image TAG plays (lab/lib/nodes.sh). */
export function labImageVllmVersion(tag: string): string {
    const image = labImageList().find((i) => i.tag === tag);
    if (!image) throw new Error(`${tag} is not in lab/lib/nodes.sh LAB_DOCKER_IMAGES`);
    return image.vllm;
}

/** The vLLM version the stand-in in every node's /opt/lab-venv plays (lab/lib/nodes.sh LAB_VENV_VLLM_VERSION). */
export function standinVllmVersion(): string {
    const m = /^LAB_VENV_VLLM_VERSION=(\S+)$/m.exec(nodesSh());
    if (!m) throw new Error("lab/lib/nodes.sh names no LAB_VENV_VLLM_VERSION");
    return m[1];
}

/** Fails with a clear message when the lab cannot run here (never skips). */
export function requireLabPreconditions(): void {
    if (typeof process.getuid === "function" && process.getuid() !== 0) {
        throw new Error("the lab self-tests need root (network namespaces, mounts, systemd-nspawn): run them as root");
    }
    if (process.platform !== "linux") {
        throw new Error(`the lab needs Linux, this is ${process.platform}`);
    }
    fs.accessSync(labSh, fs.constants.X_OK);
}

export interface RunResult {
    status: number;
    stdout: string;
    stderr: string;
}

/** Runs a command, never throws on a non-zero exit; throws on a timeout or spawn failure. */
export function run(cmd: string, args: string[], timeoutMs: number, input?: string): RunResult {
    const r = spawnSync(cmd, args, { encoding: "utf8", timeout: timeoutMs, input, maxBuffer: 64 * 1024 * 1024 });
    if (r.error) {
        throw new Error(`${cmd} ${args.join(" ")}: ${r.error.message}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    }
    if (r.status === null) {
        throw new Error(`${cmd} ${args.join(" ")} was killed by ${r.signal} (timeout ${timeoutMs} ms)`);
    }
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** lab/lab.sh ARGS (with `env` added to this process's), throwing with its output when it fails. */
export function lab(args: string[], timeoutMs = 40 * 60_000, env: Record<string, string> = {}): string {
    try {
        return execFileSync(labSh, args, { encoding: "utf8", timeout: timeoutMs, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        throw new Error(`lab/lab.sh ${args.join(" ")} failed: ${e.message}\nstdout:\n${e.stdout ?? ""}\nstderr:\n${e.stderr ?? ""}`);
    }
}

/** The options of every ssh to a lab node: its host keys change with each bring-up, and nothing may prompt. */
export const sshOpts = [
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=5",
];

/**
 * SCRIPT as root on NODE (bash -c): ssh root@NODE, or, on a Spark of the dgx-os flavour (which
 * offers no root login, as DGX OS does not), `lab/lab.sh exec` (nsenter); returns status and output.
 */
export function sshRun(node: string, script: string, timeoutMs = 120_000): RunResult {
    const addr = nodeAddr[node];
    if (!addr) throw new Error(`unknown node ${node}`);
    if (labFlavour() === "dgx-os" && node.startsWith("spark-")) return run(labSh, ["exec", node, script], timeoutMs);
    return run("ssh", ["-i", keyPath, ...sshOpts, `root@${addr}`, "bash", "-c", shQuote(script)], timeoutMs);
}

/** The running lab's flavour (LAB_FLAVOUR at lab.sh up): debian, or dgx-os. */
export function labFlavour(): string {
    try {
        return fs.readFileSync(path.join(stateDir, "flavour"), "utf8").trim() || "debian";
    } catch {
        return "debian";
    }
}

/** Like sshRun but throws when the command fails. */
export function ssh(node: string, script: string, timeoutMs = 120_000): string {
    const r = sshRun(node, script, timeoutMs);
    if (r.status !== 0) {
        throw new Error(`on ${node}: ${script}\nexit ${r.status}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    }
    return r.stdout;
}

/** POSIX single-quote one argument (the remote side parses the ssh command line with a shell). */
export function shQuote(s: string): string {
    return `'${s.replace(/'/g, `'"'"'`)}'`;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls CHECK until it returns a value (not undefined), at most timeoutMs; throws with WHAT otherwise. */
export async function waitFor<T>(what: string, timeoutMs: number, check: () => T | undefined, intervalMs = 1000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let lastError: unknown;
    for (let attempt = 0; attempt < 10_000; attempt++) {
        try {
            const v = check();
            if (v !== undefined) return v;
        } catch (err) {
            lastError = err;
        }
        if (Date.now() >= deadline) break;
        await sleep(intervalMs);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
}

/**
 * Power-cycles NODE of the running lab (`lab/lab.sh reboot`): clean halt bounded by haltTimeoutS
 * (then the recorded pids are killed), NICs back to no address and MTU 1500, the same disk booted
 * again (units enabled on the node start, Docker images stay). Returns once SSH answers again
 * (and, on a Docker node, its images are there).
 */
export function labReboot(node: string, haltTimeoutS = 30): string {
    return lab(["reboot", node, "--halt-timeout", String(haltTimeoutS)], (haltTimeoutS + 10 + 420) * 1000);
}

/** Fault injection: `systemctl kill --signal=SIGNAL UNIT` on NODE (all the unit's processes). */
export function labKill(node: string, unit: string, signal = "SIGKILL"): string {
    return lab(["kill", node, unit, "--signal", signal], 60_000);
}

/** Fault injection: `docker kill NAME` on NODE (a `docker run` unit's client does not forward SIGKILL). */
export function labKillContainer(node: string, name: string): string {
    return lab(["kill", node, "--container", name], 60_000);
}

/**
 * Starts COMMAND (bash) on NODE as a transient systemd service UNIT that stays listed after it
 * exits, so unitState() can read its exit status and labKill() can kill it. ENV is passed with
 * --setenv, never on the command line.
 */
export function startUnit(node: string, unit: string, command: string, env: Record<string, string> = {}): void {
    const setenv = Object.entries(env)
        .map(([k, v]) => `--setenv=${shQuote(`${k}=${v}`)}`)
        .join(" ");
    ssh(
        node,
        `systemctl reset-failed ${unit} 2>/dev/null; systemctl stop ${unit} 2>/dev/null; ` +
            `systemd-run --quiet --unit=${unit} -p RemainAfterExit=yes ${setenv} -- /bin/bash -c ${shQuote(command)}`,
    );
}

/**
 * Runs the bash SCRIPT on NODE as a transient unit (see startUnit), with STDIN on its standard
 * input. The script and its input go to files under /run first: systemd expands `$VAR` and
 * `${VAR}` in a unit's command line and reads its lines as unit-file lines, so a script given
 * there inline would not run as written (a `${#array[@]}` became empty, and the model sync's serve
 * step stopped at once).
 */
export function startScript(node: string, unit: string, script: string, stdin = ""): void {
    const file = `/run/lab-test-${unit}`;
    ssh(node, `umask 077 && printf '%s' ${shQuote(script)} > ${file}.sh && printf '%s' ${shQuote(stdin)} > ${file}.in`);
    startUnit(node, unit, `/bin/bash ${file}.sh < ${file}.in`);
}

export interface UnitState {
    /** systemd ActiveState: active, failed, inactive, activating ... */
    active: string;
    /** systemd SubState: running, exited, failed, dead ... */
    sub: string;
    /** Exit status of the main process once it has exited (ExecMainStatus). */
    status: number;
    /** True while the main process runs. */
    running: boolean;
}

export function unitState(node: string, unit: string): UnitState {
    const out = ssh(node, `systemctl show -p ActiveState -p SubState -p ExecMainStatus -p ExecMainPID ${unit}`);
    const v = Object.fromEntries(
        out
            .trim()
            .split("\n")
            .map((l) => l.split("=", 2) as [string, string]),
    );
    return {
        active: v.ActiveState ?? "",
        sub: v.SubState ?? "",
        status: Number(v.ExecMainStatus ?? "-1"),
        running: v.SubState === "running" && Number(v.ExecMainPID ?? "0") > 0,
    };
}

/** The journal of UNIT on NODE (last LINES lines), for assertions and failure messages. */
export function unitLog(node: string, unit: string, lines = 200): string {
    return sshRun(node, `journalctl -u ${unit} --no-pager -o cat -n ${lines}`).stdout;
}

/**
 * One lab at a time on a machine: test files take this lock (a directory, created atomically)
 * before `up` and give it back after `down`. A lock whose owner process is gone is taken over.
 */
const lockDir = path.join(os.tmpdir(), "spark-cluster-lab-tests.lock");
export async function acquireLabLock(timeoutMs = 45 * 60_000): Promise<void> {
    await waitFor(
        "the lab test lock " + lockDir,
        timeoutMs,
        () => {
            try {
                fs.mkdirSync(lockDir);
                fs.writeFileSync(path.join(lockDir, "pid"), String(process.pid));
                return true;
            } catch {
                const owner = Number(fs.readFileSync(path.join(lockDir, "pid"), { encoding: "utf8", flag: "a+" }) || "0");
                if (owner > 0 && !fs.existsSync(`/proc/${owner}`)) {
                    fs.rmSync(lockDir, { recursive: true, force: true });
                }
                return undefined;
            }
        },
        2000,
    );
}
export function releaseLabLock(): void {
    try {
        if (fs.readFileSync(path.join(lockDir, "pid"), "utf8") === String(process.pid)) {
            fs.rmSync(lockDir, { recursive: true, force: true });
        }
    } catch {
        /* not held */
    }
}

/** Everything `lab.sh down` must have removed; each entry names a leftover. */
export function labLeftovers(): string[] {
    const left: string[] = [];
    const netns = run("ip", ["netns", "list"], 10_000).stdout;
    for (const line of netns.split("\n")) {
        const name = line.split(" ")[0];
        if (name.startsWith("sclab-")) left.push(`netns ${name}`);
    }
    const links = run("ip", ["-o", "link", "show"], 10_000).stdout;
    for (const line of links.split("\n")) {
        const m = /^\d+: ([^:@]+)/.exec(line);
        if (m && (m[1] === "sclab0" || m[1].startsWith("scm-"))) left.push(`link ${m[1]}`);
    }
    const mounts = fs.readFileSync("/proc/self/mountinfo", "utf8");
    for (const line of mounts.split("\n")) {
        const mp = line.split(" ")[4];
        if (mp && mp.startsWith(stateDir)) left.push(`mount ${mp}`);
    }
    for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
        let cmdline = "";
        try {
            cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
        } catch {
            continue;
        }
        const argv = cmdline.split("\0");
        if (argv[0].endsWith("systemd-nspawn") && argv.some((a) => a.includes(path.join(stateDir, "nodes")))) {
            left.push(`process ${pid} ${argv.join(" ")}`);
        }
    }
    if (fs.existsSync(path.join(stateDir, "nodes"))) left.push(`directory ${path.join(stateDir, "nodes")}`);
    return left;
}

/** Identity of each running node: nspawn pid, container PID-1 pid + start time (changes on any restart). */
export function nodeIdentity(node: string): string {
    const dir = path.join(stateDir, "nodes", node);
    const nspawn = fs.readFileSync(path.join(dir, "nspawn.pid"), "utf8").trim();
    const leader = fs.readFileSync(path.join(dir, "leader.pid"), "utf8").trim();
    const inside = ssh(node, "awk '{print $22}' /proc/1/stat; cat /etc/ssh/ssh_host_ed25519_key.pub").trim();
    return `${nspawn}|${leader}|${inside}`;
}

/**
 * Set by scripts/test.sh (SPARK_LAB_KEEP_UP=1): a file that brings the lab up with
 * {@link withLabUp} leaves it up when it ends clean, and the next such file of the same topology
 * reuses it instead of its own `down` and `up` (the suite's files are ordered by topology; test.sh
 * takes the lab down at the end, failed or not). Unset, every file starts from `down` and ends
 * with `down`, as a file run alone does.
 */
export const keepLabUp = process.env["SPARK_LAB_KEEP_UP"] === "1";

/** lab/.state/NAME as lab.sh wrote it, or "" when absent. */
function labStateFile(name: string): string {
    try {
        return fs.readFileSync(path.join(stateDir, name), "utf8").trim();
    } catch {
        return "";
    }
}

/**
 * Paths a node of a freshly booted lab does not have, and each file that deploys to the lab
 * removes or restores: every file and unit of ours, and nccl.conf (config/hostPaths.ts).
 */
const NOT_ON_A_FRESH_NODE = [
    NETPLAN_PATH,
    CONFIG_DIR,
    STATE_DIR,
    ...Object.values(UNITS).map(unitPath),
    // The firewall's drop-ins' directories (ours alone on a lab node).
    ...FIREWALLED_UNITS.map(dropInDir),
    PEERMEM_CONF,
    NCCL_CONF_PATH,
];

/**
 * Why the running lab cannot be handed to a file wanting TOPOLOGY as if freshly booted, or "" when
 * it can: it is that topology (without the real-vLLM layer), every node answers SSH, and no node
 * has anything a deploy leaves (a file or unit of ours, an nft table, a container, an interconnect
 * address).
 */
export function labReusableFor(topology: string, flavour = "debian"): string {
    if (labStateFile("topology") !== topology) return `the lab is ${labStateFile("topology") || "down"}, not ${topology}`;
    if ((labStateFile("flavour") || "debian") !== flavour) return `the lab is of the ${labStateFile("flavour") || "debian"} flavour, not ${flavour}`;
    if ((labStateFile("real-vllm") || "0") !== "0") return "the lab runs the real-vLLM layer";
    const status = run(labSh, ["status"], 60_000);
    if (status.status !== 0) return `lab status: ${status.stdout.trim()}`;
    const nodes = status.stdout
        .split("\n")
        .slice(1)
        .map((line) => line.split(/\s+/)[0])
        .filter((name) => name in nodeAddr);
    if (nodes.length === 0) return `lab status names no node: ${status.stdout.trim()}`;
    const probe = [
        `left=""; for p in ${NOT_ON_A_FRESH_NODE.join(" ")}; do [ -e "$p" ] && left="$left $p"; done`,
        'echo "paths=[${left# }]"',
        'echo "units=[$(systemctl list-units --all --no-legend --plain \'spark-cluster*\' | awk \'{ printf "%s%s", s, $1; s = " " }\')]"',
        'echo "tables=$(nft list tables 2>/dev/null | wc -l)"',
        'echo "containers=$( (command -v docker >/dev/null && docker ps -aq) | wc -l)"',
        "echo \"addresses=$(ip -o -4 addr show | grep -c ' 192\\.168\\.')\"",
    ].join("\n");
    const found: string[] = [];
    for (const node of nodes) {
        const r = sshRun(node, probe, 60_000);
        const report = r.stdout.trim().replace(/\n/g, " ");
        if (r.status !== 0 || report !== "paths=[] units=[] tables=0 containers=0 addresses=0") found.push(`${node}: ${report} ${r.stderr.trim()}`);
    }
    return found.join("; ");
}

/**
 * Gives the calling file the lab, up with TOPOLOGY, to itself (locked against other suites). Run
 * alone: `down`, `up`, and `down` at the end, as {@link withExclusiveLab}. Under scripts/test.sh
 * ({@link keepLabUp}): a running lab that {@link labReusableFor} accepts is reused, with the model
 * caches and the lab hub's download logs emptied (a file may count downloads); at the end the lab
 * stays up for the next file when it is still clean, and goes down otherwise.
 */
export function withLabUp(topology = "spark-pair", hooks: { tearDown?: () => void; flavour?: "debian" | "dgx-os" } = {}): void {
    const flavour = hooks.flavour ?? "debian";
    let reuse = false;
    before(async () => {
        requireLabPreconditions();
        await acquireLabLock();
        if (keepLabUp) {
            const why = labReusableFor(topology, flavour);
            reuse = why === "";
            console.log(reuse ? `lab: reusing the running ${topology} lab` : `lab: bringing ${topology} up afresh (${why})`);
        }
        if (reuse) {
            const status = lab(["status"], 60_000);
            for (const line of status.split("\n").slice(1)) {
                const node = line.split(/\s+/)[0];
                if (node in nodeAddr) ssh(node, `rm -rf ${HF_HOME_DIR} /var/lib/lab-sim/hf-downloads.log`);
            }
        } else {
            lab(["down"], 5 * 60_000);
            lab(["up", "--topology", topology], 30 * 60_000, { LAB_FLAVOUR: flavour });
        }
    });

    after(() => {
        try {
            hooks.tearDown?.();
        } finally {
            try {
                const why = keepLabUp ? labReusableFor(topology, flavour) : "not kept up (SPARK_LAB_KEEP_UP unset)";
                if (why !== "") {
                    if (keepLabUp) console.log(`lab: taking ${topology} down (${why})`);
                    lab(["down"], 5 * 60_000);
                }
            } finally {
                releaseLabLock();
            }
        }
    });
}

/**
 * Gives the calling suite the lab to itself: locked against other suites,
 * started from `down`, and `down` again at the end. `setUp` runs once the lab
 * is down and locked; `tearDown` runs before the final `down` (even if a test failed).
 */
export function withExclusiveLab(hooks: { setUp?: () => void | Promise<void>; tearDown?: () => void } = {}): void {
    before(async () => {
        requireLabPreconditions();
        await acquireLabLock();
        lab(["down"], 5 * 60_000);
        await hooks.setUp?.();
    });

    after(() => {
        try {
            hooks.tearDown?.();
        } finally {
            try {
                lab(["down"], 5 * 60_000);
            } finally {
                releaseLabLock();
            }
        }
    });
}
