/**
 * First contact: each fact's parser on output as the tools print it (the shapes of `ip -j addr`,
 * `nmcli -t -e yes`, nvidia-smi's CSV on a GB10, the netplan lister's JSON lines), the findings a
 * node's facts give against its config, the node check's script (run by bash: it fails exactly
 * when a finding blocks), and the fit on the memory nodes report (a 64 GB Spark).
 * Real output captured on the lab's DGX-OS-like Sparks is in test/unit/fixtures/first-contact/.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import {
    FirstContactFacts,
    dockerFact,
    diskFact,
    firstContactProbe,
    firstContactReadScript,
    firstContactScript,
    gpuFact,
    linksFact,
    memoryFact,
    netplanFact,
    networkManagerFact,
    nmcliFields,
    parseFirstContact,
} from "../../components/render/firstContact";
import { FACT_SECTION_PREFIX, factSections } from "../../components/render/facts";
import {
    Finding,
    NodeContactSpec,
    globMatches,
    netplanTouches,
    nodeCheckScript,
    nodeFindings,
    takeOverAction,
} from "../../components/render/firstContactFindings";
import { fitFindings } from "../../components/render/nodeCheck";
import { parseConfig, type RawConfig } from "../../config";
import { findRepoRoot } from "../support/repoRoot";
import { METRICS_USER, NODE_EXPORTER_BIN, PROMETHEUS_BIN } from "../../components/render/metrics";

const FIXTURES = path.join(findRepoRoot(), "test", "unit", "fixtures", "first-contact");

/** A clean Spark as the probe sees it: nothing of other tools on its ports. */
function cleanFacts(overrides: Partial<FirstContactFacts> = {}): FirstContactFacts {
    return {
        memory: { totalKiB: 127_535_104, availableKiB: 110_000_000 },
        gpu: { gpus: [{ name: "NVIDIA GB10" }] },
        links: [
            { name: "enP7s7", mac: "4c:bb:47:00:00:01", driver: "r8127", mtu: 1500, state: "UP", addresses: ["10.0.0.11/24"] },
            { name: "enp1s0f1np1", mac: "4c:bb:47:00:00:11", driver: "mlx5_core", mtu: 1500, state: "UP", addresses: [] },
            { name: "enP2p1s0f1np1", mac: "4c:bb:47:00:00:21", driver: "mlx5_core", mtu: 1500, state: "UP", addresses: [] },
        ],
        netplan: { definitions: [], unreadable: [] },
        networkManager: { state: "absent" },
        takeOver: { inPlace: false, files: [] },
        disk: [{ path: "/root/.cache/huggingface", freeBytes: 2e12 }],
        docker: { state: "running", version: "28.2.2", rootDir: "/var/lib/docker", runtimes: ["nvidia", "runc"], gpuHook: true },
        ...overrides,
    };
}

