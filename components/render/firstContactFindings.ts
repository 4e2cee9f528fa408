// Judging what the first-contact probe found (./firstContact.ts) against a node's config: each
// finding names the node, what was found (a file, a connection, an address, a figure) and, when
// it stops `up`, the key or command that fixes it. The cluster's node check and `npm run doctor`
// print the same findings.
import type { NodeKind } from "../../config";
import type { FirstContactFacts, LinkFact, NetplanDefinition } from "./firstContact";
import { bashScript, shellQuote } from "./host/shell";
import { HF_HOME_DIR } from "../../config/hostPaths";

/** ok: as it should be; note: fine, worth knowing; warn: may hurt, up goes on; block: up stops before any node changes. */
export type FindingLevel = "ok" | "note" | "warn" | "block";

export interface Finding {
    node: string;
    /** What the finding is about: login, memory, gpu, netplan, networkmanager, addresses, docker, disk, fit. */
    topic: string;
    level: FindingLevel;
    what: string;
    /** The key to set or the command to run (a block always has one). */
    fix?: string;
}

/** What a node's findings are judged against: its config, with its interface names resolved. */
export interface NodeContactSpec {
    node: string;
    /** Its index in `nodes`, for the keys the fixes name. */
    index: number;
    kind: NodeKind;
    gpus: number;
    /** The interconnect ports (names resolved) and the address each gets from us. */
    interfaces: { name: string; address: string }[];
    /** interconnect.takeOver. */
    takeOver: boolean;
    runtime: { kind: "docker"; image: string } | { kind: "venv" };
    /** The model's bytes on disk, when its size is known (model.size). */
    modelBytes?: number;
    /** metrics.enabled: the node runs node_exporter, and the head Prometheus too. */
    metrics?: { prometheus: boolean };
}

/** The key that opts into the take-over. */
export const TAKE_OVER_KEY = "spark-cluster:interconnect.takeOver";
const TAKE_OVER_FIX = `set interconnect.takeOver: true in the stack's config (${TAKE_OVER_KEY}): up moves them aside with a backup and destroy puts them back`;

/** What NVIDIA's images need free to be pulled: an NGC vLLM image is tens of GB (docs/how-it-works.md). */
export const IMAGE_PULL_FREE_BYTES = 40 * 2 ** 30;

const GIB = 2 ** 30;
const gib = (bytes: number) => `${(bytes / GIB).toFixed(1)} GiB`;

/** fnmatch as netplan's `match: name:` uses it: `*`, `?` and `[...]`. */
export function globMatches(pattern: string, name: string): boolean {
    let re = "^";
    for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i];
        if (c === "*") re += ".*";
        else if (c === "?") re += ".";
        else if (c === "[") {
            const end = pattern.indexOf("]", i + 1);
            if (end < 0) re += "\\[";
            else {
                re += `[${pattern
                    .slice(i + 1, end)
                    .replace(/^!/, "^")
                    .replace(/\\/g, "\\\\")}]`;
                i = end;
            }
        } else re += c.replace(/[.+^${}()|\\]/g, "\\$&");
    }
    return new RegExp(`${re}$`).test(name);
}

/** The node's interfaces an `ethernets` definition applies to: by its `match` (every key given must hold), else by its id; and its `set-name`. */
function ethernetTargets(def: NetplanDefinition, links: readonly LinkFact[]): string[] {
    const match = def.match;
    let names: string[];
    if (match !== undefined && typeof match === "object") {
        const drivers = match.driver === undefined ? undefined : Array.isArray(match.driver) ? match.driver : [match.driver];
        names = links
            .filter(
                (l) =>
                    (match.name === undefined || globMatches(String(match.name), l.name)) &&
                    (match.macaddress === undefined || String(match.macaddress).toLowerCase() === (l.mac ?? "").toLowerCase()) &&
                    (drivers === undefined || drivers.some((d) => l.driver !== undefined && globMatches(String(d), l.driver))),
            )
            .map((l) => l.name);
    } else {
        names = [def.id];
    }
    return def["set-name"] !== undefined ? [...names, String(def["set-name"])] : names;
}

