/**
 * What the integration suites share: a throwaway Pulumi backend with a copy of the lab stack's
 * config per suite, the project's CLI wrapper run against it, SSH into lab nodes, a chat request
 * through the endpoint, and a bounded wait until the endpoint answers again (fault tests).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { sleep, ssh as labSsh } from "../lab/lab-harness";
import { deriveSecret } from "../../components/clusterSecrets";
import { RANDOM_SECRET_TYPE } from "../../components/sparkRemote";
import { CONFIG_DIR, FIREWALLED_UNITS, GATE_STATE_DIR, NETPLAN_PATH, PEERMEM_CONF, STATE_DIR, UNITS, dropInDir, unitPath } from "../../config/hostPaths";

/** Everything of ours on a node: what a destroy must remove (spark-pair, hostState). */
export const OUR_PATHS = [
    NETPLAN_PATH,
    CONFIG_DIR,
    STATE_DIR,
    unitPath(UNITS.ray),
    unitPath(UNITS.vllm),
    unitPath(UNITS.vllmFollow),
    unitPath(UNITS.vllmWatchdog),
    unitPath(UNITS.rayWatchdog),
    GATE_STATE_DIR,
    unitPath(UNITS.pfc),
    unitPath(UNITS.firewall),
    // The firewall's drop-ins' directories (ours alone in the lab).
    ...FIREWALLED_UNITS.map(dropInDir),
    PEERMEM_CONF,
];
export const root = path.resolve(__dirname, "..", "..", "..");
export const labKey = path.join(root, "lab", ".state", "id_ed25519");
/** Management addresses of the lab's nodes (lab/README.md, "Fixed interface"). */
export const nodes = {
    "spark-a": "10.77.0.11",
    "spark-b": "10.77.0.12",
    "thor-a": "10.77.0.21",
    "thor-b": "10.77.0.22",
    outsider: "10.77.0.99",
} as const;
export type NodeName = keyof typeof nodes;

/** A suite's scratch: a throwaway backend and a copy of the lab stack's config it may change. */
export interface Session {
    work: string;
    backend: string;
    configFile: string;
}

