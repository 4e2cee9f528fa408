// First contact: what a node is like before we change anything on it, as its owner left it.
// Each fact is its read-only command and its parser (./facts.ts); `nodeFindings` judges them
// against the node's config, and the cluster's node check (`nodeCheckScript`) and
// `npm run doctor` print the same findings. A finding that blocks stops `up` before any node
// changes, naming the node, the file or connection, and the key or command that fixes it.
import { shellQuote } from "./host/shell";
import { heredoc } from "./host/shell";
import { FACT_SECTION_PREFIX, Fact, factsScript, parseFacts } from "./facts";
import { readScript } from "./host/read";
import { HF_HOME_DIR, NETPLAN_PATH, TAKEOVER_STATE_DIR } from "../../config/hostPaths";
import { METRICS_USER, NODE_EXPORTER_BIN, PROMETHEUS_BIN } from "./metrics";

// --------------------------------------------------------------------------------------------
// The facts

/** /proc/meminfo's totals (unified memory: what the GPU shares with the OS). */
export interface MemoryFact {
    totalKiB?: number;
    availableKiB?: number;
}

export const memoryFact: Fact<MemoryFact> = {
    name: "memory",
    lines: [`grep -E '^(MemTotal|MemAvailable):' /proc/meminfo`],
    parse(section) {
        const value = (key: string) => {
            const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(section);
            return m ? Number(m[1]) : undefined;
        };
        const totalKiB = value("MemTotal");
        const availableKiB = value("MemAvailable");
        return { ...(totalKiB !== undefined ? { totalKiB } : {}), ...(availableKiB !== undefined ? { availableKiB } : {}) };
    },
};

/** The GPUs nvidia-smi lists (memory undefined where it reports [N/A], as on a GB10), or why none. */
export type GpuFact = { gpus: { name: string; memoryMiB?: number }[] } | { missing: string };

export const gpuFact: Fact<GpuFact> = {
    name: "gpu",
    lines: [
        `command -v nvidia-smi >/dev/null || { echo "nvidia-smi=missing"; exit 0; }`,
        `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits || echo "nvidia-smi=failed"`,
    ],
    parse(section) {
        const lines = section.split("\n").filter((l) => l.trim() !== "");
        if (lines.includes("nvidia-smi=missing")) return { missing: "nvidia-smi is not installed (no NVIDIA driver)" };
        if (lines.includes("nvidia-smi=failed"))
            return {
                missing: `nvidia-smi failed: ${lines
                    .filter((l) => l !== "nvidia-smi=failed")
                    .join(" ")
                    .slice(0, 200)}`,
            };
        return {
            gpus: lines.map((line) => {
                const comma = line.lastIndexOf(",");
                const name = (comma < 0 ? line : line.slice(0, comma)).trim();
                const memory = comma < 0 ? NaN : Number(line.slice(comma + 1).trim());
                return Number.isFinite(memory) ? { name, memoryMiB: memory } : { name };
            }),
        };
    },
};

/** One interface as `ip -j addr` and sysfs report it. */
export interface LinkFact {
    name: string;
    mac?: string;
    driver?: string;
    mtu?: number;
    state?: string;
    /** IPv4 and global IPv6 addresses with their prefix: `169.254.3.7/16`. */
    addresses: string[];
}

/**
 * Python that prints each interface of `ip -j addr` as one JSON line: name, MAC, MTU, state, driver
 * (sysfs), and its IPv4 and global IPv6 addresses, sorted: no lifetimes or counters, so the same
 * node prints the same lines (the read-back compares them).
 */
const LINKS_PY = String.raw`import json, os, sys
for l in json.load(sys.stdin):
    n = l.get("ifname", "")
    d = "/sys/class/net/%s/device/driver" % n
    addrs = sorted("%s/%s" % (a.get("local"), a.get("prefixlen")) for a in l.get("addr_info", [])
                   if a.get("family") == "inet" or (a.get("family") == "inet6" and a.get("scope") not in ("link", "host")))
    print(json.dumps({"name": n, "mac": l.get("address"), "mtu": l.get("mtu"), "state": l.get("operstate"),
                      "driver": os.path.basename(os.path.realpath(d)) if os.path.exists(d) else "", "addresses": addrs}, sort_keys=True))
`;