/** One other tool's definition that touches one of our ports, and how. */
interface Touch {
    def: NetplanDefinition;
    iface: string;
    /** `defines` (an ethernets entry for the port) or `member` (a bond, bridge or vlan built on it). */
    how: "defines" | "member";
}

/** Every definition of other tools' netplan files that touches one of `ours`. */
export function netplanTouches(defs: readonly NetplanDefinition[], links: readonly LinkFact[], ours: readonly string[]): Touch[] {
    const ethernet = defs.filter((d) => d.kind === "ethernets");
    const namesOf = (id: string) => {
        const byId = ethernet.filter((d) => d.id === id);
        return byId.length > 0 ? byId.flatMap((d) => ethernetTargets(d, links)) : [id];
    };
    const touches: Touch[] = [];
    for (const def of defs) {
        if (def.kind === "ethernets") {
            for (const iface of ethernetTargets(def, links)) if (ours.includes(iface)) touches.push({ def, iface, how: "defines" });
        } else if ((def.kind === "bonds" || def.kind === "bridges") && Array.isArray(def.interfaces)) {
            for (const member of def.interfaces)
                for (const iface of namesOf(String(member))) if (ours.includes(iface)) touches.push({ def, iface, how: "member" });
        } else if (def.kind === "vlans" && def.link !== undefined) {
            for (const iface of namesOf(String(def.link))) if (ours.includes(iface)) touches.push({ def, iface, how: "member" });
        }
    }
    return touches;
}

/** What the take-over does with one file: moves it aside (it only defines our ports), or rewrites it without them (it defines others too). */
export function takeOverAction(file: string, defs: readonly NetplanDefinition[], touches: readonly Touch[]): "move" | "rewrite" {
    const inFile = defs.filter((d) => d.file === file);
    const ours = new Set(touches.filter((t) => t.def.file === file && t.how === "defines").map((t) => t.def));
    return inFile.every((d) => ours.has(d)) ? "move" : "rewrite";
}

/** The keys and values a definition sets, for a person: `link-local: [ipv4], mtu: 1500 (renderer NetworkManager)`. */
function describeDefinition(def: NetplanDefinition): string {
    const shown = (["addresses", "mtu", "dhcp4", "dhcp6", "link-local"] as const)
        .filter((k) => def[k] !== undefined)
        .map((k) => `${k}: ${JSON.stringify(def[k])}`);
    const others = def.keys.filter((k) => !["addresses", "mtu", "dhcp4", "dhcp6", "link-local", "renderer", "match", "set-name", "networkmanager"].includes(k));
    const nm = def.networkmanager?.name !== undefined ? `; NetworkManager profile "${def.networkmanager.name}"` : "";
    return `${[...shown, ...(others.length > 0 ? [`also ${others.join(", ")}`] : [])].join(", ") || "no settings"}${def.renderer ? ` (renderer ${def.renderer})` : ""}${nm}`;
}

