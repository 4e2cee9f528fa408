/**
 * Issue 9, item 2: every config value reaches every place it lands intact, or the config refuses
 * it with a message naming the key and an example. Generated values (fast-check arbitraries,
 * seeded: the seed is printed,
 * SPARK_PROPERTY_SEED reproduces a run, SPARK_PROPERTY_COUNT sets the values per key) go into every
 * string key of the schema (found by walking it, so a new key fails this test until it is
 * driven here): uniform printable ASCII, known-dangerous characters and sequences, Unicode, and
 * mutations of valid examples.
 *
 * A value the config accepts is rendered with the whole program under Pulumi's mocks
 * (test/process/sinkRender.ts) into every resource, and each resource is read back layer by layer with
 * each sink's own reader (test/process/sinkParsers.ts): the remote command line, bash (words, here-docs,
 * `bash -n`), systemd 252 (`systemd --test` prints every parsed command line; `$` substitution at
 * exec), the docker CLI (a fake daemon records the container), vLLM's argument parser (the lab's,
 * generated from vLLM 0.33), EnvironmentFile= (systemd's reader, checked against systemd itself)
 * and --env-file (docker's reader, checked against the docker CLI), nccl.conf (NCCL's reader),
 * netplan YAML (a YAML parser, failsafe schema, as netplan reads scalars), Python (`ast`; the
 * readiness probe's own env reader), rsyncd.conf, nft. Nothing rendered is executed.
 *
 * Where a value lands is not listed by hand: each variant of the cluster is rendered once with a
 * sentinel in every key (the template), and a rendered value must read back as the template with
 * each sentinel replaced by the value, at every layer (`sinks=` says where the sentinel was found).
 * A value may only land where a reader decodes it; in raw shell code or opaque text only values
 * that need no quoting may appear.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import fc from "fast-check";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { z } from "zod";
import { ClusterConfigSchema, Config, ConfigError, formatPath, parseConfig } from "../../config";
import { isLoopback } from "../../config/ipv4";
import { FakeDockerDaemon, pythonBatch, systemdAvailable, vllmStandInDir } from "./sinkParsers";
import { RenderPool, RenderResult } from "./sinkRender";
import { SECRET_SIG, SECRET_SIG_KEY } from "../support/mockHarness";
import {
    JobView,
    PROFILE,
    Readers,
    containment,
    derivedFrom,
    derivedPairs,
    differences,
    ipv4Network,
    nftElements,
    nftMatches,
    readJob,
    secretsInPlaintext,
    sinksHolding,
    sinksNew,
    substitute,
    timed,
} from "./sinkViews";

// ---------------------------------------------------------------------------------------------
// The run: seed and size
// ---------------------------------------------------------------------------------------------

const SEED = process.env.SPARK_PROPERTY_SEED !== undefined ? Number(process.env.SPARK_PROPERTY_SEED) >>> 0 : randomInt(0, 2 ** 31);
const PER_KEY = Number(process.env.SPARK_PROPERTY_COUNT ?? 150);
const ROOT = path.resolve(__dirname, "..", "..", "..");
/** Where a value that escaped its quoting would leave a file (every value that carries `touch` names it; named by the seed, so a seed gives the same values). */
const MARKER_DIR = path.join(os.tmpdir(), `sinkprop-markers-${SEED}`);
fs.rmSync(MARKER_DIR, { recursive: true, force: true });
fs.mkdirSync(MARKER_DIR, { mode: 0o777 });
fs.chmodSync(MARKER_DIR, 0o777);
const MARKER = path.join(MARKER_DIR, "executed");

// ---------------------------------------------------------------------------------------------
// Generated values
// ---------------------------------------------------------------------------------------------

const PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
/** Characters and sequences that mean something to one of the readers. */
const DANGEROUS = [
    "'",
    '"',
    "`",
    "\\",
    "$",
    "$(",
    "${",
    "}",
    ")",
    "$(touch " + MARKER + ")",
    "`touch " + MARKER + "`",
    "${PATH}",
    "$HOME",
    "$$",
    "$1",
    "%",
    "%n",
    "%%",
    "%i",
    "%h",
    "\n",
    "\r",
    "\t",
    "\0",
    "\x01",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "-",
    "--",
    "-x",
    "--help",
    "=",
    "#",
    ";",
    " ; touch " + MARKER,
    " && touch " + MARKER,
    " | touch " + MARKER,
    "\ntouch " + MARKER + "\n",
    "&&",
    "|",
    ">",
    "<",
    "&",
    "*",
    "?",
    "[",
    "]",
    "~",
    "!",
    " ",
    "  ",
    ": ",
    "- ",
    "{",
    "!!",
    "&a",
    "*a",
    "? ",
    "@",
    ",",
    ":",
    "/",
    "..",
    "\\n",
    "\\x41",
    "\\\n",
    "'\"'\"'",
    "SPARK_CLUSTER_EOF_",
    "null",
    "true",
    "0x1A",
    "1e3",
    "é",
    "€",
    "😀",
    "中文",
    "\u200b",
    "\u2028",
    "\u00a0",
    "e\u0301",
    "\ufeff",
];
const UNICODE = ["é", "ü", "ß", "€", "😀", "中", "文", "ñ", "\u00a0", "\u200b", "\u2028", "\u0301", "\ufeff", "ʼ", "ＡＢ", "𝔘"];

/** Printable ASCII, up to `maxLength` characters. */
function printable(maxLength = 32): fc.Arbitrary<string> {
    return fc.string({ unit: fc.constantFrom(...PRINTABLE), maxLength });
}

/** One to four pieces, each a dangerous character or sequence (two in three) or a short printable string. */
const dangerous: fc.Arbitrary<string> = fc
    .array(fc.oneof({ arbitrary: fc.constantFrom(...DANGEROUS), weight: 2 }, { arbitrary: printable(6), weight: 1 }), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.join(""));

/** One to eight characters, each Unicode or printable ASCII (even odds). */
const unicode: fc.Arbitrary<string> = fc
    .array(fc.oneof(fc.constantFrom(...UNICODE), fc.constantFrom(...PRINTABLE)), { minLength: 1, maxLength: 8 })
    .map((chars) => chars.join(""));

/** A valid example with something dangerous put in, in front, at the end, or in place of a character. */
function mutate(examples: readonly string[]): fc.Arbitrary<string> {
    return fc.constantFrom(...examples).chain((example) =>
        fc
            .record({
                atom: fc.oneof({ arbitrary: fc.constantFrom(...UNICODE), weight: 1 }, { arbitrary: fc.constantFrom(...DANGEROUS), weight: 3 }),
                at: fc.integer({ min: 0, max: example.length }),
                how: fc.integer({ min: 0, max: 4 }),
                char: fc.constantFrom(...PRINTABLE),
            })
            .map(({ atom, at, how, char }) => {
                switch (how) {
                    case 0:
                        return atom + example;
                    case 1:
                        return example + atom;
                    case 2:
                        return example.slice(0, at) + atom + example.slice(at + 1);
                    case 3:
                        return example.slice(0, at) + char + example.slice(at);
                    default:
                        return example.slice(0, at) + atom + example.slice(at);
                }
            }),
    );
}

// ---------------------------------------------------------------------------------------------
// The cluster variants: every key is driven in one or more of them
// ---------------------------------------------------------------------------------------------

type Values = Record<string, unknown>;
type VariantName = "mp" | "ray" | "local";

const SSH_KEY = (body: string) => `-----BEGIN OPENSSH PRIVATE KEY-----\n${body}\n-----END OPENSSH PRIVATE KEY-----`;
const DEFAULT_IMAGE = "nvcr.io/nvidia/vllm:25.09-py3";

/**
 * mp: vLLM on both nodes (docker head, venv worker: both env-file readers), the NCCL check on,
 * Open WebUI in its own image on the head.
 * ray: the Ray executor (venv head, docker worker), Ray's token, the dashboard exposed, a key file,
 * Open WebUI in a venv on the head.
 * local: a local model path on the docker head, the served name left to its default.
 */