export const linksFact: Fact<LinkFact[]> = {
    name: "links",
    lines: [`ip -j addr show | python3 -c ${shellQuote(LINKS_PY)}`],
    parse(section) {
        return section.split("\n").flatMap((line): LinkFact[] => {
            if (!line.startsWith("{")) return [];
            let link: Record<string, unknown>;
            try {
                link = JSON.parse(line) as Record<string, unknown>;
            } catch {
                return [];
            }
            return [
                {
                    name: String(link["name"] ?? ""),
                    ...(typeof link["mac"] === "string" ? { mac: link["mac"] } : {}),
                    ...(typeof link["driver"] === "string" && link["driver"] !== "" ? { driver: link["driver"] } : {}),
                    ...(typeof link["mtu"] === "number" ? { mtu: link["mtu"] } : {}),
                    ...(typeof link["state"] === "string" ? { state: link["state"] } : {}),
                    addresses: Array.isArray(link["addresses"]) ? link["addresses"].map(String) : [],
                },
            ];
        });
    },
};

/** One definition in a netplan file that is not ours: enough to tell whether it names one of our interfaces, and what it sets. */
export interface NetplanDefinition {
    file: string;
    /** `ethernets`, `bonds`, `bridges`, `vlans`, ... */
    kind: string;
    id: string;
    /** Every key the definition sets (names only: no values of other tools leave the node but those below). */
    keys: string[];
    renderer?: string;
    addresses?: unknown;
    mtu?: unknown;
    dhcp4?: unknown;
    dhcp6?: unknown;
    "link-local"?: unknown;
    "set-name"?: string;
    /** bonds and bridges: their member ids. */
    interfaces?: string[];
    /** vlans: the id of the link they ride on. */
    link?: string;
    match?: { name?: string; macaddress?: string; driver?: string | string[] };
    /** A NetworkManager profile stored as netplan YAML (DGX OS's `90-NM-<uuid>.yaml`). */
    networkmanager?: { uuid?: string; name?: string };
    /** A definition of our own file (an earlier up's): not another tool's. */
    ours?: boolean;
}

/** The other tools' netplan definitions (and ours, marked), files netplan or Python could not read, and what `netplan get` says of the whole. */
export interface NetplanFact {
    definitions: NetplanDefinition[];
    unreadable: { file: string; error: string }[];
    /** Set when this node cannot list them (no python3-yaml). */
    error?: string;
    /** `netplan get` failed: netplan itself cannot read the configuration (its message). */
    netplanError?: string;
}

/**
 * Python (3.8+, with PyYAML, which netplan.io needs) that prints one JSON line per definition of
 * every netplan file, in netplan's own order of precedence (/run over /etc over /lib for files of
 * the same name); ours (an earlier up's) marked `ours`. Only key names and the values named in
 * `KEEP` leave the node.
 */
export const NETPLAN_DEFINITIONS_PY = String.raw`import glob, json, os, sys
ours = sys.argv[1]
try:
    import yaml
except Exception as e:
    print(json.dumps({"error": "python3 cannot import yaml (%s): install python3-yaml" % e}))
    sys.exit(0)
files = {}
for d in ("/lib/netplan", "/usr/lib/netplan", "/etc/netplan", "/run/netplan"):
    for p in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        files[os.path.basename(p)] = p
KINDS = ("ethernets", "bonds", "bridges", "vlans", "vrfs", "tunnels", "wifis", "modems", "dummy-devices", "virtual-ethernets", "nm-devices")
KEEP = ("addresses", "mtu", "dhcp4", "dhcp6", "link-local", "set-name", "interfaces", "link", "match")
for name in sorted(files):
    path = files[name]
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except Exception as e:
        print(json.dumps({"file": path, "unreadable": (str(e).splitlines() or ["?"])[0][:300]}))
        continue
    net = doc.get("network") if isinstance(doc, dict) else None
    if not isinstance(net, dict):
        continue
    for kind in KINDS:
        defs = net.get(kind)
        if not isinstance(defs, dict):
            continue
        for ident, d in defs.items():
            d = d if isinstance(d, dict) else {}
            e = {"file": path, "kind": kind, "id": str(ident), "keys": sorted(str(k) for k in d)}
            if path == ours:
                e["ours"] = True
            r = d.get("renderer", net.get("renderer"))
            if r is not None:
                e["renderer"] = str(r)
            for k in KEEP:
                if k in d:
                    e[k] = d[k]
            nm = d.get("networkmanager")
            if isinstance(nm, dict):
                e["networkmanager"] = {k: str(nm[k]) for k in ("uuid", "name") if k in nm}
            print(json.dumps(e, default=str, sort_keys=True))
`;