/** The findings of one node. */
export function nodeFindings(spec: NodeContactSpec, facts: FirstContactFacts): Finding[] {
    const findings: Finding[] = [];
    const add = (topic: string, level: Finding["level"], what: string, fix?: string) =>
        findings.push({ node: spec.node, topic, level, what, ...(fix !== undefined ? { fix } : {}) });
    const ours = spec.interfaces.map((i) => i.name);
    const key = (k: string) => `spark-cluster:nodes[${spec.index}].${k}`;

    // Memory and GPUs.
    if (facts.memory.totalKiB !== undefined) {
        const total = facts.memory.totalKiB * 1024;
        const available = facts.memory.availableKiB !== undefined ? `, ${gib(facts.memory.availableKiB * 1024)} available` : "";
        add("memory", "ok", `${gib(total)} in all${available}`);
    } else {
        add("memory", "warn", "/proc/meminfo gives no MemTotal: the fit check uses the configured memory");
    }
    if ("missing" in facts.gpu) {
        add("gpu", "block", facts.gpu.missing, "install the NVIDIA driver (DGX OS ships it; on a workstation: the driver for its GPU), then run doctor again");
    } else {
        const names = facts.gpu.gpus.map((g) => g.name);
        const summary = `${names.length} GPU${names.length === 1 ? "" : "s"}${names.length > 0 ? `: ${[...new Set(names)].join(", ")}` : ""}`;
        if (names.length < spec.gpus)
            add("gpu", "block", `${summary}, but the config says ${spec.gpus}`, `set ${key("gpus")}: ${names.length}, or check the driver (nvidia-smi)`);
        else {
            const expected = spec.kind === "spark" ? /GB10/ : spec.kind === "thor" ? /Thor/i : undefined;
            if (expected !== undefined && !names.every((n) => expected.test(n))) {
                add("gpu", "warn", `${summary}: not what a ${spec.kind} has`, `check ${key("kind")} (spark, thor or workstation)`);
            } else add("gpu", "ok", summary);
        }
    }

    // Netplan: other tools' files that define our ports, and files netplan cannot read.
    const np = facts.netplan;
    if (np.error !== undefined) add("netplan", "block", np.error, "apt install python3-yaml (netplan.io needs it too)");
    for (const u of np.unreadable)
        add("netplan", "block", `${u.file} cannot be read as YAML: ${u.error}`, `fix or remove ${u.file}: netplan apply would fail on it too`);
    if (np.netplanError !== undefined)
        add(
            "netplan",
            "block",
            `netplan cannot read its configuration: ${np.netplanError}`,
            "fix the file netplan names (netplan get shows the error), then run doctor again",
        );
    const others = np.definitions.filter((d) => d.ours !== true);
    // What our own file (an earlier up's) gives the ports: not foreign, the interconnect step replaces it.
    const ourAddresses = new Set(np.definitions.filter((d) => d.ours === true).flatMap((d) => (Array.isArray(d.addresses) ? d.addresses.map(String) : [])));
    const touches = netplanTouches(others, facts.links, ours);
    const byFile = new Map<string, Touch[]>();
    for (const t of touches) byFile.set(t.def.file, [...(byFile.get(t.def.file) ?? []), t]);
    for (const [file, fileTouches] of byFile) {
        const members = fileTouches.filter((t) => t.how === "member");
        if (members.length > 0) {
            for (const t of members) {
                add(
                    "netplan",
                    "block",
                    `${file}: ${t.def.kind} ${t.def.id} is built on ${t.iface}, an interconnect port`,
                    `take ${t.iface} out of ${t.def.id} in ${file} (or pick other ports in ${key("interconnect")}); the take-over moves definitions of a port, it does not split a ${t.def.kind.replace(/s$/, "")}`,
                );
            }
            continue;
        }
        const defs = fileTouches.map((t) => `${t.iface} (${describeDefinition(t.def)})`).join("; ");
        if (spec.takeOver) {
            const action = takeOverAction(file, others, fileTouches);
            add(
                "netplan",
                "note",
                `${file} defines ${defs}: the take-over ${action === "move" ? "moves the file aside" : `rewrites it without ${[...new Set(fileTouches.map((t) => t.def.id))].join(", ")}`}, and destroy puts it back as it was`,
            );
        } else {
            add("netplan", "block", `${file} defines ${defs}`, `${TAKE_OVER_FIX}; or remove those definitions from ${file} yourself and run netplan apply`);
        }
    }

    // NetworkManager on our ports.
    const nm = facts.networkManager;
    if (nm.state === "running") {
        for (const iface of ours) {
            const device = nm.devices.find((d) => d.device === iface);
            const mac = facts.links.find((l) => l.name === iface)?.mac?.toLowerCase();
            const profiles = nm.connections.filter(
                (c) => c.device === iface || c.interfaceName === iface || (mac !== undefined && c.mac !== "" && c.mac.replace(/\\/g, "") === mac),
            );
            const named = profiles.map((c) => `"${c.name}" (${c.uuid}${c.active ? ", active" : ""}${c.file ? `, ${c.file}` : ""})`).join(", ");
            if (device === undefined || device.state === "unmanaged") {
                if (profiles.length > 0) add("networkmanager", "ok", `${iface} is unmanaged; its profiles ${named} stay as they are`);
                continue;
            }
            const what = `NetworkManager manages ${iface} (${device.state}${device.connection && device.connection !== "--" ? `, connection "${device.connection}"` : ""})${profiles.length > 0 ? `; profiles: ${named}` : ""}`;
            if (spec.takeOver)
                add(
                    "networkmanager",
                    "note",
                    `${what}: the take-over makes NetworkManager leave it alone (a conf.d drop-in), and destroy reconnects what was active`,
                );
            else
                add(
                    "networkmanager",
                    "block",
                    what,
                    `${TAKE_OVER_FIX}; or mark ${iface} unmanaged in NetworkManager yourself (nmcli device set ${iface} managed no is lost at reboot: use a conf.d file)`,
                );
        }
    } else if (nm.state === "stopped") {
        add("networkmanager", "ok", "installed but not running");
    }

    // Addresses on our ports that are not ours.
    for (const iface of spec.interfaces) {
        const link = facts.links.find((l) => l.name === iface.name);
        if (link === undefined) {
            add("addresses", "block", `no interface ${iface.name}`, `check ${key("interconnect")} names (ibdev2netdev lists the ConnectX ports)`);
            continue;
        }
        const foreign = link.addresses.filter((a) => a !== iface.address && !ourAddresses.has(a));
        if (foreign.length === 0) continue;
        if (spec.takeOver)
            add("addresses", "note", `${iface.name} has ${foreign.join(", ")}: the take-over removes them (their owner puts them back after destroy)`);
        else
            add(
                "addresses",
                "block",
                `${iface.name} has ${foreign.join(", ")}, which the config does not give it`,
                `${TAKE_OVER_FIX}; or remove them (ip addr del ADDRESS dev ${iface.name}) and what sets them`,
            );
    }
    if (facts.takeOver.inPlace && !spec.takeOver) {
        add(
            "netplan",
            "block",
            `our take-over is in place (${facts.takeOver.files.join(", ") || "NetworkManager"} moved aside at an earlier up), but interconnect.takeOver is not set`,
            "keep interconnect.takeOver: true while the stack is deployed (pulumi destroy puts the files back), or destroy first",
        );
    }

    // Docker and what --gpus needs (docker runtime).
    if (spec.runtime.kind === "docker") {
        const d = facts.docker;
        const venvFix = `or run this node with ${key("runtime")}: { kind: venv, path: ... }`;
        if (d === undefined || d.state === "absent")
            add("docker", "block", "Docker is not installed", `install Docker and the NVIDIA Container Toolkit (DGX OS has both), ${venvFix}`);
        else if (d.state === "down") add("docker", "block", `the Docker daemon does not answer: ${d.error}`, "systemctl enable --now docker");
        else {
            if (!d.gpuHook)
                add(
                    "docker",
                    "block",
                    "docker run --gpus would fail: no nvidia-container-runtime-hook (NVIDIA Container Toolkit)",
                    "apt install nvidia-container-toolkit && systemctl restart docker",
                );
            else add("docker", "ok", `Docker ${d.version}, NVIDIA Container Toolkit present`);
            if (d.image !== undefined) add("docker", "ok", `${spec.runtime.image} is here (${d.image.id.slice(0, 19)}, ${gib(d.image.bytes)})`);
            else add("docker", "note", `${spec.runtime.image} is not here yet: the first up pulls it (tens of GB from nvcr.io)`);
        }
    }

    // Free disk for the model (and the image to pull).
    const free = (path: string) => facts.disk.find((d) => d.path === path)?.freeBytes;
    const hfFree = free(HF_HOME_DIR);
    if (hfFree !== undefined && spec.modelBytes !== undefined) {
        if (hfFree < spec.modelBytes * 1.05) {
            add(
                "disk",
                "block",
                `${gib(hfFree)} free for the model cache, the model needs about ${gib(spec.modelBytes)}`,
                "free disk space on the node (docker system prune, old models under /root/.cache/huggingface/hub)",
            );
        } else add("disk", "ok", `${gib(hfFree)} free for the model (about ${gib(spec.modelBytes)})`);
    } else if (hfFree !== undefined) add("disk", "ok", `${gib(hfFree)} free for the model cache`);
    const dockerFree = free("/var/lib/docker");
    if (
        spec.runtime.kind === "docker" &&
        facts.docker?.state === "running" &&
        facts.docker.image === undefined &&
        dockerFree !== undefined &&
        dockerFree < IMAGE_PULL_FREE_BYTES
    ) {
        add(
            "disk",
            "warn",
            `${gib(dockerFree)} free for Docker, and ${spec.runtime.image} still has to be pulled (tens of GB)`,
            "free disk space for Docker (docker system prune)",
        );
    }
    // Metrics: the packages' binaries and their user (made by either package).
    const tools = facts.metricsTools;
    if (spec.metrics !== undefined && tools !== undefined) {
        const missing = [...(tools.exporter ? [] : ["prometheus-node-exporter"]), ...(spec.metrics.prometheus && !tools.prometheus ? ["prometheus"] : [])];
        if (missing.length > 0 || !tools.user) {
            add(
                "metrics",
                "block",
                missing.length > 0
                    ? `metrics.enabled needs ${missing.join(" and ")}, which the node lacks`
                    : "the user prometheus (made by the packages) is missing",
                `apt-get install ${missing.length > 0 ? missing.join(" ") : "--reinstall prometheus-node-exporter"} on ${spec.node} (our units run them on ports of their own; the packages' own services may be stopped with systemctl disable --now), or set spark-cluster:metrics.enabled to false`,
            );
        } else add("metrics", "ok", `node_exporter${spec.metrics.prometheus ? " and Prometheus" : ""} installed`);
    }
    return findings;
}