function variantBase(variant: VariantName): Values {
    const dockerRuntime = { kind: "docker", image: DEFAULT_IMAGE };
    const venvRuntime = { kind: "venv", path: "/opt/vllm-venv" };
    const head = (runtime: unknown) => ({
        name: "spark-a",
        kind: "spark",
        head: true,
        ssh: { host: "10.0.0.11" },
        runtime,
        interconnect: [
            { name: "enp1s0f1np1", address: "192.168.100.11/24" },
            { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
        ],
    });
    const worker = (runtime: unknown) => ({
        name: "spark-b",
        kind: "spark",
        ssh: { host: "10.0.0.12", user: "ubuntu" },
        runtime,
        interconnect: [
            { name: "enp1s0f1np1", address: "192.168.100.12/24" },
            { name: "enP2p1s0f1np1", address: "192.168.101.12/24" },
        ],
    });
    const common = {
        interconnect: { topology: "pair", mtu: 9000 },
        apiKey: "base-api-key-0123456789abcdef",
        hfToken: "hf_baseToken0123",
    };
    // Open WebUI on the head: its own image where the head runs docker (mp), a venv where it runs one (ray).
    const openWebui = { enabled: true, adminEmail: "admin@example.com" };
    switch (variant) {
        case "mp":
            return {
                ...common,
                nodes: [head(dockerRuntime), worker(venvRuntime)],
                model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor: "mp", extraArgs: [], size: { paramsB: 7.6 } },
                nccl: { overrides: {} },
                check: { enabled: true },
                firewall: { apiAllowFrom: ["192.168.1.0/24"], allowPorts: [8080, "5353/udp"] },
                sshPrivateKey: SSH_KEY("base"),
                frontend: { openWebui: { ...openWebui, port: 8090, runtime: { kind: "docker", image: "ghcr.io/open-webui/open-webui:v0.12.4" } } },
                openWebuiAdminPassword: "base-webui-password",
            };
        case "ray":
            return {
                ...common,
                nodes: [head(venvRuntime), worker(dockerRuntime)],
                model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor: "ray", extraArgs: [] },
                nccl: { overrides: {} },
                check: { enabled: false },
                ray: { dashboardHost: "127.0.0.1" },
                sshPrivateKeyPath: "/home/you/.ssh/id_ed25519",
                frontend: { openWebui: { ...openWebui, runtime: { kind: "venv", path: "/opt/spark-cluster-open-webui" } } },
                openWebuiAdminPassword: "base-webui-password",
                // Metrics on (Prometheus's configuration and the exporters' units carry node names and addresses).
                metrics: { enabled: true },
            };
        case "local":
            return {
                ...common,
                nodes: [head(dockerRuntime), worker(venvRuntime)],
                model: { source: "/models/qwen2.5-7b-instruct", executor: "mp", extraArgs: [] },
                check: { enabled: false },
                sshPrivateKey: SSH_KEY("base"),
            };
    }
}

function secretKeysOf(values: Values): string[] {
    return ["sshPrivateKey", "sudoPassword", "apiKey", "hfToken", "rayAuthToken", "openWebuiAdminPassword"].filter((k) => values[k] !== undefined);
}

/** Sets `value` at `at` (`["nodes", 1, "ssh", "user"]`) in a copy of `values`. */
function setAt(values: Values, at: readonly (string | number)[], value: unknown): Values {
    const copy = structuredClone(values);
    let node = copy as Record<string | number, unknown>;
    at.slice(0, -1).forEach((step, i) => {
        node[step] ??= typeof at[i + 1] === "number" ? [] : {};
        node = node[step] as Record<string | number, unknown>;
    });
    node[at[at.length - 1]] = value;
    return copy;
}

// ---------------------------------------------------------------------------------------------
// The keys
// ---------------------------------------------------------------------------------------------

/** Where a key's values go in one variant, and the sentinel the template holds there. */
interface Lane {
    variant: VariantName;
    /** Where the value goes in the config (a list element: its index; a record key: `{key}`). */
    at: (string | number)[];
    /** The sentinel of this lane, or undefined: this lane renders every value as it is (see Key.exact). */
    sentinel?: string;
}

interface Key {
    /** The schema path as the walk of the schema names it (`nodes[].runtime<venv>.path`). */
    path: string;
    lanes: Lane[];
    /** Valid values to mutate; the first is the lane value of variants that do not drive this key. */
    examples: string[];
    /** Values that change what is rendered (not only where the value lands): rendered on their own, checked against a template holding them. */
    exact?: (value: string) => boolean;
    /** More values of the key's own shape (made when the run starts: some read what the run found). */
    generate?: () => fc.Arbitrary<string>;
    /** Printable values the config must accept (secrets: any printable character). */
    mustAccept?: (value: string) => boolean;
    /** The variants a value goes to (default: every lane's, in turn): values that render differently go where the template renders alike. */
    route?: (value: string) => VariantName[];
    /** Keys a refusal may name instead of the value's own: where the config says what the value conflicts with (a prefix). */
    refusalAlso?: string[];
    /** How the value goes in (default: the value itself at `at`); a record key gets a value. */
    wrap?: (value: string) => unknown;
    secret?: boolean;
    /** A choice: the value decides what is rendered and need not appear itself (why). */
    decides?: string;
    /** Nothing of the value may reach a host (a key file is read where pulumi runs). */
    noHostSink?: boolean;
    /** Where the exact checks look (a lane without a sentinel finds no places in a template). */
    checkedSinks?: string[];
    /** The places the value must land (besides what the template shows), checked on the parsed layers. */
    exactChecks?: (value: string, view: JobView, config: Config) => string[];
}

const IPV4: fc.Arbitrary<string> = fc
    .array(fc.oneof({ arbitrary: fc.constantFrom(0, 1, 10, 12, 100, 192, 168, 255, 256), weight: 9 }, { arbitrary: fc.nat(299), weight: 1 }), {
        minLength: 4,
        maxLength: 4,
    })
    .map((octets) => octets.join("."));
const HOSTNAME: fc.Arbitrary<string> = fc.oneof(
    { arbitrary: fc.constantFrom("a", "node-1", "spark.lan", "-a", "a-", "a..b", "A.B", "1.2.3", "ex_ample", "xn--bcher-kva"), weight: 10 },
    { arbitrary: fc.integer({ min: 1, max: 70 }).map((n) => "x".repeat(n)), weight: 1 },
);
const printableSecret = (min: number, max: number) => (value: string) =>
    /^[\x20-\x7e]+$/.test(value) && !/^ | $/.test(value) && value.length >= min && value.length <= max;

/**
 * Values the config accepts that cannot arrive intact, whose fix is a refusal in a config file this
 * test does not own (config/schema.ts, config/nodeSchema.ts, config/schemaFields.ts). Each matches
 * by value and by problem; its values are rendered on their own, and its problems are reported by
 * the `known issues` test (todo) instead of failing the key. A value that stops failing, or a
 * problem no known issue explains, still fails.
 */
interface KnownIssue {
    key: string;
    value: (value: string) => boolean;
    problem: RegExp;
    /** What to change, and why. */
    fix: string;
}

// None today: the last ones (venv path, nccl.ibHca, override length, non-ASCII secrets) are
// refused by the config now. A new one goes here with its fix, never silently.
const KNOWN_ISSUES: KnownIssue[] = [];

function knownIssue(key: Key, value: string): KnownIssue | undefined {
    return KNOWN_ISSUES.find((k) => k.key === key.path && k.value(value));
}

/** vLLM's option strings, from the stand-in's table (filled before the values are generated). */
let VLLM_OPTIONS: string[] = [];