export const netplanFact: Fact<NetplanFact> = {
    name: "netplan",
    lines: [
        heredoc(`python3 - ${shellQuote(NETPLAN_PATH)}`, NETPLAN_DEFINITIONS_PY),
        `if command -v netplan >/dev/null; then`,
        `  if out=$(netplan get 2>&1 >/dev/null); then echo "netplan-get=ok"; else echo "netplan-get-error=$(printf '%s' "$out" | tr '\\n' ' ' | cut -c1-300)"; fi`,
        `else`,
        `  echo "netplan-get-error=netplan is not installed"`,
        `fi`,
    ],
    parse(section) {
        const fact: NetplanFact = { definitions: [], unreadable: [] };
        for (const line of section.split("\n")) {
            if (line.startsWith("netplan-get-error=")) {
                fact.netplanError = line.slice("netplan-get-error=".length).trim();
                continue;
            }
            if (!line.startsWith("{")) continue;
            let entry: Record<string, unknown>;
            try {
                entry = JSON.parse(line) as Record<string, unknown>;
            } catch {
                continue;
            }
            if (typeof entry["error"] === "string") fact.error = entry["error"];
            else if (typeof entry["unreadable"] === "string") fact.unreadable.push({ file: String(entry["file"]), error: entry["unreadable"] });
            else fact.definitions.push(entry as unknown as NetplanDefinition);
        }
        return fact;
    },
};

/** NetworkManager: not installed, installed but stopped, or running with its devices and profiles. */
export type NetworkManagerFact =
    | { state: "absent" | "stopped" }
    | {
          state: "running";
          devices: { device: string; type: string; state: string; connection: string }[];
          connections: { uuid: string; type: string; active: boolean; device: string; file: string; name: string; interfaceName: string; mac: string }[];
      };

/** Splits one line of `nmcli -t -e yes` output: fields separated by `:`, with `\:` and `\\` escaped. */
export function nmcliFields(line: string): string[] {
    const fields: string[] = [];
    let field = "";
    for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (c === "\\" && i + 1 < line.length) {
            field += line[++i];
        } else if (c === ":") {
            fields.push(field);
            field = "";
        } else {
            field += c;
        }
    }
    fields.push(field);
    return fields;
}

export const networkManagerFact: Fact<NetworkManagerFact> = {
    name: "networkmanager",
    lines: [
        `command -v nmcli >/dev/null || { echo "nm=absent"; exit 0; }`,
        `systemctl is-active --quiet NetworkManager || { echo "nm=stopped"; exit 0; }`,
        `echo "nm=running"`,
        `nmcli -t -e yes -f DEVICE,TYPE,STATE,CONNECTION device status | sed 's/^/device:/'`,
        `nmcli -t -e yes -f UUID,TYPE,ACTIVE,DEVICE,FILENAME,NAME connection show | while IFS= read -r line; do`,
        `  uuid=${"$"}{line%%:*}`,
        `  echo "connection:$line"`,
        // -g escapes a value's colons itself (\\:), as -t -e yes does.
        `  echo "profile:$uuid:$(nmcli -g connection.interface-name connection show "$uuid" 2>/dev/null):$(nmcli -g 802-3-ethernet.mac-address connection show "$uuid" 2>/dev/null)"`,
        `done`,
    ],
    parse(section) {
        const lines = section.split("\n");
        if (lines.includes("nm=absent")) return { state: "absent" };
        if (!lines.includes("nm=running")) return { state: "stopped" };
        const devices: { device: string; type: string; state: string; connection: string }[] = [];
        const connections: { uuid: string; type: string; active: boolean; device: string; file: string; name: string; interfaceName: string; mac: string }[] =
            [];
        const profiles = new Map<string, { interfaceName: string; mac: string }>();
        for (const line of lines) {
            if (line.startsWith("device:")) {
                const [device, type, state, connection] = nmcliFields(line.slice("device:".length));
                devices.push({ device, type, state, connection: connection ?? "" });
            } else if (line.startsWith("profile:")) {
                const [uuid, interfaceName, mac] = nmcliFields(line.slice("profile:".length));
                profiles.set(uuid, { interfaceName: interfaceName ?? "", mac: (mac ?? "").toLowerCase() });
            }
        }
        for (const line of lines) {
            if (!line.startsWith("connection:")) continue;
            const [uuid, type, active, device, file, ...name] = nmcliFields(line.slice("connection:".length));
            const profile = profiles.get(uuid) ?? { interfaceName: "", mac: "" };
            connections.push({ uuid, type, active: active === "yes", device: device ?? "", file: file ?? "", name: name.join(":"), ...profile });
        }
        return { state: "running", devices, connections };
    },
};