/** A fresh session whose config is Pulumi.dev.yaml passed through `adapt`. */
export function newSession(adapt: (config: string) => string = (c) => c): Session {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-it-"));
    const session = { work, backend: path.join(work, "backend"), configFile: path.join(work, "Pulumi.dev.yaml") };
    fs.mkdirSync(session.backend, { recursive: true });
    fs.writeFileSync(session.configFile, adapt(fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8")));
    return session;
}

/**
 * The lab's container images (lab/lib/nodes.sh LAB_DOCKER_IMAGES): Pulumi.dev.yaml names 25.09-py3
 * (vLLM 0.10.1.1 with Ray) for its Ray executor; the mp executor's multi-node flags (--nnodes ...)
 * need vLLM 0.11.1 or later, so an mp stack names 26.10-py3 (vLLM 0.31.0, no Ray) or 26.05-py3.
 */
export const LAB_IMAGES = {
    ray: "nvcr.io/nvidia/vllm:25.09-py3",
    v2605: "nvcr.io/nvidia/vllm:26.05-py3",
    v2610: "nvcr.io/nvidia/vllm:26.10-py3",
} as const;

/**
 * The lab's stand-in for SGLang's own image (lab/lib/nodes.sh LAB_DOCKER_SGLANG_IMAGES): the SGLang
 * stand-in playing SGLang 0.5.23, no vLLM, tagged like the real lmsysorg/sglang CUDA 13 image.
 */
export const LAB_SGLANG_IMAGE = "lmsysorg/sglang:v0.5.23-cu130";

/** The config with every docker runtime's image set to `image` (the lab stack names one on each node). */
export function withImage(config: string, image: string): string {
    const out = config.replace(/(runtime: \{kind: docker, image: )[^,}\s]+/g, `$1${image}`);
    assert.match(config, /runtime: \{kind: docker, image: /, "the stack names an image on its docker runtimes");
    return out;
}

/** Runs a program of the project (or ssh); throws with its output when it fails. */
export function run(session: Session | undefined, file: string, args: string[], timeoutSeconds = 900): string {
    try {
        return execFileSync(file, args, {
            cwd: root,
            encoding: "utf8",
            timeout: timeoutSeconds * 1000,
            stdio: ["ignore", "pipe", "pipe"],
            env: {
                ...process.env,
                ...(session ? { PULUMI_BACKEND_URL: `file://${session.backend}` } : {}),
                PULUMI_CONFIG_PASSPHRASE: "",
                PULUMI_CONFIG_PASSPHRASE_FILE: "",
            },
        });
    } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        throw new Error(`${path.basename(file)} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
    }
}

/** `scripts/pulumi.sh --stack dev ARGS` against the session's backend. */
export function pulumi(session: Session, ...args: string[]): string {
    return run(session, path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", ...args]);
}

/** Commands that read stack config take the session's copy of it. */
export function pulumiWithConfig(session: Session, ...args: string[]): string {
    return pulumi(session, ...args, "--config-file", session.configFile);
}

/** Sets one key of the session's config (`--path` form, e.g. `spark-cluster:model.executor`). */
export function setConfig(session: Session, key: string, value: string): void {
    pulumiWithConfig(session, "config", "set", "--path", key, value);
}

/** The lab stack's API key (decrypted with the lab passphrase). */
export function apiKeyOf(session: Session): string {
    const key = pulumiWithConfig(session, "config", "get", "spark-cluster:apiKey").trim();
    assert.ok(key.length >= 16, "the lab stack has an API key");
    return key;
}

/**
 * A secret the program derives from the stack's root secret (components/clusterSecrets.ts), read
 * from the state (`stack export --show-secrets`): for tests that look for it where it must not be.
 */
export function derivedSecretOf(session: Session, purpose: string): string {
    const state = JSON.parse(pulumi(session, "stack", "export", "--show-secrets")) as {
        deployment: { resources?: { type: string; outputs?: { value?: unknown } }[] };
    };
    const roots = (state.deployment.resources ?? []).filter((r) => r.type === RANDOM_SECRET_TYPE);
    assert.equal(roots.length, 1, "the stack has one root secret");
    // A secret output comes decrypted as { <secret signature>, plaintext: <the value as JSON> }.
    const stored = roots[0].outputs?.value as { plaintext?: string } | string | undefined;
    const value: unknown = typeof stored === "object" && typeof stored.plaintext === "string" ? JSON.parse(stored.plaintext) : stored;
    assert.ok(typeof value === "string" && /^[0-9a-f]{64}$/.test(value), "the root secret is 32 bytes in hex");
    return deriveSecret(value, purpose);
}

export function removeSession(session: Session): void {
    try {
        pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
    } catch {
        // Already destroyed by the test, or the lab is going down next either way.
    }
    fs.rmSync(session.work, { recursive: true, force: true });
}

/** ssh root@NODE SCRIPT, throwing when it fails. */
export function ssh(node: NodeName, script: string, timeoutSeconds = 120): string {
    return labSsh(node, script, timeoutSeconds * 1000);
}

/**
 * Each interface's IPv6 link-local state: its address generation mode and its fe80::/64 addresses
 * (sorted), as a destroy must leave them (our netplan file turns link-local addressing off).
 */
export function linkLocalState(node: NodeName, interfaces: readonly string[]): Record<string, string> {
    return Object.fromEntries(
        interfaces.map((name) => [
            name,
            ssh(
                node,
                `echo "mode=$(cat /proc/sys/net/ipv6/conf/${name}/addr_gen_mode)"; ip -6 -o addr show dev ${name} scope link | awk '{print $4}' | sort`,
            ).trim(),
        ]),
    );
}

/**
 * A few lines on the state of a node, for the message of a test that failed on it (CI keeps the last
 * 30 lines of each failure): each unit of ours (state, main PID, restarts, result), what listens on
 * TCP, the containers, journald, MemAvailable, the disks' use, which restart gates stopped their unit, and the node's
 * last journal lines (but our SSH sessions'). Best effort: a node
 * that does not answer says so.
 */
export function nodeReport(node: NodeName, journalLines = 6): string {
    const script = [
        `for u in $(systemctl list-units --all --no-legend --plain 'spark-cluster*' | awk '{ print $1 }'); do`,
        `  echo "unit $(systemctl show -p Id -p ActiveState -p SubState -p MainPID -p NRestarts -p Result "$u" | cut -d= -f2 | paste -sd' ')"`,
        "done",
        `echo "listening: $(ss -Hltn | awk '{ print $4 }' | paste -sd' ')"`,
        `echo "containers: $( (docker ps -a --format '{{.Names}} {{.Status}}' 2>/dev/null || echo none) | paste -sd';')"`,
        `echo "journald $(systemctl is-active systemd-journald); $(grep MemAvailable /proc/meminfo); disk used: $(df --output=target,pcent / /var/lib/docker /tmp 2>/dev/null | tail -n +2 | sort -u | paste -sd' ')"`,
        `echo "gate stopped: $(ls ${GATE_STATE_DIR}/*/stopped 2>/dev/null | paste -sd' ')"`,
        // Not our own SSH sessions' lines.
        `journalctl -n 300 -o short-precise --no-pager | grep -vE 'sshd\\[|systemd-logind|session-[0-9]+\\.scope|user@0|user-runtime-dir' | tail -n ${journalLines} | cut -c1-200`,
    ].join("\n");
    try {
        return ssh(node, script, 30)
            .trim()
            .split("\n")
            .map((line) => `${node}: ${line}`)
            .join("\n");
    } catch (err) {
        return `${node}: no report (${(err as Error).message.split("\n")[0]})`;
    }
}

export function mainPid(node: NodeName, unit: string): string {
    return ssh(node, `systemctl show -p MainPID --value ${unit}.service`).trim();
}

/** A chat completion through the endpoint; returns the answer's text. */
export async function chat(endpoint: string, apiKey: string, model: string, timeoutMs = 60_000): Promise<string> {
    const response = await fetch(`${endpoint}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "Where do you run?" }], max_tokens: 64 }),
        signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    assert.equal(response.status, 200, `chat completion answered ${response.status}: ${text}`);
    const body = JSON.parse(text) as { model: string; choices: { message: { content: string } }[] };
    assert.equal(body.model, model);
    return body.choices[0].message.content;
}