const KEYS: Key[] = [
    {
        path: "nodes[].name",
        lanes: [{ variant: "mp", at: ["nodes", 1, "name"], sentinel: "zqnodebzq" }],
        examples: ["spark-b", "thor-1", "ws"],
    },
    {
        path: "nodes[].kind",
        decides: "the node's kind decides its runtime, transport and RoCE steps",
        lanes: [{ variant: "mp", at: ["nodes", 1, "kind"] }],
        examples: ["spark", "thor", "workstation"],
        // Only a spark has twin interfaces.
        refusalAlso: ["nodes[1].interconnect"],
    },
    {
        path: "nodes[].ssh.host",
        lanes: [{ variant: "mp", at: ["nodes", 1, "ssh", "host"], sentinel: "zqhostzq" }],
        examples: ["10.0.0.12", "spark-b.lan"],
        generate: () => fc.oneof(IPV4, HOSTNAME),
    },
    {
        path: "nodes[].ssh.user",
        lanes: [{ variant: "mp", at: ["nodes", 1, "ssh", "user"], sentinel: "zquserzq" }],
        examples: ["ubuntu", "root", "_svc-1"],
        exact: (v) => v === "root",
        // The template's other node logs in as root and it sets sudoPassword: root here leaves no step to use it.
        refusalAlso: ["sudoPassword"],
    },
    {
        path: "nodes[].ssh.privateKeyPath",
        lanes: [{ variant: "ray", at: ["nodes", 1, "ssh", "privateKeyPath"], sentinel: "/zqkeypathzq/id" }],
        examples: ["/home/you/.ssh/id_ed25519", "keys/spark-b"],
        noHostSink: true,
    },
    {
        path: "nodes[].ssh.hostKey",
        lanes: [{ variant: "mp", at: ["nodes", 0, "ssh", "hostKey"], sentinel: "ssh-ed25519 AAAAzqhostkeyzq" }],
        examples: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyHostKeyHostKey root@spark-a", "ecdsa-sha2-nistp256 AAAAE2Vj="],
    },
    {
        path: "nodes[].runtime<docker>.kind",
        decides: "selects the runtime",
        lanes: [{ variant: "mp", at: ["nodes", 0, "runtime", "kind"] }],
        examples: ["docker", "venv"],
        refusalAlso: ["nodes[0].runtime"],
    },
    {
        path: "nodes[].runtime<docker>.image",
        lanes: [
            { variant: "mp", at: ["nodes", 0, "runtime", "image"], sentinel: "zqimagezq" },
            { variant: "ray", at: ["nodes", 1, "runtime", "image"], sentinel: "zqimagezq" },
        ],
        examples: [DEFAULT_IMAGE, "localhost:5000/vllm/vllm-openai:v0.33.0", "vllm@sha256:" + "a".repeat(64)],
    },
    {
        path: "nodes[].runtime<docker>.shmSize",
        lanes: [{ variant: "mp", at: ["nodes", 0, "runtime", "shmSize"], sentinel: "98765m" }],
        examples: ["16g", "10240m", "1gb"],
    },
    {
        path: "nodes[].runtime<docker>.extraOptions[]",
        lanes: [
            { variant: "mp", at: ["nodes", 0, "runtime", "extraOptions", 0], sentinel: "--group-add=zqdockeroptzq" },
            { variant: "ray", at: ["nodes", 1, "runtime", "extraOptions", 0], sentinel: "--group-add=zqdockeroptzq" },
        ],
        examples: [
            "--ulimit=nofile=1048576:1048576",
            "--mount=type=bind,source=/data/templates,target=/templates,readonly",
            "--mount=type=bind,src=/srv/a_b.c@1+2,dst=/x",
            "--device=/dev/infiniband/uverbs0",
            "--device=/dev/a:/dev/b:rwm",
            "--cap-add=IPC_LOCK",
            "--group-add=video",
            "--privileged",
            "-v /data:/data",
            "--entrypoint=/bin/sh",
            "--env=A=1",
        ],
        // An allowed flag with a value of any shape, or of its own shape with generated parts: what
        // the config accepts must reach docker as one argument it parses.
        generate: () => {
            const part = fc.string({ unit: fc.constantFrom(..."abcXYZ019._@+-".split("")), minLength: 1, maxLength: 8 });
            const limit = fc.oneof(fc.constantFrom("-1", "0"), fc.nat().map(String));
            const shaped = fc.oneof(
                fc
                    .tuple(part, part, fc.constantFrom("", ",readonly", ",ro", ",readonly=false"))
                    .map(([a, b, ro]) => `--mount=type=bind,source=/srv/${a},target=/m/${b}${ro}`),
                fc.tuple(part, fc.constantFrom("", ":rw", ":/dev/x", ":/dev/x:m")).map(([a, tail]) => `--device=/dev/${a}${tail}`),
                fc
                    .tuple(fc.constantFrom("nofile", "core", "nproc", "rtprio", "memlock", "stack"), limit, fc.option(limit))
                    .map(([name, soft, hard]) => `--ulimit=${name}=${soft}${hard === null ? "" : `:${hard}`}`),
                fc.constantFrom("IPC_LOCK", "CAP_SYS_NICE", "SYS_PTRACE", "ALL", "NET_ADMIN").map((cap) => `--cap-add=${cap}`),
                fc.oneof(part, fc.nat().map(String)).map((group) => `--group-add=${group}`),
            );
            const any = fc
                .tuple(
                    fc.constantFrom(
                        "--mount=type=bind,source=",
                        "--mount=",
                        "--device=/dev/",
                        "--device=",
                        "--ulimit=nofile=",
                        "--ulimit=",
                        "--cap-add=",
                        "--group-add=",
                    ),
                    fc.oneof(printable(16), dangerous, unicode),
                )
                .map(([flag, value]) => flag + value);
            return fc.oneof(shaped, any);
        },
    },
    {
        path: "nodes[].runtime<venv>.kind",
        decides: "selects the runtime",
        lanes: [{ variant: "mp", at: ["nodes", 1, "runtime", "kind"] }],
        examples: ["venv", "docker"],
        refusalAlso: ["nodes[1].runtime"],
    },
    {
        path: "nodes[].runtime<venv>.path",
        lanes: [
            { variant: "mp", at: ["nodes", 1, "runtime", "path"], sentinel: "/zqvenvzq" },
            { variant: "ray", at: ["nodes", 0, "runtime", "path"], sentinel: "/zqvenvzq" },
        ],
        examples: ["/opt/vllm-venv", "/home/me/venvs/vllm", "/opt/a%b", "/opt/$HOME/v", "/opt/" + "v".repeat(300)],
    },
    {
        path: "nodes[].interconnect[].name",
        lanes: [{ variant: "mp", at: ["nodes", 0, "interconnect", 0, "name"], sentinel: "zqifazq" }],
        examples: ["enp1s0f1np1", "eth0", "mgbe0_0", "a.b-c"],
        // The mocked probe's devices: naming one puts it under PFC.
        exact: (v) => ["enp1s0f1np1", "enP2p1s0f1np1"].includes(v),
    },
    {
        path: "nodes[].interconnect[].address",
        lanes: [{ variant: "mp", at: ["nodes", 1, "interconnect", 0, "address"] }],
        examples: ["192.168.100.12/24", "192.168.100.254/24", "192.168.100.12/16"],
        generate: () =>
            fc
                .tuple(fc.constantFrom("100", "101", "1"), fc.nat(259), fc.constantFrom("24", "16", "32", "0", "33"))
                .map(([third, fourth, prefix]) => `192.168.${third}.${fourth}/${prefix}`),
        checkedSinks: ["netplan-yaml", "env:systemd(VLLM_HOST_IP)", "nft(members)"],
        exactChecks: (value, view, config) => {
            const [a, b] = config.nodes.map((n) => n.name);
            const ip = value.split("/")[0];
            const problems: string[] = [];
            const netplan = view.files.get(b)?.get("/etc/netplan/60-spark-cluster-interconnect.yaml") ?? "";
            const addresses = (yaml.load(netplan, { schema: yaml.FAILSAFE_SCHEMA }) as { network: { ethernets: Record<string, { addresses: string[] }> } })
                .network.ethernets;
            if (!Object.values(addresses).some((e) => e.addresses.includes(value))) problems.push(`${b}'s netplan file does not list ${value}`);
            if (view.env.get(b)?.get("/etc/spark-cluster/runtime.env")?.get("VLLM_HOST_IP") !== ip) problems.push(`${b}'s VLLM_HOST_IP is not ${ip}`);
            for (const node of [a, b])
                if (!nftElements(view.nft.get(node), "members").includes(ip)) problems.push(`${node}'s firewall does not list the member ${ip}`);
            return problems;
        },
    },
    {
        path: "interconnect.topology",
        decides: "checked at preview only",
        lanes: [{ variant: "mp", at: ["interconnect", "topology"] }],
        examples: ["pair", "switch"],
    },
    // A cable's ends (mesh and ring, issue 23): those topologies are refused until up applies their
    // routes, so no value reaches a host yet. Driven on the pair, where any cable is refused by the
    // cabling check naming interconnect.cables, with its example.
    ...(["a", "b"] as const).flatMap((side) =>
        (["node", "port"] as const).map((field): Key => ({
            path: `interconnect.cables[].${side}.${field}`,
            lanes: [{ variant: "mp", at: ["interconnect", "cables", 0] }],
            examples: field === "node" ? ["spark-a", "spark-b"] : ["enp1s0f0np0", "enp1s0f1np1"],
            wrap: (value) => {
                const ends = { a: { node: "spark-a", port: "enp1s0f0np0" }, b: { node: "spark-b", port: "enp1s0f1np1" } };
                ends[side] = { ...ends[side], [field]: value };
                return ends;
            },
            refusalAlso: ["interconnect.cables"],
            noHostSink: true,
        })),
    ),
    {
        path: "interconnect.linkCheck.lowSpeed",
        decides: "decides whether a slow link fails the apply or warns (a choice, not text on a host)",
        lanes: [{ variant: "mp", at: ["interconnect", "linkCheck", "lowSpeed"] }],
        examples: ["refuse", "warn"],
    },
    {
        path: "roce.peermem",
        decides: "decides whether nvidia-peermem loads (auto: on a workstation only), a choice, not text on a host",
        lanes: [{ variant: "mp", at: ["roce", "peermem"] }],
        examples: ["auto"],
    },
    {
        path: "nccl.transport",
        decides: "decides the NCCL variables (auto resolves to roce or socket)",
        lanes: [{ variant: "mp", at: ["nccl", "transport"] }],
        examples: ["auto", "roce", "socket"],
    },
    {
        path: "nccl.ibHca[]",
        lanes: [
            { variant: "mp", at: ["nccl", "ibHca", 0], sentinel: "zqhcazq" },
            { variant: "ray", at: ["nccl", "ibHca", 0], sentinel: "zqhcazq" },
        ],
        examples: ["rocep1s0f1", "mlx5_0:1", "=mlx5_0"],
    },
    {
        path: "nccl.socketIfname",
        lanes: [
            { variant: "mp", at: ["nccl", "socketIfname"], sentinel: "zqsockzq" },
            { variant: "ray", at: ["nccl", "socketIfname"], sentinel: "zqsockzq" },
        ],
        examples: ["enp1s0f1np1", "^docker,lo", "=eth0", "en"],
    },
    { path: "nccl.debug", lanes: [{ variant: "mp", at: ["nccl", "debug"] }], examples: ["WARN", "INFO", "TRACE"] },
    {
        path: "nccl.overrides{key}",
        lanes: [{ variant: "mp", at: ["nccl", "overrides", "{key}"], sentinel: "NCCL_ZQKEYZQ" }],
        examples: ["NCCL_IB_MERGE_NICS", "NCCL_P2P_LEVEL", "NCCL_IB_GID_INDEX", "NCCL_DEBUG"],
        wrap: () => "1",
        // Variables the renderer writes itself: an override replaces them in place.
        exact: (v) => ["NCCL_IB_ROCE_VERSION_NUM", "NCCL_CROSS_NIC", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_PROTO"].includes(v),
        generate: () => fc.tuple(fc.constantFrom("IB_", "P2P_", "", "X"), printable(6)).map(([group, rest]) => `NCCL_${group}${rest.toUpperCase()}`),
    },
    {
        path: "nccl.overrides{}",
        lanes: [
            { variant: "mp", at: ["nccl", "overrides", "NCCL_ZQVALUEZQ"], sentinel: "zqovaluezq" },
            { variant: "ray", at: ["nccl", "overrides", "NCCL_ZQVALUEZQ"], sentinel: "zqovaluezq" },
        ],
        examples: ["1", "mlx5_0:1,mlx5_1:1", 'a "quoted" value', "x".repeat(1500)],
    },
    {
        path: "check.requireTransport",
        lanes: [{ variant: "mp", at: ["check", "requireTransport"], sentinel: "zqtransportzq" }],
        examples: ["NET/IB", "NET/Socket", "gloo/TCP", "any"],
        exact: (v) => v === "any",
    },
    {
        path: "firewall.apiAllowFrom[]",
        lanes: [{ variant: "mp", at: ["firewall", "apiAllowFrom", 0] }],
        examples: ["192.168.1.0/24", "10.0.0.0/8", "0.0.0.0/0"],
        generate: () => fc.tuple(IPV4, fc.nat(39)).map(([ip, prefix]) => `${ip}/${prefix}`),
        checkedSinks: ["nft(ip saddr)"],
        // nft keeps a range as its network (the host bits of 10.1.2.3/8 are dropped): the same addresses.
        exactChecks: (value, view, config) =>
            nftMatches(view.nft.get(config.head.name), "ip saddr").includes(ipv4Network(value))
                ? []
                : [`${config.head.name}'s firewall does not let ${value} reach the API`],
    },
    {
        path: "firewall.allowPorts[]",
        lanes: [{ variant: "mp", at: ["firewall", "allowPorts", 1] }],
        examples: ["5353/udp", "8080", "8080/tcp", "65535/udp"],
        generate: () => fc.tuple(fc.nat(69999), fc.constantFrom("", "/tcp", "/udp", "/sctp", "/UDP")).map(([port, proto]) => `${port}${proto}`),
        checkedSinks: ["nft(tcp/udp dport)"],
        exactChecks: (value, view, config) => {
            const [port, protocol] = value.split("/");
            const field = `${protocol ?? "tcp"} dport`;
            return config.nodes
                .filter((n) => !nftMatches(view.nft.get(n.name), field).includes(port))
                .map((n) => `${n.name}'s firewall does not open ${value}`);
        },
    },
    {
        path: "ray.dashboardHost",
        lanes: [{ variant: "ray", at: ["ray", "dashboardHost"], sentinel: "zqdashzq" }],
        examples: ["127.0.0.1", "0.0.0.0", "localhost", "dash.lan"],
        // A loopback address (any of 127.0.0.0/8, config/ipv4.ts isLoopback) keeps the dashboard off
        // the network (no firewall port, a tunnel for its output); 0.0.0.0: the Ray head's watchdog
        // asks 127.0.0.1 (render/ray.ts rayGcsHealthUrl).
        exact: (v) => isLoopback(v) || v === "0.0.0.0",
        generate: () => fc.oneof(IPV4, HOSTNAME),
    },
    {
        path: "model.source",
        lanes: [
            { variant: "mp", at: ["model", "source"], sentinel: "zqorgzq/zqnamezq" },
            { variant: "ray", at: ["model", "source"], sentinel: "zqorgzq/zqnamezq" },
            { variant: "local", at: ["model", "source"], sentinel: "/zqmodelszq/zqlocalzq" },
        ],
        examples: [
            "Qwen/Qwen2.5-7B-Instruct",
            "meta-llama/Llama-3.1-8B",
            "/models/qwen2.5-7b",
            "/models/x-y/z.1",
            "/models/-x",
            "org/name-",
            "org/a--b",
            "org/" + "n".repeat(97),
            "/models/" + "m".repeat(256),
            "/m/" + "long/".repeat(820) + "x",
        ],
        // A local path is checked on each node; a hub id is downloaded once and copied.
        route: (v) => (v.startsWith("/") ? ["local"] : ["mp", "ray"]),
    },
    {
        path: "model.servedName",
        lanes: [
            { variant: "mp", at: ["model", "servedName"], sentinel: "zqservedzq" },
            { variant: "ray", at: ["model", "servedName"], sentinel: "zqservedzq" },
        ],
        examples: ["qwen", "Qwen/Qwen2.5-7B-Instruct", "my_model:v1"],
    },
    {
        path: "model.engine",
        decides: "decides the serving engine (vLLM or SGLang: its unit, argv and secrets file)",
        // The whole model section: the template's sentinels (quantization, extraArgs) are vLLM's names, which SGLang refuses.
        lanes: [{ variant: "mp", at: ["model"] }],
        examples: ["vllm", "sglang"],
        wrap: (engine) => ({ source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor: "mp", extraArgs: [], size: { paramsB: 7.6 }, engine }),
    },
    {
        path: "model.executor",
        decides: "decides Ray or vLLM's own multi-node mode",
        lanes: [{ variant: "mp", at: ["model", "executor"] }],
        examples: ["mp", "ray"],
    },
    {
        path: "model.quantization",
        lanes: [
            { variant: "mp", at: ["model", "quantization"], sentinel: "zqquantzq" },
            { variant: "ray", at: ["model", "quantization"], sentinel: "zqquantzq" },
        ],
        examples: ["fp8", "awq", "modelopt_fp4"],
    },
    {
        path: "model.kvCacheDtype",
        lanes: [{ variant: "mp", at: ["model", "kvCacheDtype"], sentinel: "zqkvzq" }],
        examples: ["fp8", "auto", "fp8_e4m3"],
    },
    {
        path: "model.attentionBackend",
        lanes: [{ variant: "mp", at: ["model", "attentionBackend"], sentinel: "zqattnzq" }],
        examples: ["TRITON_ATTN", "FLASH_ATTN"],
    },
    {
        path: "model.extraArgs[]",
        lanes: [
            { variant: "mp", at: ["model", "extraArgs", 0], sentinel: "--zqextrazq" },
            { variant: "ray", at: ["model", "extraArgs", 0], sentinel: "--zqextrazq" },
            { variant: "local", at: ["model", "extraArgs", 0], sentinel: "--zqextrazq" },
        ],
        examples: [
            "--max-num-batched-tokens=8192",
            "--disable-custom-all-reduce",
            '--compilation-config={"level":3}',
            "--chat-template=/t.jinja",
            "--device-memory-utilization=0.5",
            "--served-model-name.x=1",
            "--chat-template=" + "t".repeat(140_000),
        ],
        generate: () => {
            // Every spelling vLLM's parser takes for one of its flags: abbreviations, _ for -, --no-,
            // dotted JSON keys, with a value or without.
            const options = VLLM_OPTIONS.filter((o) => o.startsWith("--"));
            return fc.constantFrom(...(options.length > 0 ? options : ["--port"])).chain((option) =>
                fc
                    .record({
                        length: fc.integer({ min: 3, max: option.length }),
                        underscores: fc.option(fc.array(fc.boolean(), { minLength: option.length, maxLength: option.length }), { freq: 3 }),
                        negated: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
                        dotted: fc.option(printable(4), { freq: 5 }),
                        value: fc.option(fc.oneof(printable(12), dangerous), { freq: 2 }),
                    })
                    .map(({ length, underscores, negated, dotted, value }) => {
                        let flag = option.slice(0, length);
                        if (underscores) flag = flag.replace(/-/g, (c, at: number) => (at > 1 && underscores[at] ? "_" : c));
                        if (negated) flag = "--no-" + flag.slice(2);
                        if (dotted !== null) flag += "." + dotted.replace(/[^a-z]/g, "") + "x";
                        return value === null ? flag : `${flag}=${value}`;
                    }),
            );
        },
    },
    {
        path: "model.env{key}",
        lanes: [
            { variant: "mp", at: ["model", "env", "{key}"], sentinel: "ZQENVKEYZQ" },
            { variant: "ray", at: ["model", "env", "{key}"], sentinel: "ZQENVKEYZQ" },
        ],
        examples: ["VLLM_USE_FLASHINFER_MOE_FP4", "NCCL_NVLS_ENABLE", "_x1", "VLLM_HOST_IP", "HF_TOKEN", "RAY_ADDRESS", "HF_HOME", "a-b", "1X"],
        wrap: () => "1",
        generate: () =>
            fc.tuple(fc.constantFrom("VLLM_", "NCCL_", "RAY_", "HF_", "", "_", "9"), printable(8)).map(([prefix, rest]) => `${prefix}${rest.toUpperCase()}`),
    },
    {
        path: "model.env{}",
        lanes: [
            { variant: "mp", at: ["model", "env", "ZQENVVALUEKEYZQ"], sentinel: "zqenvvaluezq" },
            { variant: "ray", at: ["model", "env", "ZQENVVALUEKEYZQ"], sentinel: "zqenvvaluezq" },
        ],
        examples: ["1", "0.9", 'a "quoted" $value %n \\ end', " leading and trailing ", "", "x".repeat(5000)],
        // Any printable ASCII up to 4096 bytes: both systemd's Environment= and docker's -e carry it.
        mustAccept: (value) => /^[\x20-\x7e]*$/.test(value) && value.length <= 4096,
    },
    {
        path: "model.apiHost",
        lanes: [
            { variant: "mp", at: ["model", "apiHost"], sentinel: "zqapihostzq" },
            { variant: "ray", at: ["model", "apiHost"], sentinel: "zqapihostzq" },
        ],
        examples: ["0.0.0.0", "127.0.0.1", "api.lan"],
        // Open WebUI talks to 127.0.0.1 where the API listens on every address or on localhost.
        exact: (v) => v === "0.0.0.0" || v === "localhost",
        generate: () => fc.oneof(IPV4, HOSTNAME),
    },
    {
        path: "model.size.dtype",
        decides: "feeds the fit check at preview only",
        lanes: [{ variant: "mp", at: ["model", "size", "dtype"] }],
        examples: ["bf16", "fp8", "fp4", "int4"],
        wrap: (v) => v,
    },
    {
        path: "sshPrivateKey",
        lanes: [
            { variant: "mp", at: ["sshPrivateKey"], sentinel: SSH_KEY("zqsshkeyzq") },
            { variant: "local", at: ["sshPrivateKey"], sentinel: SSH_KEY("zqsshkeyzq") },
        ],
        examples: [SSH_KEY("b3BlbnNzaC1rZXktdjEAAAAABG5vbmU="), "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"],
        secret: true,
    },
    {
        // The login user's sudo password: it rides in each command's connection (our provider puts it on the
        // script's stdin, before the marker), never in a script, a file or argv.
        path: "sudoPassword",
        lanes: [
            { variant: "mp", at: ["sudoPassword"], sentinel: "zqsudopasszq" },
            { variant: "ray", at: ["sudoPassword"], sentinel: "zqsudopasszq" },
        ],
        examples: ["correct horse battery staple", "p@ss;w0rd#1=$HOME 'x' \"y\""],
        secret: true,
        mustAccept: (value) => /^[\x20-\x7e]+$/.test(value) && value.length <= 256,
        generate: () => printable(40).map((body) => "s" + body + "s"),
    },
    {
        path: "sshPrivateKeyPath",
        lanes: [{ variant: "ray", at: ["sshPrivateKeyPath"], sentinel: "/zqsshkeypathzq" }],
        examples: ["/home/you/.ssh/id_ed25519", "relative/key"],
        noHostSink: true,
    },
    {
        path: "apiKey",
        lanes: [
            { variant: "mp", at: ["apiKey"], sentinel: "zqapikeyzq0123456789" },
            { variant: "ray", at: ["apiKey"], sentinel: "zqapikeyzq0123456789" },
            { variant: "local", at: ["apiKey"], sentinel: "zqapikeyzq0123456789" },
        ],
        examples: ["sk-0123456789abcdef0123", "a b c d e f g h i j k"],
        secret: true,
        mustAccept: printableSecret(16, 4096),
        // With Open WebUI on (mp, ray) a key holding ; is refused naming apiKey (Open WebUI splits
        // OPENAI_API_KEYS at ;): such keys go where it is off, which must carry them.
        route: (v) => (v.includes(";") ? ["local"] : ["mp", "ray", "local"]),
        generate: () => printable(40).map((body) => "k" + body + "0123456789abcdefk"),
    },
    {
        path: "hfToken",
        lanes: [
            { variant: "mp", at: ["hfToken"], sentinel: "hf_zqhftokenzq" },
            { variant: "ray", at: ["hfToken"], sentinel: "hf_zqhftokenzq" },
            { variant: "local", at: ["hfToken"], sentinel: "hf_zqhftokenzq" },
        ],
        examples: ["hf_abcdefghijklmnopqrstuvwxyz0123", "x"],
        secret: true,
        mustAccept: printableSecret(1, 512),
        generate: () => printable(40).map((body) => "t" + body + "t"),
    },
    {
        path: "rayAuthToken",
        lanes: [{ variant: "ray", at: ["rayAuthToken"], sentinel: "zqraytokenzq0123456789abcdefghijkl" }],
        examples: ["0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"],
        secret: true,
        // Not any printable character: the Ray readiness step reads ray.env with bash (`. ray.env`).
        mustAccept: (value) => /^[A-Za-z0-9_-]{32,256}$/.test(value),
        generate: () => printable(60).map((body) => "r" + body + "0123456789abcdef0123456789abcdefr"),
    },
    {
        // The root secret's generation: the input of our provider's RandomSecret, which touches no host.
        path: "secretsGeneration",
        lanes: [{ variant: "ray", at: ["secretsGeneration"], sentinel: "zqgenerationzq" }],
        examples: ["1", "2026-11-29"],
        mustAccept: (value) => /^[A-Za-z0-9._-]{1,64}$/.test(value),
        noHostSink: true,
    },
    {
        path: "openWebuiAdminPassword",
        lanes: [
            { variant: "mp", at: ["openWebuiAdminPassword"], sentinel: "zqwebuipasszq0123" },
            { variant: "ray", at: ["openWebuiAdminPassword"], sentinel: "zqwebuipasszq0123" },
        ],
        examples: ["correct horse battery staple", "p@ss;w0rd#1=$HOME"],
        secret: true,
        // Any printable character: Open WebUI's env file carries it, docker's --env-file or systemd's EnvironmentFile=.
        mustAccept: printableSecret(12, 256),
        generate: () => printable(40).map((body) => "w" + body + "0123456789w"),
    },
    // Open WebUI (frontend.openWebui), on the head of mp (its own image) and ray (a venv).
    {
        path: "frontend.openWebui.runtime<docker>.kind",
        decides: "selects Open WebUI's runtime",
        // The runtime alone, with its defaults: either kind renders on either head.
        lanes: [{ variant: "mp", at: ["frontend", "openWebui", "runtime"] }],
        examples: ["docker", "venv"],
        wrap: (kind) => ({ kind }),
        refusalAlso: ["frontend.openWebui.runtime"],
    },
    {
        path: "frontend.openWebui.runtime<docker>.image",
        lanes: [{ variant: "mp", at: ["frontend", "openWebui", "runtime", "image"], sentinel: "zqwebuiimagezq" }],
        examples: ["ghcr.io/open-webui/open-webui:v0.12.4", "localhost:5000/open-webui:main", "open-webui@sha256:" + "b".repeat(64)],
    },
    {
        path: "frontend.openWebui.runtime<venv>.kind",
        decides: "selects Open WebUI's runtime",
        // The runtime alone, with its defaults: either kind renders on either head.
        lanes: [{ variant: "ray", at: ["frontend", "openWebui", "runtime"] }],
        examples: ["venv", "docker"],
        wrap: (kind) => ({ kind }),
        refusalAlso: ["frontend.openWebui.runtime"],
    },
    {
        path: "frontend.openWebui.runtime<venv>.path",
        lanes: [{ variant: "ray", at: ["frontend", "openWebui", "runtime", "path"], sentinel: "/zqwebuivenvzq/v" }],
        examples: ["/opt/spark-cluster-open-webui", "/home/me/venvs/open-webui", "/opt/a%b", "/opt/" + "v".repeat(300)],
    },
    {
        path: "frontend.openWebui.runtime<venv>.wheelhouse",
        lanes: [{ variant: "ray", at: ["frontend", "openWebui", "runtime", "wheelhouse"], sentinel: "/zqwheelhousezq/w" }],
        examples: ["/srv/wheelhouse/open-webui-0.12.4", "/mnt/usb/wheels", "/srv/a%n"],
    },
    {
        path: "frontend.openWebui.version",
        lanes: [{ variant: "ray", at: ["frontend", "openWebui", "version"], sentinel: "0.97.13" }],
        examples: ["0.12.4", "0.6.5", "1.0.0"],
    },
    {
        path: "frontend.openWebui.listenAddress",
        lanes: [
            { variant: "mp", at: ["frontend", "openWebui", "listenAddress"], sentinel: "10.98.76.54" },
            { variant: "ray", at: ["frontend", "openWebui", "listenAddress"], sentinel: "10.98.76.54" },
        ],
        examples: ["127.0.0.1", "0.0.0.0", "192.168.1.20"],
        // Off loopback (the template's) it opens the port in the firewall; on loopback it does not
        // and the access output is a tunnel; for 0.0.0.0 the probe goes to 127.0.0.1.
        exact: (v) => v.startsWith("127.") || v === "0.0.0.0",
        generate: () => IPV4,
    },
    {
        path: "frontend.openWebui.adminEmail",
        lanes: [
            { variant: "mp", at: ["frontend", "openWebui", "adminEmail"], sentinel: "zqadminzq@zqmailzq.example" },
            { variant: "ray", at: ["frontend", "openWebui", "adminEmail"], sentinel: "zqadminzq@zqmailzq.example" },
        ],
        examples: ["admin@example.com", "first.last+ui@mail.example.org", "a_b-c@x.io"],
    },
    {
        path: "frontend.openWebui.adminName",
        lanes: [
            { variant: "mp", at: ["frontend", "openWebui", "adminName"], sentinel: "zqadminnamezq" },
            { variant: "ray", at: ["frontend", "openWebui", "adminName"], sentinel: "zqadminnamezq" },
        ],
        examples: ["Admin", "Ada Lovelace", 'O\'Brien "the admin"', "管理者"],
    },
    {
        path: "frontend.openWebui.dataDir",
        lanes: [
            { variant: "mp", at: ["frontend", "openWebui", "dataDir"], sentinel: "/zqwebuidatazq/open-webui" },
            { variant: "ray", at: ["frontend", "openWebui", "dataDir"], sentinel: "/zqwebuidatazq/open-webui" },
        ],
        examples: ["/var/lib/spark-cluster-open-webui", "/srv/open-webui/data/", "/srv/a%n", "/srv/" + "d".repeat(300)],
        // The config drops a trailing /: rendered without it.
        exact: (v) => v.endsWith("/"),
    },
];

/** The string leaves of a zod schema: strings, enums and literals, with their path. */
function stringKeysOf(schema: z.ZodType): string[] {
    const out: string[] = [];
    const walk = (s: z.ZodType, at: string) => {
        const def = (s as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
        switch (def.type) {
            case "object":
                for (const [k, v] of Object.entries(def.shape as Record<string, z.ZodType>)) walk(v, at ? `${at}.${k}` : k);
                break;
            case "array":
                walk(def.element as z.ZodType, `${at}[]`);
                break;
            case "record":
                walk(def.keyType as z.ZodType, `${at}{key}`);
                walk(def.valueType as z.ZodType, `${at}{}`);
                break;
            case "optional":
            case "default":
            case "prefault":
            case "nullable":
            case "readonly":
            case "catch":
                walk(def.innerType as z.ZodType, at);
                break;
            case "pipe":
                walk(def.in as z.ZodType, at);
                break;
            case "union": {
                const discriminator = def.discriminator as string | undefined;
                for (const option of def.options as z.ZodType[]) {
                    const shape = (option as unknown as { _zod: { def: { shape?: Record<string, { _zod: { def: { values?: unknown[] } } }> } } })._zod.def
                        .shape;
                    const tag = discriminator && shape ? String(shape[discriminator]._zod.def.values?.[0]) : undefined;
                    walk(option, tag ? `${at}<${tag}>` : at);
                }
                break;
            }
            case "string":
            case "enum":
            case "literal":
                out.push(at);
                break;
            default:
                break;
        }
    };
    walk(schema, "");
    return [...new Set(out)].sort();
}

// ---------------------------------------------------------------------------------------------
// Sentinels, templates, derived values
// ---------------------------------------------------------------------------------------------

/** The lane of `key` in `variant`, if the key is driven there. */
function laneOf(key: Key, variant: VariantName): Lane | undefined {
    return key.lanes.find((l) => l.variant === variant);
}

function place(values: Values, key: Key, lane: Lane, value: string): Values {
    const wrapped = key.wrap ? key.wrap(value) : value;
    const at = lane.at;
    if (at[at.length - 1] !== "{key}") return setAt(values, at, wrapped);
    // A record's key: the value takes the sentinel's place, at its position (model.env renders in the config's order).
    const record = (at.slice(0, -1).reduce<unknown>((node, step) => (node as Record<string | number, unknown>)?.[step], values) ?? {}) as Record<
        string,
        unknown
    >;
    const entries = Object.entries(structuredClone(record)).filter(([k]) => k !== value);
    const slot = entries.findIndex(([k]) => k === lane.sentinel);
    if (slot >= 0) entries.splice(slot, 1, [value, wrapped]);
    else entries.push([value, wrapped]);
    return setAt(values, at.slice(0, -1), Object.fromEntries(entries));
}

/** The concrete path an issue about this value names (`nodes[1].runtime.path`, `nccl.overrides["NCCL X"]`). */
function concretePath(lane: Lane, value: string): string {
    const at = lane.at[lane.at.length - 1] === "{key}" ? [...lane.at.slice(0, -1), value] : lane.at;
    return formatPath(at);
}

/** A variant with every sentinel of its lanes in place: what each job of the variant differs from. */
function templateValues(variant: VariantName): Values {
    let values = variantBase(variant);
    for (const key of KEYS) {
        const lane = laneOf(key, variant);
        if (lane?.sentinel !== undefined) values = place(values, key, lane, lane.sentinel);
    }
    return values;
}

// ---------------------------------------------------------------------------------------------
// The property run
// ---------------------------------------------------------------------------------------------

interface Tried {
    value: string;
    lane: Lane;
    accepted: boolean;
    /** Why it was refused (the config's message). */
    refusal?: string;
    problems: string[];
    /** Problems a known issue explains. */
    known: string[];
}

interface KeyResult {
    tried: Tried[];
    sinks: Set<string>;
    problems: string[];
}

interface RunResult {
    keys: Map<string, KeyResult>;
    templateProblems: string[];
    globalProblems: string[];
    renders: number;
    seconds: number;
}

function tryParse(values: Values): { config: Config } | { error: string } {
    try {
        return { config: parseConfig({ values, secretKeys: new Set(secretKeysOf(values)) }) };
    } catch (err) {
        return { error: err instanceof ConfigError ? err.message : `not a ConfigError: ${(err as Error).stack ?? String(err)}` };
    }
}

/**
 * The generated values of `key`: printable (2 in 10), dangerous (2), Unicode (1), a mutated
 * example (3, or 5 without a generator of its own) and the key's own shape (2).
 */
function valueArbitrary(key: Key, examples: readonly string[]): fc.Arbitrary<string> {
    const own = key.generate?.();
    return fc.oneof(
        { arbitrary: printable(), weight: 2 },
        { arbitrary: dangerous, weight: 2 },
        { arbitrary: unicode, weight: 1 },
        { arbitrary: mutate(examples), weight: own ? 3 : 5 },
        ...(own ? [{ arbitrary: own, weight: 2 }] : []),
    );
}

/** The seed of one key's values: the run's seed and the key's path, so a key's values do not depend on the other keys. */
function keySeed(key: Key): number {
    let hash = SEED;
    for (const c of key.path) hash = Math.imul(hash ^ c.charCodeAt(0), 0x01000193);
    return hash | 0;
}

/** The values tried for one key: generated (fast-check, seeded), plus every example and (secrets) every printable character. */
function valuesFor(key: Key): string[] {
    const values = new Set<string>(key.examples);
    const lane = key.lanes.find((l) => l.sentinel !== undefined);
    if (key.mustAccept) {
        // Every printable character, in values long enough to be accepted.
        const chars = PRINTABLE.join("");
        for (let i = 0; i < chars.length; i += 12) values.add(`p${chars.slice(i, i + 12)}0123456789abcdef0123456789abcdefq`);
    }
    const arbitrary = valueArbitrary(key, key.examples.length > 0 ? key.examples : [lane?.sentinel ?? "x"]);
    // Drawn until PER_KEY distinct values: a round that repeats itself moves on to the next seed.
    for (let round = 0; values.size < PER_KEY; round++) {
        for (const value of fc.sample(arbitrary, { seed: keySeed(key) + round, numRuns: PER_KEY })) {
            if (values.size >= PER_KEY) break;
            values.add(value);
        }
    }
    return [...values];
}

interface Template {
    values: Values;
    config: Config;
    view: JobView;
    /** The template's own render: a secret that its text already holds (a word of a script) is not a leak. */
    rendered: RenderResult;
    /** Which sentinels and derived values each object of the view holds. */
    contains: WeakMap<object, Set<string>>;
}

function sentinelsOf(variant: VariantName): string[] {
    return KEYS.flatMap((k) => k.lanes.filter((l) => l.variant === variant && l.sentinel !== undefined).map((l) => l.sentinel as string));
}

async function propertyRun(): Promise<RunResult> {
    const started = Date.now();
    const readers = new Readers();
    const pool = new RenderPool();
    pool.start(2);
    await readers.docker.start();
    try {
        VLLM_OPTIONS = (await pythonBatch([{ kind: "flags" }], vllmStandInDir(ROOT)))[0].options as string[];
        const keys = new Map<string, KeyResult>(KEYS.map((k) => [k.path, { tried: [], sinks: new Set<string>(), problems: [] }]));
        const templateProblems: string[] = [];

        // Templates: every variant with every sentinel.
        const variants: VariantName[] = ["mp", "ray", "local"];
        const templates = new Map<VariantName, Template>();
        for (const variant of variants) {
            const values = templateValues(variant);
            const parsed = tryParse(values);
            if ("error" in parsed) {
                templateProblems.push(`the ${variant} template is refused: ${parsed.error}`);
                continue;
            }
            const rendered = await pool.render(values, secretKeysOf(values));
            const view = await readJob(rendered, parsed.config, readers);
            templateProblems.push(...view.problems.map((p) => `${variant} template: ${p}`));
            templates.set(variant, {
                values,
                config: parsed.config,
                view,
                rendered,
                contains: containment(view.view, [...sentinelsOf(variant), ...derivedFrom(parsed.config)]),
            });
            for (const key of KEYS) {
                const lane = laneOf(key, variant);
                if (lane?.sentinel) for (const s of sinksHolding(view.view, lane.sentinel)) keys.get(key.path)?.sinks.add(s);
            }
        }

        // Values: accepted or refused, lane by lane.
        interface Planned {
            key: Key;
            tried: Tried;
        }
        const queues = new Map<VariantName, Planned[][]>(variants.map((v) => [v, []]));
        const solo: { variant: VariantName; planned: Planned; exact: boolean }[] = [];
        for (const key of KEYS) {
            const result = keys.get(key.path) as KeyResult;
            if (key.lanes.length === 0) continue;
            const perLane = new Map<Lane, Planned[]>();
            for (const [n, value] of valuesFor(key).entries()) {
                const candidates = key.route ? key.lanes.filter((l) => key.route?.(value).includes(l.variant)) : key.lanes;
                const lane = candidates[n % candidates.length] ?? key.lanes[0];
                const template = templates.get(lane.variant);
                if (!template) continue;
                const parsed = tryParse(place(template.values, key, lane, value));
                const tried: Tried = {
                    value,
                    lane,
                    accepted: !("error" in parsed),
                    refusal: "error" in parsed ? parsed.error : undefined,
                    problems: [],
                    known: [],
                };
                result.tried.push(tried);
                if ("error" in parsed) continue;
                const exact = lane.sentinel === undefined || key.exact?.(value) === true;
                // A value of a known issue goes alone too (its problems would split every job it joins).
                if (exact || knownIssue(key, value)) solo.push({ variant: lane.variant, planned: { key, tried }, exact });
                else perLane.set(lane, [...(perLane.get(lane) ?? []), { key, tried }]);
            }
            for (const [lane, planned] of perLane) {
                const rows = queues.get(lane.variant) as Planned[][];
                planned.forEach((p, i) => (rows[i] ??= []).push(p));
            }
        }

        // Jobs: one value of each key at a time, together; alone where they do not go together.
        const jobs: { variant: VariantName; planned: Planned[]; exact: boolean }[] = [];
        for (const [variant, rows] of queues) {
            const template = templates.get(variant);
            if (!template) continue;
            for (const row of rows) {
                let values = template.values;
                for (const p of row) values = place(values, p.key, laneOf(p.key, variant) as Lane, p.tried.value);
                if ("error" in tryParse(values)) for (const p of row) jobs.push({ variant, planned: [p], exact: false });
                else jobs.push({ variant, planned: row, exact: false });
            }
        }
        for (const s of solo) jobs.push({ variant: s.variant, planned: [s.planned], exact: s.exact });

        // Every job is rendered (two workers), then all are read back together (each reader runs
        // once per layer for all of them). A job with a problem is split in halves, level by level,
        // until each problem has its value; one that only a whole job shows goes to all its values.
        interface Node {
            variant: VariantName;
            planned: Planned[];
            exact: boolean;
            first: boolean;
            shared?: string[];
            children?: Node[];
        }
        const checkLevel = async (level: Node[]) => {
            const prepared = level.map((job) => {
                const template = templates.get(job.variant) as Template;
                let values = template.values;
                for (const p of job.planned) values = place(values, p.key, laneOf(p.key, job.variant) as Lane, p.tried.value);
                return { job, template, values, parsed: tryParse(values) };
            });
            const results = await timed("render", () =>
                Promise.all(prepared.map((p) => ("config" in p.parsed ? pool.render(p.values, secretKeysOf(p.values)) : undefined))),
            );
            await timed("read", () =>
                Promise.all(
                    prepared.map(async ({ job, template, parsed }, i) => {
                        const result = results[i];
                        if ("error" in parsed || !result) {
                            job.shared = [`accepted alone, refused together with other values: ${"error" in parsed ? parsed.error : ""}`];
                            return;
                        }
                        // An exact job reads everything itself (its checks look at every file).
                        const read = await readJob(result, parsed.config, readers, job.exact ? undefined : template.view);
                        const shared = [...read.problems];
                        if (!job.exact) {
                            const pairs: [string, string][] = job.planned.map((p) => [(laneOf(p.key, job.variant) as Lane).sentinel as string, p.tried.value]);
                            pairs.push(...derivedPairs(template.config, parsed.config));
                            const expected = substitute(template.view.view, pairs, template.contains);
                            shared.push(...differences(expected, read.view).map((d) => `not as the template says: ${d}`));
                        }
                        job.shared = shared;
                        if (job.exact)
                            for (const p of job.planned)
                                for (const where of sinksNew(template.view.view, read.view, p.tried.value)) keys.get(p.key.path)?.sinks.add(where);
                        if (job.first) {
                            for (const p of job.planned) {
                                p.tried.problems.push(
                                    ...(p.key.exactChecks?.(p.tried.value, read, parsed.config) ?? []),
                                    // (not when another value of the same render holds it: its text is not the secret's)
                                    ...(p.key.secret && !job.planned.some((q) => q !== p && q.tried.value.includes(p.tried.value))
                                        ? secretsInPlaintext(p.tried.value, result, template.rendered)
                                        : []),
                                );
                            }
                        }
                    }),
                ),
            );
        };
        let level: Node[] = jobs.map((job) => ({ ...job, first: true }));
        const split: Node[] = [];
        while (level.length > 0) {
            await checkLevel(level);
            const next: Node[] = [];
            for (const job of level) {
                if (!job.shared?.length) continue;
                if (job.planned.length === 1) {
                    job.planned[0].tried.problems.push(...job.shared);
                    continue;
                }
                const half = Math.ceil(job.planned.length / 2);
                job.children = [job.planned.slice(0, half), job.planned.slice(half)].map((planned) => ({
                    ...job,
                    planned,
                    first: false,
                    shared: undefined,
                    children: undefined,
                }));
                next.push(...job.children);
                split.push(job);
            }
            level = next;
        }
        const found = (job: Node): boolean => (job.children ? job.children.some(found) : (job.shared?.length ?? 0) > 0);
        for (const job of split) {
            if (job.children?.some(found)) continue;
            const together = ` (only in one render with ${job.planned.map((p) => `${p.key.path}=${JSON.stringify(p.tried.value)}`).join(", ")})`;
            for (const p of job.planned) p.tried.problems.push(...(job.shared ?? []).map((problem) => problem + together));
        }

        // Every check ran as nobody, in a directory of its own, with `touch` the only command: a
        // value whose quoting failed would have left the marker.
        const globalProblems: string[] = [];
        if (fs.readdirSync(MARKER_DIR).length > 0) globalProblems.push(`a value was executed: ${MARKER_DIR} holds ${fs.readdirSync(MARKER_DIR).join(", ")}`);
        if (process.env.SPARK_PROPERTY_PROFILE)
            for (const [what, { calls, ms }] of PROFILE) console.error(`profile ${what}: ${calls} calls, ${(ms / 1000).toFixed(1)} s`);

        for (const [path, result] of keys) {
            const key = KEYS.find((k) => k.path === path) as Key;
            for (const tried of result.tried) {
                if (!tried.accepted) {
                    const named = [concretePath(tried.lane, tried.value), ...(key.refusalAlso ?? [])];
                    const message = tried.refusal ?? "";
                    if (!named.some((n) => message.includes(`spark-cluster:${n}`)))
                        tried.problems.push(`refused without naming ${named.join(" or ")}: ${message}`);
                    else if (!message.includes("Example:")) tried.problems.push(`refused without an example: ${message}`);
                    // A value that is a word of the message's own text (e.g. "value") is not shown by the refusal.
                    const shown = message.replaceAll(/\b(value|values|secret|string|key|token)\b/gi, "");
                    if (key.secret && tried.value.length >= 4 && shown.includes(tried.value)) tried.problems.push("the refusal shows the secret");
                    if (key.mustAccept?.(tried.value)) tried.problems.push(`a secret of printable characters is refused: ${message}`);
                }
                const issue = knownIssue(key, tried.value);
                if (issue) {
                    tried.known = [...new Set(tried.problems.filter((p) => issue.problem.test(p)))];
                    tried.problems = tried.problems.filter((p) => !issue.problem.test(p));
                }
            }
        }
        return { keys, templateProblems, globalProblems, renders: jobs.length + templates.size, seconds: (Date.now() - started) / 1000 };
    } finally {
        pool.stop();
        await readers.docker.stop();
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

describe("every config value reaches its sinks intact, or is refused naming its key (issue 9)", { timeout: 600_000 }, () => {
    let result: RunResult | undefined;
    let failure: unknown;

    before(async () => {
        if (!systemdAvailable())
            throw new Error("systemd 252 (/usr/lib/systemd/systemd) and setpriv are needed: this test reads every unit with systemd itself");
        if (!FakeDockerDaemon.available()) throw new Error("the docker CLI is needed: this test reads every docker run line and --env-file with it");
        try {
            result = await propertyRun();
        } catch (err) {
            failure = err;
        }
    });
    after(() => fs.rmSync(MARKER_DIR, { recursive: true, force: true }));

    const run = (): RunResult => {
        if (failure) throw failure;
        assert.ok(result, "the property run did not finish");
        return result;
    };

    it(`seed ${SEED} (SPARK_PROPERTY_SEED=${SEED} reproduces it), ${PER_KEY} values per key`, (t) => {
        const r = run();
        t.diagnostic(`seed=${SEED} per_key=${PER_KEY} renders=${r.renders} seconds=${r.seconds.toFixed(1)}`);
    });

    it("drives every string key of the schema", () => {
        const inSchema = stringKeysOf(ClusterConfigSchema as unknown as z.ZodType);
        const driven = KEYS.map((k) => k.path);
        assert.deepEqual(
            inSchema.filter((k) => !driven.includes(k)),
            [],
            "string keys in the schema that this test does not drive: add them to KEYS",
        );
        assert.deepEqual(
            driven.filter((k) => !inSchema.includes(k)),
            [],
            "keys this test drives that the schema no longer has",
        );
    });

    it("the templates render and read back without a problem", () => {
        assert.deepEqual(run().templateProblems, []);
    });

    it("no value was executed (no marker file)", () => {
        assert.deepEqual(run().globalProblems, []);
    });

    for (const issue of KNOWN_ISSUES) {
        it(`known issue, key=${issue.key}: ${issue.fix}`, { todo: "a config refusal in a file this test does not own" }, (t) => {
            const tried = run().keys.get(issue.key)?.tried ?? [];
            const hit = tried.filter((x) => x.known.length > 0);
            t.diagnostic(
                `key=${issue.key} values=${hit.length} e.g. ${hit
                    .slice(0, 3)
                    .map((x) => `${JSON.stringify(x.value)}: ${x.known[0]?.slice(0, 240)}`)
                    .join(" | ")}`,
            );
            assert.equal(hit.length, 0, `${hit.length} values of ${issue.key} do not arrive intact`);
        });
    }

    for (const key of KEYS) {
        it(`key=${key.path}`, (t) => {
            const r = run().keys.get(key.path) as KeyResult;
            const accepted = r.tried.filter((x) => x.accepted).length;
            const sinks = [...new Set([...r.sinks, ...(key.checkedSinks ?? [])])].sort();
            t.diagnostic(`key=${key.path} tried=${r.tried.length} accepted=${accepted} refused=${r.tried.length - accepted} sinks=${sinks.join(",") || "-"}`);
            if (key.decides) t.diagnostic(`key=${key.path} is a choice: ${key.decides}`);
            if (key.noHostSink) assert.deepEqual([...r.sinks], [], `${key.path} reaches a host`);
            else if (!key.decides) assert.ok(accepted === 0 || sinks.length > 0, `${key.path}: accepted values landed nowhere this test reads`);
            const known = r.tried.filter((x) => x.known.length > 0).length;
            if (known > 0) t.diagnostic(`key=${key.path} known-issue values=${known} (see "known issues")`);
            const failed = r.tried.filter((x) => x.problems.length > 0);
            assert.ok(r.tried.length >= Math.min(PER_KEY, 20), `only ${r.tried.length} values tried`);
            assert.deepEqual(
                failed.slice(0, 5).map((x) => ({ value: x.value, problems: [...new Set(x.problems)].slice(0, 5) })),
                [],
                `${failed.length} of ${r.tried.length} values failed (SPARK_PROPERTY_SEED=${SEED} reproduces them)`,
            );
        });
    }
});

describe("the plaintext-secret check (secretsInPlaintext)", () => {
    const secret = (value: string) => ({ [SECRET_SIG_KEY]: SECRET_SIG, value });
    const render = (names: [string, string], create: string, stdin: unknown): RenderResult => ({
        id: 0,
        resources: names.map((name) => ({ type: "spark-remote:index:Step", name, inputs: { create, stdin } })),
        outputs: {},
        errors: [],
    });
    const baseline = render(["spark-a-check", "spark-b-check"], "echo missing-arguments", secret("SENTINEL"));

    it("finds the value outside a secret input", () => {
        const leaked = render(["spark-a-check", "spark-b-check"], "export T=hf_leaked_token", secret("hf_leaked_token"));
        assert.deepEqual(secretsInPlaintext("hf_leaked_token", leaked, baseline), [
            "the secret is in plaintext at spark-a-check.create",
            "the secret is in plaintext at spark-b-check.create",
        ]);
    });

    it("lets a word that our script holds in the template too, at the same place, even when the node is renamed", () => {
        const drawn = render(["lws-check", "spark-b-check"], "echo missing-arguments", secret("arguments"));
        assert.deepEqual(secretsInPlaintext("arguments", drawn, baseline), []);
    });

    it("still finds that word at a place where the template does not hold it", () => {
        const leaked = render(["spark-a-check", "spark-b-check"], "echo missing-arguments", { token: "arguments" });
        assert.deepEqual(secretsInPlaintext("arguments", leaked, baseline), [
            "the secret is in plaintext at spark-a-check.stdin.token",
            "the secret is in plaintext at spark-b-check.stdin.token",
        ]);
    });
});