/** Docker on a node of the docker runtime: missing, down, or running with what `--gpus` needs and the image. */
export type DockerFact =
    | { state: "absent" }
    | { state: "down"; error: string }
    | { state: "running"; version: string; rootDir: string; runtimes: string[]; gpuHook: boolean; image?: { id: string; bytes: number } };

/** The Docker fact for the image `image` (its ID and size when the node has it). */
export function dockerFact(image: string): Fact<DockerFact> {
    return {
        name: "docker",
        lines: [
            `command -v docker >/dev/null || { echo "docker=absent"; exit 0; }`,
            `if ! err=$(docker info 2>&1 >/dev/null); then echo "docker=down"; echo "error=$(printf '%s' "$err" | tr '\\n' ' ' | cut -c1-300)"; exit 0; fi`,
            `echo "docker=running"`,
            `echo "version=$(docker version --format '{{.Server.Version}}')"`,
            `echo "root=$(docker info --format '{{.DockerRootDir}}')"`,
            `echo "runtimes=$(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')"`,
            // docker run --gpus finds its device driver through this hook (NVIDIA Container Toolkit).
            `if command -v nvidia-container-runtime-hook >/dev/null; then echo "gpu-hook=yes"; else echo "gpu-hook=no"; fi`,
            `if id=$(docker image inspect --format '{{.Id}} {{.Size}}' ${shellQuote(image)} 2>/dev/null); then echo "image=$id"; else echo "image=absent"; fi`,
        ],
        parse(section) {
            const get = (key: string) =>
                section
                    .split("\n")
                    .find((l) => l.startsWith(`${key}=`))
                    ?.slice(key.length + 1);
            const state = get("docker");
            if (state === "absent" || state === undefined) return { state: "absent" };
            if (state === "down") return { state: "down", error: get("error") ?? "" };
            const image = /^(\S+) (\d+)$/.exec(get("image") ?? "");
            return {
                state: "running",
                version: get("version") ?? "",
                rootDir: get("root") ?? "/var/lib/docker",
                runtimes: (get("runtimes") ?? "").split(" ").filter((r) => r !== ""),
                gpuHook: get("gpu-hook") === "yes",
                ...(image ? { image: { id: image[1], bytes: Number(image[2]) } } : {}),
            };
        },
    };
}

/** Free space of the filesystem holding each path (the nearest existing directory up from it). */
export type DiskFact = { path: string; freeBytes: number }[];

/** The disk fact for `paths` (the model cache, Docker's root). */
export function diskFact(paths: readonly string[]): Fact<DiskFact> {
    return {
        name: "disk",
        lines: paths.map(
            (p) =>
                `d=${shellQuote(p)}; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; echo "free ${shellQuote(p)} $(df -P -B1 "$d" | awk 'NR==2 {print $4}')"`,
        ),
        parse(section) {
            return section
                .split("\n")
                .map((l) => /^free (.+) (\d+)$/.exec(l))
                .filter((m): m is RegExpExecArray => m !== null)
                .map((m) => ({ path: m[1].replace(/^'(.*)'$/, "$1"), freeBytes: Number(m[2]) }));
        },
    };
}

/** Whether our take-over of another tool's files is in place (its record of what it moved). */
export const takeOverRecordFact: Fact<{ inPlace: boolean; files: string[] }> = {
    name: "takeover",
    lines: [
        `if [ -f ${TAKEOVER_STATE_DIR}/netplan.list ]; then echo "takeover=yes"; sed 's/^/moved /' ${TAKEOVER_STATE_DIR}/netplan.list; elif [ -d ${TAKEOVER_STATE_DIR} ]; then echo "takeover=yes"; else echo "takeover=no"; fi`,
    ],
    parse(section) {
        const lines = section.split("\n");
        return { inPlace: lines.includes("takeover=yes"), files: lines.filter((l) => l.startsWith("moved ")).map((l) => l.slice("moved ".length)) };
    },
};