/** Findings that stop `up`. */
export function blocking(findings: readonly Finding[]): Finding[] {
    return findings.filter((f) => f.level === "block");
}

/**
 * The cluster's node check: prints every finding of every node (the fine ones aside), then each
 * fix once, and fails when one blocks, so `up` stops before any node changes (every host layer
 * waits for this step). The facts are those of the nodes' probe steps, which a plain `up` keeps:
 * after fixing a node, `up --refresh` reads it again.
 */
export function nodeCheckScript(findings: readonly Finding[]): string {
    const blocks = blocking(findings);
    const fixes = [...new Set(blocks.map((f) => f.fix).filter((fix): fix is string => fix !== undefined))];
    return bashScript([
        ...findings.filter((f) => f.level !== "ok").map((f) => `echo ${shellQuote(`${f.node} ${f.topic} ${f.level.toUpperCase()}: ${f.what}`)}`),
        ...(blocks.length > 0
            ? [
                  `echo ${shellQuote(`spark-cluster: the node check found ${blocks.length} problem${blocks.length === 1 ? "" : "s"} (BLOCK above); nothing was changed on any node. To fix:`)} >&2`,
                  ...fixes.map((fix) => `echo ${shellQuote(`  - ${fix}`)} >&2`),
                  `echo ${shellQuote("then run pulumi up --refresh (it reads the nodes again); npm run doctor -- --stack NAME shows the findings as the nodes are now.")} >&2`,
                  `exit 1`,
              ]
            : [`echo ${shellQuote(`node check: ${findings.length} findings, none blocks`)}`]),
    ]);
}