function spec(overrides: Partial<NodeContactSpec> = {}): NodeContactSpec {
    return {
        node: "spark-a",
        index: 0,
        kind: "spark",
        gpus: 1,
        interfaces: [
            { name: "enp1s0f1np1", address: "192.168.100.11/24" },
            { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
        ],
        takeOver: false,
        runtime: { kind: "docker", image: "nvcr.io/nvidia/vllm:26.10-py3" },
        ...overrides,
    };
}

const levels = (findings: Finding[], topic: string) => findings.filter((f) => f.topic === topic).map((f) => f.level);

describe("first contact: the facts' parsers", () => {
    it("splits the probe's output into one section per fact, whatever a fact printed", () => {
        const out = [`${FACT_SECTION_PREFIX}a`, "one", "", `${FACT_SECTION_PREFIX}b`, "two", "three"].join("\n");
        assert.deepEqual(
            [...factSections(out)],
            [
                ["a", "one\n"],
                ["b", "two\nthree"],
            ],
        );
    });

    it("memory: /proc/meminfo's totals in KiB", () => {
        assert.deepEqual(memoryFact.parse("MemTotal:       127535104 kB\nMemAvailable:   98765432 kB"), { totalKiB: 127535104, availableKiB: 98765432 });
        assert.deepEqual(memoryFact.parse("grep: /proc/meminfo: No such file"), {});
    });

    it("gpu: a GB10 reports its memory as [N/A]; a workstation's GPU in MiB; no nvidia-smi is said", () => {
        assert.deepEqual(gpuFact.parse("NVIDIA GB10, [N/A]"), { gpus: [{ name: "NVIDIA GB10" }] });
        assert.deepEqual(gpuFact.parse("NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 97887\n"), {
            gpus: [{ name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", memoryMiB: 97887 }],
        });
        assert.ok("missing" in gpuFact.parse("nvidia-smi=missing"));
        assert.match(String((gpuFact.parse("NVIDIA-SMI has failed\nnvidia-smi=failed") as { missing: string }).missing), /NVIDIA-SMI has failed/);
    });

    it("links: one JSON line per interface (the probe's Python over ip -j addr), sorted addresses, the port's driver", () => {
        const line = JSON.stringify({
            addresses: ["169.254.3.7/16", "fd00::11/64"],
            driver: "mlx5_core",
            mac: "4c:bb:47:00:00:11",
            mtu: 1500,
            name: "enp1s0f1np1",
            state: "UP",
        });
        assert.deepEqual(
            linksFact.parse(
                `${line}\n${JSON.stringify({ addresses: ["127.0.0.1/8"], driver: "", mac: "00:00:00:00:00:00", mtu: 65536, name: "lo", state: "UNKNOWN" })}`,
            ),
            [
                { name: "enp1s0f1np1", mac: "4c:bb:47:00:00:11", driver: "mlx5_core", mtu: 1500, state: "UP", addresses: ["169.254.3.7/16", "fd00::11/64"] },
                { name: "lo", mac: "00:00:00:00:00:00", mtu: 65536, state: "UNKNOWN", addresses: ["127.0.0.1/8"] },
            ],
        );
        // What the probe prints for this machine's interfaces: no lifetimes (the read-back compares the lines), no link-local addresses.
        const run = spawnSync("bash", ["-c", linksFact.lines.join("\n")], { encoding: "utf8" });
        assert.equal(run.status, 0, run.stderr);
        const here = linksFact.parse(run.stdout);
        assert.ok(here.some((l) => l.name === "lo" && l.addresses.includes("127.0.0.1/8")));
        assert.doesNotMatch(run.stdout, /life_time|fe80:/);
    });

    it("nmcli -t -e yes: fields split at unescaped colons", () => {
        assert.deepEqual(nmcliFields(String.raw`enp1s0f1np1:ethernet:connected:Wired connection 2`), [
            "enp1s0f1np1",
            "ethernet",
            "connected",
            "Wired connection 2",
        ]);
        assert.deepEqual(nmcliFields(String.raw`a\:b:c\\d:`), ["a:b", "c\\d", ""]);
    });

    it("networkmanager: devices, connections and the interface or MAC a profile is bound to", () => {
        const nm = networkManagerFact.parse(
            [
                "nm=running",
                "device:enp1s0f1np1:ethernet:connected:Wired connection 2",
                "device:enP7s7:ethernet:unmanaged:--",
                "connection:0b7c0a54-1111-4c00-8000-aaaaaaaaaaaa:802-3-ethernet:yes:enp1s0f1np1:/run/NetworkManager/system-connections/netplan-NM-0b7c.nmconnection:Wired connection 2",
                String.raw`profile:0b7c0a54-1111-4c00-8000-aaaaaaaaaaaa:enp1s0f1np1:`,
                String.raw`connection:9f00-2222:802-3-ethernet:no::/etc/NetworkManager/system-connections/cx7.nmconnection:by\:mac`,
                String.raw`profile:9f00-2222::4C\:BB\:47\:00\:00\:21`,
            ].join("\n"),
        );
        assert.equal(nm.state, "running");
        if (nm.state !== "running") return;
        assert.deepEqual(nm.devices[0], { device: "enp1s0f1np1", type: "ethernet", state: "connected", connection: "Wired connection 2" });
        assert.equal(nm.connections[0].interfaceName, "enp1s0f1np1");
        assert.equal(nm.connections[0].active, true);
        assert.equal(nm.connections[1].name, "by:mac");
        assert.equal(nm.connections[1].mac, "4c:bb:47:00:00:21");
        assert.deepEqual(networkManagerFact.parse("nm=stopped"), { state: "stopped" });
        assert.deepEqual(networkManagerFact.parse("nm=absent"), { state: "absent" });
    });

    it("netplan: definitions, unreadable files, a missing PyYAML and netplan's own error", () => {
        const fact = netplanFact.parse(
            [
                JSON.stringify({ file: "/etc/netplan/40-cx7.yaml", kind: "ethernets", id: "enp1s0f1np1", keys: ["link-local"], "link-local": ["ipv4"] }),
                JSON.stringify({ file: "/etc/netplan/50-broken.yaml", unreadable: "mapping values are not allowed here" }),
                "netplan-get-error=Error in network definition: unknown key 'mtux'",
            ].join("\n"),
        );
        assert.equal(fact.definitions.length, 1);
        assert.deepEqual(fact.unreadable, [{ file: "/etc/netplan/50-broken.yaml", error: "mapping values are not allowed here" }]);
        assert.match(fact.netplanError ?? "", /unknown key/);
        assert.equal(netplanFact.parse(JSON.stringify({ error: "python3 cannot import yaml" })).error, "python3 cannot import yaml");
    });

    it("docker: absent, down, or running with the NVIDIA hook and the image", () => {
        const fact = dockerFact("img:1");
        assert.deepEqual(fact.parse("docker=absent"), { state: "absent" });
        assert.deepEqual(fact.parse("docker=down\nerror=Cannot connect to the Docker daemon"), { state: "down", error: "Cannot connect to the Docker daemon" });
        assert.deepEqual(
            fact.parse(
                "docker=running\nversion=28.2.2\nroot=/var/lib/docker\nruntimes=io.containerd.runc.v2 nvidia runc \ngpu-hook=yes\nimage=sha256:abc 21474836480",
            ),
            {
                state: "running",
                version: "28.2.2",
                rootDir: "/var/lib/docker",
                runtimes: ["io.containerd.runc.v2", "nvidia", "runc"],
                gpuHook: true,
                image: { id: "sha256:abc", bytes: 21474836480 },
            },
        );
    });

    it("disk: free bytes per path", () => {
        assert.deepEqual(diskFact(["/root/.cache/huggingface"]).parse("free /root/.cache/huggingface 123456"), [
            { path: "/root/.cache/huggingface", freeBytes: 123456 },
        ]);
    });

    it("the whole probe runs here (bash, ip, python3) and reads back: changes nothing, always exits 0", () => {
        const probe = firstContactProbe({ dockerImage: "nvcr.io/nvidia/vllm:26.10-py3" });
        const run = spawnSync("bash", ["-c", firstContactScript(probe)], { encoding: "utf8", timeout: 60_000 });
        assert.equal(run.status, 0, run.stderr);
        const facts = parseFirstContact(probe, run.stdout);
        assert.ok((facts.memory.totalKiB ?? 0) > 0, "MemTotal");
        assert.ok(
            facts.links.some((l) => l.name === "lo"),
            "the links list lo",
        );
        assert.ok(facts.docker !== undefined, "a docker node's probe reads Docker");
        assert.equal(facts.disk.length, 2);
    });

    it("the read-back (refresh) reports what the owner or the hardware changed, not what our steps or time did", () => {
        const probe = firstContactProbe({});
        const now = spawnSync("bash", ["-c", firstContactScript(probe)], { encoding: "utf8", timeout: 60_000 }).stdout;
        /** The read-back's lines against `last` as the step's recorded output. */
        const readBack = (last: string): string => {
            const run = spawnSync("bash", ["-c", firstContactReadScript(probe, ["192.168.100.11/24"])], { input: last, encoding: "utf8", timeout: 60_000 });
            assert.equal(run.status, 0, run.stderr);
            return run.stdout;
        };
        const withNetplan = (output: string, ...entries: object[]): string =>
            output.replace(`${FACT_SECTION_PREFIX}netplan\n`, `${FACT_SECTION_PREFIX}netplan\n${entries.map((e) => JSON.stringify(e)).join("\n")}\n`);
        const withTakeOver = (output: string, line: string): string => output.replace(/^takeover=no$/m, `takeover=yes\n${line}`);
        assert.equal(readBack(now), "", "the same node");
        // Time and our own steps: available memory, free disk, addresses, our netplan file.
        const withPort = (output: string, addresses: string[]): string =>
            output.replace(`${FACT_SECTION_PREFIX}links\n`, `${FACT_SECTION_PREFIX}links\n${JSON.stringify({ addresses, name: "enp1s0f1np1" })}\n`);
        const churned = withPort(now.replace(/^MemAvailable:.*$/m, "MemAvailable: 1 kB"), ["192.168.100.11/24"]);
        assert.equal(readBack(withNetplan(churned, { file: "/etc/netplan/60-spark-cluster-interconnect.yaml", id: "enp1s0f1np1", ours: true })), "");
        // The owner's: memory the node has, a netplan file of another tool that came or went.
        assert.match(readBack(now.replace(/^MemTotal:.*$/m, "MemTotal: 65000000 kB")), /^first contact: .*memory: MemTotal:/m);
        const cx7 = { file: "/etc/netplan/40-cx7.yaml", id: "enp1s0f1np1" };
        assert.match(readBack(withNetplan(now, cx7)), /netplan file \/etc\/netplan\/40-cx7\.yaml is gone/);
        // An address not ours: one that came is the owner's; one that went is, unless our take-over removed it.
        const foreign = withPort(now, ["10.9.9.9/24"]);
        assert.match(readBack(foreign), /address enp1s0f1np1 10\.9\.9\.9\/24 is gone/);
        assert.equal(readBack(withTakeOver(foreign, "moved 1 /etc/netplan/40-cx7.yaml")), "");
        // Once our netplan file is there, an address on a port is the interconnect step's drift, not first contact's.
        const ourFile = { file: "/etc/netplan/60-spark-cluster-interconnect.yaml", id: "enp1s0f1np1", ours: true };
        assert.equal(readBack(withNetplan(foreign, ourFile)), "");
        assert.match(readBack(withNetplan(now, ourFile)), /^$/);
        // A file the take-over moved aside is gone by our doing.
        assert.match(now, /^takeover=no$/m, "this machine has no take-over of ours");
        assert.equal(readBack(withTakeOver(withNetplan(now, cx7), "moved 1 /etc/netplan/40-cx7.yaml")), "");
    });

    for (const file of fs.existsSync(FIXTURES) ? fs.readdirSync(FIXTURES).filter((f) => f.endsWith(".out")) : []) {
        it(`reads the probe output captured in ${file} as its .json says`, () => {
            const probe = firstContactProbe({ dockerImage: "nvcr.io/nvidia/vllm:25.09-py3" });
            const facts = parseFirstContact(probe, fs.readFileSync(path.join(FIXTURES, file), "utf8"));
            const want = JSON.parse(fs.readFileSync(path.join(FIXTURES, file.replace(/\.out$/, ".json")), "utf8")) as unknown;
            assert.deepEqual(JSON.parse(JSON.stringify(facts)), want);
        });
    }
});

describe("first contact: the metrics packages (metrics.enabled)", () => {
    const probe = firstContactProbe({ metrics: true });
    const now = spawnSync("bash", ["-c", firstContactScript(probe)], { encoding: "utf8", timeout: 60_000 }).stdout;

    it("reads node_exporter's and Prometheus's binaries and their user as they are on this machine; off, the probe does not ask", () => {
        assert.deepEqual(parseFirstContact(probe, now).metricsTools, {
            exporter: fs.existsSync(NODE_EXPORTER_BIN),
            prometheus: fs.existsSync(PROMETHEUS_BIN),
            user: spawnSync("id", ["-u", METRICS_USER]).status === 0,
        });
        assert.equal(parseFirstContact(firstContactProbe({}), now).metricsTools, undefined);
        assert.doesNotMatch(firstContactScript(firstContactProbe({})), /metrics-tools/);
    });

    it("the read-back sees a package installed (or removed) since the last up; without metrics its script is the one deployed stacks have", () => {
        const readBack = (last: string): string => {
            const run = spawnSync("bash", ["-c", firstContactReadScript(probe, [])], { input: last, encoding: "utf8", timeout: 60_000 });
            assert.equal(run.status, 0, run.stderr);
            return run.stdout;
        };
        assert.equal(readBack(now), "", "the same node");
        const other = now.replace(/^exporter=(yes|no)$/m, (_, was: string) => `exporter=${was === "yes" ? "no" : "yes"}`);
        assert.notEqual(other, now);
        assert.match(readBack(other), /^first contact: .*metrics packages: exporter=(yes|no) /m);
        const plain = firstContactReadScript(firstContactProbe({}), []);
        assert.doesNotMatch(plain, /last_text|metrics/);
        assert.match(plain, /last, now = view\(sys\.stdin\.read\(\)\), view\(os\.environ\.get\("SC_FACTS_NOW", ""\)\)/);
    });
});

describe("first contact: findings", () => {
    it("a clean Spark: nothing blocks", () => {
        const findings = nodeFindings(spec(), cleanFacts());
        assert.deepEqual(
            findings.filter((f) => f.level === "block" || f.level === "warn"),
            [],
        );
    });

    it("netplan's match: name globs as fnmatch", () => {
        assert.ok(globMatches("enp1s0f*np1", "enp1s0f1np1"));
        assert.ok(globMatches("enp1s0f[01]np1", "enp1s0f1np1"));
        assert.ok(!globMatches("enp1s0f[!1]np1", "enp1s0f1np1"));
        assert.ok(!globMatches("en?7s7", "enp1s0f1np1"));
    });

    it("NVIDIA's 40-cx7.yaml (by id) and a 90-NM profile (by match: name): blocks naming file, port and keys and the take-over key", () => {
        const facts = cleanFacts({
            netplan: {
                unreadable: [],
                definitions: [
                    { file: "/etc/netplan/40-cx7.yaml", kind: "ethernets", id: "enp1s0f0np0", keys: ["link-local"], "link-local": ["ipv4"] },
                    { file: "/etc/netplan/40-cx7.yaml", kind: "ethernets", id: "enp1s0f1np1", keys: ["link-local"], "link-local": ["ipv4"] },
                    {
                        file: "/etc/netplan/90-NM-abc.yaml",
                        kind: "ethernets",
                        id: "NM-abc",
                        keys: ["addresses", "match", "networkmanager", "renderer"],
                        renderer: "NetworkManager",
                        match: { name: "enP2p1s0f1np1" },
                        addresses: ["192.168.200.11/24"],
                        networkmanager: { uuid: "abc", name: "Wired connection 3" },
                    },
                    { file: "/etc/netplan/01-network-manager-all.yaml", kind: "ethernets", id: "enP7s7", keys: ["dhcp4"] },
                ],
            },
        });
        const findings = nodeFindings(spec(), facts).filter((f) => f.topic === "netplan");
        assert.equal(findings.length, 2);
        assert.ok(findings.every((f) => f.level === "block" && f.fix?.includes("interconnect.takeOver")));
        assert.match(findings[0].what, /40-cx7\.yaml defines enp1s0f1np1 \(link-local: \["ipv4"\]/);
        assert.match(findings[1].what, /90-NM-abc\.yaml defines enP2p1s0f1np1 .*Wired connection 3/);
        // With the take-over: 40-cx7.yaml also defines port 0, so it is rewritten; the profile file is moved.
        const taken = nodeFindings(spec({ takeOver: true }), facts).filter((f) => f.topic === "netplan");
        assert.deepEqual(
            taken.map((f) => f.level),
            ["note", "note"],
        );
        assert.match(taken[0].what, /rewrites it without enp1s0f1np1/);
        assert.match(taken[1].what, /moves the file aside/);
        const touches = netplanTouches(facts.netplan.definitions, facts.links, ["enp1s0f1np1"]);
        assert.equal(takeOverAction("/etc/netplan/40-cx7.yaml", facts.netplan.definitions, touches), "rewrite");
    });

    it("a port in a bond (or a vlan on it) blocks even with the take-over", () => {
        const facts = cleanFacts({
            netplan: {
                unreadable: [],
                definitions: [
                    { file: "/etc/netplan/50-bond.yaml", kind: "ethernets", id: "cx0", keys: ["match"], match: { macaddress: "4C:BB:47:00:00:11" } },
                    { file: "/etc/netplan/50-bond.yaml", kind: "bonds", id: "bond0", keys: ["interfaces", "addresses"], interfaces: ["cx0"] },
                ],
            },
        });
        const found = nodeFindings(spec({ takeOver: true }), facts).filter((f) => f.topic === "netplan");
        assert.deepEqual(
            found.map((f) => f.level),
            ["block"],
        );
        assert.match(found[0].what, /bonds bond0 is built on enp1s0f1np1/);
    });

    it("NetworkManager managing a port blocks (unmanaged is fine); the take-over makes it a note", () => {
        const nm: FirstContactFacts["networkManager"] = {
            state: "running",
            devices: [
                { device: "enp1s0f1np1", type: "ethernet", state: "connected", connection: "Wired connection 2" },
                { device: "enP2p1s0f1np1", type: "ethernet", state: "unmanaged", connection: "--" },
            ],
            connections: [
                {
                    uuid: "u1",
                    type: "802-3-ethernet",
                    active: true,
                    device: "enp1s0f1np1",
                    file: "/run/x",
                    name: "Wired connection 2",
                    interfaceName: "enp1s0f1np1",
                    mac: "",
                },
            ],
        };
        const blocked = nodeFindings(spec(), cleanFacts({ networkManager: nm })).filter((f) => f.topic === "networkmanager");
        assert.deepEqual(
            blocked.map((f) => f.level),
            ["block"],
        );
        assert.match(blocked[0].what, /manages enp1s0f1np1 \(connected, connection "Wired connection 2"\); profiles: "Wired connection 2" \(u1, active/);
        assert.deepEqual(levels(nodeFindings(spec({ takeOver: true }), cleanFacts({ networkManager: nm })), "networkmanager"), ["note"]);
    });

    it("addresses the config does not give a port block; ours do not", () => {
        const links = cleanFacts().links.map((l) => (l.name === "enp1s0f1np1" ? { ...l, addresses: ["192.168.100.11/24", "169.254.3.7/16"] } : l));
        const found = nodeFindings(spec(), cleanFacts({ links })).filter((f) => f.topic === "addresses");
        assert.equal(found.length, 1);
        assert.equal(found[0].level, "block");
        assert.match(found[0].what, /enp1s0f1np1 has 169\.254\.3\.7\/16,/);
        assert.deepEqual(levels(nodeFindings(spec({ takeOver: true }), cleanFacts({ links })), "addresses"), ["note"]);
        assert.deepEqual(levels(nodeFindings(spec({ interfaces: [{ name: "enp9", address: "10.9.9.9/24" }] }), cleanFacts()), "addresses"), ["block"]);
    });

    it("what our own netplan file (an earlier up's) gives a port is not foreign: a changed address in config is no block", () => {
        const links = cleanFacts().links.map((l) => (l.name === "enp1s0f1np1" ? { ...l, addresses: ["192.168.100.21/24"] } : l));
        const netplan = {
            unreadable: [],
            definitions: [
                {
                    file: "/etc/netplan/60-spark-cluster-interconnect.yaml",
                    kind: "ethernets",
                    id: "enp1s0f1np1",
                    keys: ["addresses", "mtu"],
                    addresses: ["192.168.100.21/24"],
                    ours: true,
                },
            ],
        };
        const found = nodeFindings(spec(), cleanFacts({ links, netplan }));
        assert.deepEqual(
            found.filter((f) => f.level === "block"),
            [],
        );
    });

    it("GPUs, Docker and disk: each blocks with its fix", () => {
        assert.deepEqual(levels(nodeFindings(spec(), cleanFacts({ gpu: { missing: "nvidia-smi is not installed" } })), "gpu"), ["block"]);
        assert.deepEqual(levels(nodeFindings(spec({ gpus: 2 }), cleanFacts()), "gpu"), ["block"]);
        assert.deepEqual(levels(nodeFindings(spec(), cleanFacts({ gpu: { gpus: [{ name: "NVIDIA Thor" }] } })), "gpu"), ["warn"]);
        assert.deepEqual(levels(nodeFindings(spec(), cleanFacts({ docker: { state: "absent" } })), "docker"), ["block"]);
        const noHook = nodeFindings(
            spec(),
            cleanFacts({ docker: { state: "running", version: "28", rootDir: "/var/lib/docker", runtimes: ["runc"], gpuHook: false } }),
        );
        assert.ok(noHook.some((f) => f.topic === "docker" && f.level === "block" && /nvidia-container-toolkit/.test(f.fix ?? "")));
        assert.deepEqual(levels(nodeFindings(spec({ runtime: { kind: "venv" } }), cleanFacts({ docker: undefined })), "docker"), []);
        const small = nodeFindings(spec({ modelBytes: 150e9 }), cleanFacts({ disk: [{ path: "/root/.cache/huggingface", freeBytes: 100e9 }] }));
        assert.deepEqual(levels(small, "disk"), ["block"]);
    });

    it("a take-over in place while the config no longer asks for one blocks", () => {
        const found = nodeFindings(spec(), cleanFacts({ takeOver: { inPlace: true, files: ["/etc/netplan/40-cx7.yaml"] } }));
        assert.ok(found.some((f) => f.level === "block" && /take-over is in place \(\/etc\/netplan\/40-cx7\.yaml/.test(f.what)));
    });
});

describe("first contact: the metrics packages' findings", () => {
    const tools = (exporter: boolean, prometheus: boolean, user = true) => ({ metricsTools: { exporter, prometheus, user } });
    const metricsOf = (s: NodeContactSpec, f: FirstContactFacts) => nodeFindings(s, f).filter((x) => x.topic === "metrics");

    it("off: nothing asked; a worker needs node_exporter, the head Prometheus too; each block names the package, the node and the key", () => {
        assert.deepEqual(metricsOf(spec(), cleanFacts(tools(false, false))), []);
        assert.deepEqual(
            metricsOf(spec({ metrics: { prometheus: false } }), cleanFacts(tools(true, false))).map((f) => f.level),
            ["ok"],
        );
        const [head] = metricsOf(spec({ metrics: { prometheus: true } }), cleanFacts(tools(true, false)));
        assert.equal(head.level, "block");
        assert.match(head.what, /needs prometheus, which the node lacks/);
        assert.match(head.fix ?? "", /^apt-get install prometheus on spark-a .*or set spark-cluster:metrics\.enabled to false$/);
        const [bare] = metricsOf(spec({ metrics: { prometheus: true } }), cleanFacts(tools(false, false)));
        assert.match(bare.fix ?? "", /^apt-get install prometheus-node-exporter prometheus on spark-a/);
        const [noUser] = metricsOf(spec({ metrics: { prometheus: false } }), cleanFacts(tools(true, false, false)));
        assert.equal(noUser.level, "block");
        assert.match(noUser.what, /the user prometheus/);
    });
});

describe("first contact: the node check's script", () => {
    const run = (findings: Finding[]) => spawnSync("bash", ["-c", nodeCheckScript(findings)], { encoding: "utf8" });

    it("prints every finding but the fine ones, and fails when one blocks", () => {
        const findings: Finding[] = [
            { node: "spark-a", topic: "memory", level: "ok", what: "118.8 GiB" },
            { node: "spark-a", topic: "docker", level: "note", what: "the image is not here yet" },
            {
                node: "spark-b",
                topic: "netplan",
                level: "block",
                what: "/etc/netplan/40-cx7.yaml defines enp1s0f1np1 ($(touch pwned))",
                fix: "set interconnect.takeOver: true",
            },
        ];
        const r = run(findings);
        assert.equal(r.status, 1);
        assert.doesNotMatch(r.stdout, /118\.8 GiB/);
        assert.match(r.stdout, /spark-a docker NOTE: the image is not here yet/);
        assert.match(r.stdout, /^spark-b netplan BLOCK: \/etc\/netplan\/40-cx7\.yaml defines enp1s0f1np1 \(\$\(touch pwned\)\)$/m);
        assert.match(r.stderr, /found 1 problem .*nothing was changed on any node/);
        assert.match(r.stderr, /^ {2}- set interconnect\.takeOver: true$/m);
        assert.match(r.stderr, /pulumi up --refresh/);
        assert.equal(fs.existsSync("pwned"), false);
    });

    it("passes when nothing blocks", () => {
        const r = run([{ node: "spark-a", topic: "docker", level: "warn", what: "little disk" }]);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /none blocks/);
    });
});

describe("first contact: the fit on the memory the nodes report", () => {
    const raw = (): RawConfig => ({
        secretKeys: new Set(["apiKey"]),
        values: {
            sshPrivateKeyPath: "/k",
            apiKey: "0123456789abcdef0123",
            nodes: ["a", "b"].map((n, i) => ({
                name: `spark-${n}`,
                kind: "spark",
                ...(i === 0 ? { head: true } : {}),
                ssh: { host: `10.0.0.1${i + 1}` },
                interconnect: [{ name: "enp1s0f1np1", address: `192.168.100.1${i + 1}/24` }],
            })),
            model: {
                source: "Qwen/Qwen2.5-72B-Instruct",
                size: { paramsB: 72.7, dtype: "bf16", layers: 80, hiddenSize: 8192, attentionHeads: 64, kvHeads: 8, vocabSize: 152064 },
                tensorParallel: 2,
                maxModelLen: 16384,
                gpuMemoryUtilization: 0.85,
            },
        },
    });
    const reports = (totalGiB: number) => {
        const config = parseConfig(raw());
        return {
            config,
            reports: config.nodes.map((node) => ({
                node,
                facts: cleanFacts({ memory: { totalKiB: Math.round(totalGiB * 1024 * 1024) } }),
                interfaces: ["enp1s0f1np1"],
                probed: true,
            })),
        };
    };

    it("fits on two 128 GB Sparks as they report it (the preview's default)", () => {
        const { config, reports: r } = reports(121.7);
        assert.equal(config.fit.status, "fits");
        const found = fitFindings(config, r);
        assert.deepEqual(
            found.map((f) => f.level),
            ["ok"],
        );
        assert.match(found[0].what, /spark-a 121\.69 GiB \(probed\)/);
    });

    it("is refused on two 64 GB Sparks, naming each node and both figures", () => {
        const { config, reports: r } = reports(59.6);
        const found = fitFindings(config, r);
        assert.equal(found.length, 1);
        assert.equal(found[0].level, "block");
        assert.match(found[0].node, /spark-a,spark-b/);
        assert.match(found[0].what, /spark-a 59\.60 GiB \(probed\), spark-b 59\.60 GiB \(probed\)/);
        assert.match(found[0].what, /does not fit/);
        assert.match(found[0].what, /of 59\.6 GiB|59\.6/);
    });

    it("a node's configured gpuMemoryGiB wins over what it reports", () => {
        const config = parseConfig({
            ...raw(),
            values: { ...raw().values, nodes: (raw().values["nodes"] as Record<string, unknown>[]).map((n) => ({ ...n, gpuMemoryGiB: 121.63 })) },
        });
        const r = config.nodes.map((node) => ({
            node,
            facts: cleanFacts({ memory: { totalKiB: 59 * 1024 * 1024 } }),
            interfaces: ["enp1s0f1np1"],
            probed: true,
        }));
        const found = fitFindings(config, r);
        assert.equal(found[0].level, "ok");
        assert.match(found[0].what, /nodes\[\]\.gpuMemoryGiB/);
    });
});