/** The metrics packages on a node (metrics.enabled): node_exporter's and Prometheus's binaries, and the user they run as. */
export interface MetricsToolsFact {
    exporter: boolean;
    prometheus: boolean;
    user: boolean;
}

export const metricsToolsFact: Fact<MetricsToolsFact> = {
    name: "metrics-tools",
    lines: [
        `if [ -x ${NODE_EXPORTER_BIN} ]; then echo "exporter=yes"; else echo "exporter=no"; fi`,
        `if [ -x ${PROMETHEUS_BIN} ]; then echo "prometheus=yes"; else echo "prometheus=no"; fi`,
        `if id -u ${METRICS_USER} >/dev/null 2>&1; then echo "user=yes"; else echo "user=no"; fi`,
    ],
    parse(section) {
        const lines = section.split("\n");
        return { exporter: lines.includes("exporter=yes"), prometheus: lines.includes("prometheus=yes"), user: lines.includes("user=yes") };
    },
};

/** The facts the first-contact probe reads on a node. */
export interface FirstContactProbe {
    memory: Fact<MemoryFact>;
    gpu: Fact<GpuFact>;
    links: Fact<LinkFact[]>;
    netplan: Fact<NetplanFact>;
    networkManager: Fact<NetworkManagerFact>;
    takeOver: Fact<{ inPlace: boolean; files: string[] }>;
    disk: Fact<DiskFact>;
    docker?: Fact<DockerFact>;
    metricsTools?: Fact<MetricsToolsFact>;
}

/**
 * The facts of the first-contact probe of a node: its runtime's image (docker) and where the model
 * goes decide two of them; the metrics packages are read when metrics.enabled.
 */
export function firstContactProbe(spec: { dockerImage?: string; metrics?: boolean }): FirstContactProbe {
    return {
        memory: memoryFact,
        gpu: gpuFact,
        links: linksFact,
        netplan: netplanFact,
        networkManager: networkManagerFact,
        takeOver: takeOverRecordFact,
        disk: diskFact([HF_HOME_DIR, ...(spec.dockerImage !== undefined ? ["/var/lib/docker"] : [])]),
        ...(spec.dockerImage !== undefined ? { docker: dockerFact(spec.dockerImage) } : {}),
        ...(spec.metrics === true ? { metricsTools: metricsToolsFact } : {}),
    };
}

/** What the first-contact probe found on a node. */
export interface FirstContactFacts {
    memory: MemoryFact;
    gpu: GpuFact;
    links: LinkFact[];
    netplan: NetplanFact;
    networkManager: NetworkManagerFact;
    takeOver: { inPlace: boolean; files: string[] };
    disk: DiskFact;
    docker?: DockerFact;
    metricsTools?: MetricsToolsFact;
}

/** The probe's script (read only, as root). */
export function firstContactScript(probe: FirstContactProbe): string {
    return factsScript(probe as unknown as Record<string, Fact<unknown>>);
}

/**
 * Python that compares two outputs of the probe (the last run's on stdin, the one just made in
 * SC_FACTS_NOW) on what only the owner or the hardware changes: the memory the node has (MemTotal),
 * its GPUs, which netplan files of other tools there are (NetworkManager's profiles on DGX OS among
 * them, as 90-NM-*.yaml), and, until our netplan file is there, addresses other than ours (argv) on
 * the node's own interfaces (after that the interconnect step reads the ports back). Not
 * what our own steps change on purpose: our netplan file and addresses, MTU, NetworkManager's hold
 * on the ports, files the take-over moved aside and addresses it removed, the image we pull; nor
 * what changes by itself (available memory, free disk). Prints one line per difference.
 */