/**
 * A fault as it happens: stops `pid` on `node` (`kill -STOP`), asks `healed` every 2 s for at most
 * `seconds`, and continues the process (`kill -CONT`) whatever happened. Returns the seconds from
 * the stop until `healed` was true, or -1 when it never was.
 */
export async function secondsFrozenUntil(node: NodeName, pid: string, seconds: number, healed: () => boolean): Promise<number> {
    ssh(node, `kill -STOP ${pid}`);
    const stopped = Date.now();
    try {
        for (let i = 0; i < Math.ceil(seconds / 2); i++) {
            await sleep(2000);
            if (healed()) return Math.round((Date.now() - stopped) / 1000);
        }
        return -1;
    } finally {
        ssh(node, `kill -CONT ${pid} 2>/dev/null || true`);
    }
}

/**
 * Waits (bounded) until a chat request through the endpoint is answered again, and returns how
 * long it took in seconds. Tries every 2 s; each try is itself bounded.
 */
export async function secondsUntilAnswering(endpoint: string, apiKey: string, model: string, limitSeconds: number): Promise<{ seconds: number; text: string }> {
    const start = Date.now();
    let last = "";
    for (let attempt = 0; attempt < 10_000; attempt++) {
        try {
            const text = await chat(endpoint, apiKey, model, 10_000);
            return { seconds: Math.round((Date.now() - start) / 100) / 10, text };
        } catch (err) {
            last = (err as Error).message;
        }
        if (Date.now() - start > limitSeconds * 1000) {
            break;
        }
        await sleep(2000);
    }
    throw new Error(`the endpoint did not answer within ${limitSeconds} s; last error: ${last}`);
}

/** A member to scan: the addresses to try it on, and the ports that must stay open to everyone. */
export interface ScanTarget {
    node: NodeName;
    addresses: string[];
    open: number[];
}

/**
 * Every TCP port the targets listen on (as `ss` lists them, loopback-only sockets left out) but the
 * open ones is tried from the outsider node, on every address given; each must fail (refused, or
 * no route). Returns how many were tried, and fails when any connected.
 */
export function scanFromOutsider(targets: readonly ScanTarget[], outsider: NodeName = "outsider"): { tried: number; ports: string[] } {
    const probes: string[] = [];
    for (const target of targets) {
        const listening = ssh(target.node, "ss -Hltn")
            .split("\n")
            .map((line) => line.trim().split(/\s+/)[3] ?? "")
            .filter((local) => local !== "" && !/^(127\.|\[::1\])/.test(local))
            .map((local) => Number(local.slice(local.lastIndexOf(":") + 1)));
        const ports = [...new Set(listening)].filter((port) => !target.open.includes(port)).sort((a, b) => a - b);
        for (const address of target.addresses) {
            probes.push(...ports.map((port) => `${address}:${port}`));
        }
    }
    assert.ok(probes.length > 0, "the members listen on internal ports to scan: an empty scan proves nothing");
    const script = probes
        .map((probe) => {
            const [address, port] = probe.split(":");
            return `timeout 3 bash -c 'exec 3<>/dev/tcp/${address}/${port}' 2>/dev/null && echo "OPEN ${probe}"`;
        })
        .concat(["true"])
        .join("\n");
    const open = ssh(outsider, script, 600).trim();
    assert.equal(open, "", `the outsider reached internal ports:\n${open}`);
    return { tried: probes.length, ports: probes };
}