const FACTS_DRIFT_PY_BASE = String.raw`import json, os, sys
PREFIX = ${JSON.stringify(FACT_SECTION_PREFIX)}
OURS = set(sys.argv[1:])
def view(text):
    sections, name = {}, None
    for line in text.split("\n"):
        if line.startswith(PREFIX):
            name = line[len(PREFIX):].strip()
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    moved = set(l.split()[-1] for l in sections.get("takeover", []) if l.startswith("moved "))
    files, ours_there = set(), False
    for line in sections.get("netplan", []):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and isinstance(e.get("file"), str):
            if e.get("ours"):
                ours_there = True
            else:
                files.add(e["file"])
    addresses = set()
    for line in sections.get("links", []):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        name = str(e.get("name", "")) if isinstance(e, dict) else ""
        if name and name != "lo" and not name.startswith(("docker", "br-", "veth")):
            addresses.update("%s %s" % (name, a) for a in e.get("addresses", []) if a not in OURS)
    taken_over = any(l == "takeover=yes" for l in sections.get("takeover", []))
    memory = [l for l in sections.get("memory", []) if l.startswith("MemTotal:")]
    return {"memory": memory, "gpus": [l for l in sections.get("gpu", []) if l.strip()], "files": files, "moved": moved,
            "addresses": addresses, "taken_over": taken_over, "ours_there": ours_there}
last, now = view(sys.stdin.read()), view(os.environ.get("SC_FACTS_NOW", ""))
if last["memory"] != now["memory"]:
    print("memory: %s, was %s" % (" ".join(now["memory"]) or "?", " ".join(last["memory"]) or "?"))
if last["gpus"] != now["gpus"]:
    print("GPUs: %s, were %s" % ("; ".join(now["gpus"]) or "none", "; ".join(last["gpus"]) or "none"))
moved = last["moved"] | now["moved"]
for f in sorted(now["files"] - last["files"] - moved):
    print("netplan file %s is new" % f)
for f in sorted(last["files"] - now["files"] - moved):
    print("netplan file %s is gone" % f)
# Once our netplan file is there (an up got past the node check), addresses on the ports are the
# interconnect step's to read back and repair, not first contact's.
if not (last["ours_there"] or now["ours_there"]):
    for a in sorted(now["addresses"] - last["addresses"]):
        print("address %s is new" % a)
    if not (last["taken_over"] or now["taken_over"]):
        for a in sorted(last["addresses"] - now["addresses"]):
            print("address %s is gone" % a)
`;

/**
 * {@link FACTS_DRIFT_PY_BASE}, and where the probe reads the metrics packages, them too: an owner
 * who installed them after the node check asked is seen by `up --refresh`. (Without them the text
 * is the base's byte for byte, so stacks without metrics see no change.)
 */
function factsDriftPy(probe: FirstContactProbe): string {
    if (probe.metricsTools === undefined) return FACTS_DRIFT_PY_BASE;
    const name = JSON.stringify(probe.metricsTools.name);
    return (
        FACTS_DRIFT_PY_BASE.replace(
            'last, now = view(sys.stdin.read()), view(os.environ.get("SC_FACTS_NOW", ""))\n',
            'last_text, now_text = sys.stdin.read(), os.environ.get("SC_FACTS_NOW", "")\nlast, now = view(last_text), view(now_text)\n',
        ) +
        [
            "def tools(text):",
            "    out, on = [], False",
            '    for line in text.split("\\n"):',
            "        if line.startswith(PREFIX):",
            `            on = line[len(PREFIX):].strip() == ${name}`,
            "        elif on and line.strip():",
            "            out.append(line.strip())",
            "    return out",
            "if tools(last_text) != tools(now_text):",
            '    print("metrics packages: %s, were %s" % (" ".join(tools(now_text)), " ".join(tools(last_text))))',
            "",
        ].join("\n")
    );
}

/**
 * The facts step's read-back (refresh): the probe again, compared with what the last run printed
 * (on stdin) on what the owner or the hardware changes ({@link factsDriftPy}). A difference is
 * drift, so `pulumi up --refresh` runs the probe again and the node check judges the node as it is
 * now (after an owner fixed what it refused); a converged cluster's refresh finds none. A plain
 * `up` keeps the facts of the last run.
 */
export function firstContactReadScript(probe: FirstContactProbe, ourAddresses: readonly string[]): string {
    return readScript([
        `last=$(cat)`,
        `now=$(bash -c ${shellQuote(firstContactScript(probe))})`,
        `changed=$(printf '%s\\n' "$last" | SC_FACTS_NOW="$now" python3 -c ${shellQuote(factsDriftPy(probe))} ${ourAddresses.map(shellQuote).join(" ")})`,
        `if [ -n "$changed" ]; then`,
        `  printf 'first contact: the node is not as the last up found it (up --refresh probes it again): %s\\n' "$changed"`,
        `fi`,
    ]);
}

/** What the probe printed, read. */
export function parseFirstContact(probe: FirstContactProbe, output: string): FirstContactFacts {
    return parseFacts(probe as unknown as Record<string, Fact<unknown>>, output) as unknown as FirstContactFacts;
}
