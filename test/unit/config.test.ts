/**
 * Table tests for config.ts: every bad config is one small edit of a good base config, and
 * asserts the exact key path, a distinctive part of the message, the rendered line, and that
 * no secret's plaintext shows up anywhere in the error.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { inspect } from "node:util";
import {
    ClusterConfigSchema,
    ConfigError,
    ConfigIssue,
    DEFAULT_VLLM_IMAGE,
    ParsedNode,
    SecretString,
    checkAddressesInSubnets,
    checkExactlyOneHead,
    checkInterfaceNames,
    checkNodeKinds,
    checkParallelismFitsGpus,
    checkPorts,
    checkSecretsAreSecret,
    checkSshKeySource,
    checkSshHostOutsideInterconnect,
    checkExecutorRules,
    checkLocalModelWithRay,
    checkMpLayout,
    checkTopology,
    exampleFor,
    checkTransport,
    checkTwinSubnets,
    checkUniqueAddresses,
    checkUniqueNodeNames,
    checkUniqueSshEndpoints,
    defaultServedName,
    extraArgProblem,
    ALLOWED_DOCKER_OPTIONS,
    REFUSED_DOCKER_OPTIONS,
    dockerOptionProblem,
    interconnectNameProblem,
    interfaceAddressProblem,
    ipv4RangeProblem,
    isHostOrIpv4,
    isLoopback,
    modelSourceProblem,
    parseConfig,
    renderIssue,
    resolveParallelism,
    resolveTransport,
    sshTarget,
} from "../../config";
import { IMAGE_REFERENCE } from "../../config/schemaFields";

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const API_KEY = "sk-SECRET-apikey-0123456789abcdef";
const SHORT_API_KEY = "tiny-SECRET";
const HF_TOKEN = "hf_SECRETtoken0123456789";
const SSH_KEY = [
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "SECRETMATERIALSECRETMATERIAL",
    "-----END OPENSSH PRIVATE KEY-----",
    "",
].join("\n");
const SECRET_KEY_PATH_VALUE = "/home/you/.ssh/SECRET_id_ed25519";
const SECRET_LOOKING_VALUE = "tok-SECRET-looking-value";
/** Plaintexts that must never appear in an error. */
const PLAINTEXTS = [API_KEY, SHORT_API_KEY, HF_TOKEN, "SECRETMATERIAL", SECRET_KEY_PATH_VALUE, SECRET_LOOKING_VALUE];

const ALL_SECRET_KEYS = ["apiKey", "sshPrivateKey", "hfToken"];

/** Two Sparks with both twins cabled: a good config. */
function base(): Record<string, unknown> {
    return {
        nodes: [
            {
                name: "spark-a",
                kind: "spark",
                head: true,
                ssh: { host: "10.0.0.11" },
                interconnect: [
                    { name: "enp1s0f1np1", address: "192.168.100.11/24" },
                    { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
                ],
            },
            {
                name: "spark-b",
                kind: "spark",
                ssh: { host: "10.0.0.12" },
                interconnect: [
                    { name: "enp1s0f1np1", address: "192.168.100.12/24" },
                    { name: "enP2p1s0f1np1", address: "192.168.101.12/24" },
                ],
            },
        ],
        model: { source: "Qwen/Qwen2.5-7B-Instruct" },
        apiKey: API_KEY,
        sshPrivateKey: SSH_KEY,
    };
}

/** The first node of the base config, alone. */
function firstNode(): unknown {
    const nodes = base().nodes;
    assert.ok(Array.isArray(nodes));
    return nodes[0];
}

const REMOVE = Symbol("remove");
type Edit = readonly [path: string, value: unknown];

function segments(path: string): (string | number)[] {
    return path
        .replace(/\[(\d+)\]/g, ".$1")
        .split(".")
        .filter((s) => s !== "")
        .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function isObject(value: unknown): value is Record<string | number, unknown> {
    return typeof value === "object" && value !== null;
}

/** Applies edits like `["nodes[1].ssh.port", "22"]`; REMOVE deletes the key. */
function edited(edits: readonly Edit[]): Record<string, unknown> {
    const values = base();
    for (const [path, value] of edits) {
        const keys = segments(path);
        let parent: unknown = values;
        for (const key of keys.slice(0, -1)) {
            assert.ok(isObject(parent), `fixture path ${path} does not exist`);
            parent = parent[key];
        }
        assert.ok(isObject(parent), `fixture path ${path} does not exist`);
        const last = keys[keys.length - 1];
        if (value === REMOVE) {
            delete parent[last];
        } else {
            parent[last] = structuredClone(value);
        }
    }
    return values;
}

function parse(values: Record<string, unknown>, secretKeys: readonly string[] = ALL_SECRET_KEYS) {
    return parseConfig({ values, secretKeys: new Set(secretKeys) });
}

function parseError(values: Record<string, unknown>, secretKeys: readonly string[] = ALL_SECRET_KEYS): ConfigError {
    try {
        parse(values, secretKeys);
    } catch (err) {
        assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
        return err;
    }
    assert.fail("expected parseConfig to throw a ConfigError");
}

function assertNoPlaintext(err: ConfigError): void {
    const everything = `${err.message}\n${JSON.stringify(err.issues)}\n${inspect(err)}`;
    for (const plaintext of PLAINTEXTS) {
        assert.ok(!everything.includes(plaintext), `a secret's plaintext leaked into the error:\n${err.message}`);
    }
}

/** Node 1 becomes a Thor (venv runtime, one interface); node 0 keeps one interface. */
const THOR_B: readonly Edit[] = [
    ["nodes[0].interconnect", [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }]],
    [
        "nodes[1]",
        {
            name: "thor-b",
            kind: "thor",
            ssh: { host: "10.0.0.12" },
            runtime: { kind: "venv", path: "/opt/vllm-venv" },
            interconnect: [{ name: "mgbe0_0", address: "192.168.100.12/24" }],
        },
    ],
];

const THIRD_NODE = {
    name: "ws-c",
    kind: "workstation",
    ssh: { host: "10.0.0.13" },
    interconnect: [{ address: "192.168.100.13/24" }],
};

// ---------------------------------------------------------------------------------------------
// The table of bad configs
// ---------------------------------------------------------------------------------------------

interface BadCase {
    name: string;
    edits: readonly Edit[];
    /** Keys held as secrets; defaults to apiKey, sshPrivateKey, hfToken. */
    secretKeys?: readonly string[];
    /** The exact path of the issue this case is about. */
    path: string;
    /** A distinctive part of its message. */
    message: string;
    /** The exact `got` text, where it matters. */
    got?: string;
    /** A part of its example, where it matters. */
    example?: string;
    /** How many issues the config has in all. Defaults to 1. */
    count?: number;
}

const BAD_CONFIGS: readonly BadCase[] = [
    // unknown keys
    {
        name: "unknown top-level key",
        edits: [["modelSource", "x"]],
        path: "modelSource",
        message: "is not a known key",
        example: "the keys here are nodes, interconnect",
    },
    {
        name: "misspelled top-level key is suggested",
        edits: [
            ["modle", { source: "Qwen/Qwen2.5-7B-Instruct" }],
            ["model", REMOVE],
        ],
        path: "modle",
        message: 'did you mean "model"?',
        count: 2,
    },
    {
        name: "unknown nested key with a suggestion",
        edits: [["nodes[1].ssh.prot", 2222]],
        path: "nodes[1].ssh.prot",
        message: 'did you mean "port"?',
        example: "port: 22",
    },
    {
        name: "unknown key in a docker runtime",
        edits: [["nodes[0].runtime", { kind: "docker", shm: "16g" }]],
        path: "nodes[0].runtime.shm",
        message: "is not a known key",
        example: "shmSize",
    },
    { name: "unknown key in model", edits: [["model.tp", 2]], path: "model.tp", message: "is not a known key" },
    {
        name: "docker options on a venv runtime",
        edits: [["nodes[0].runtime", { kind: "venv", path: "/opt/vllm-venv", extraOptions: ["--ulimit=nofile=65536"] }]],
        path: "nodes[0].runtime.extraOptions",
        message: "is a key of the docker runtime only; this one is venv",
        example: "use kind: docker",
    },
    {
        name: "a docker option off the allow-list",
        edits: [["nodes[1].runtime", { kind: "docker", extraOptions: ["--ulimit=nofile=65536", "--entrypoint=/bin/sh"] }]],
        path: "nodes[1].runtime.extraOptions[1]",
        message: "sets --entrypoint, which would replace the program the unit runs",
        got: '"--entrypoint=/bin/sh"',
    },
    {
        name: "-v in docker options points at the --mount it means",
        edits: [["nodes[0].runtime", { kind: "docker", extraOptions: ["-v /data/models:/models:ro"] }]],
        path: "nodes[0].runtime.extraOptions[0]",
        message: "is -v (creates a missing host directory, which destroy would leave behind",
        example: "--mount=type=bind,source=/data/models,target=/models,readonly",
    },
    {
        name: "a docker option the project renders from its own key",
        edits: [["nodes[0].runtime", { kind: "docker", extraOptions: ["--shm-size=64g"] }]],
        path: "nodes[0].runtime.extraOptions[0]",
        message: "sets --shm-size, which is rendered from runtime.shmSize; set that instead",
        example: "shmSize: 32g",
    },
    {
        name: "the same container path mounted twice",
        edits: [
            [
                "nodes[0].runtime",
                { kind: "docker", extraOptions: ["--mount=type=bind,source=/data/a,target=/t", "--mount=type=bind,source=/data/b,target=/t,readonly"] },
            ],
        ],
        path: "nodes[0].runtime.extraOptions[1]",
        message: "mounts /t again; docker refuses a container path mounted twice",
    },
    {
        name: "a docker mount over the local model's directory",
        edits: [
            ["model.source", "/models/qwen"],
            ["model.servedName", "qwen"],
            ["nodes[0].runtime", { kind: "docker", extraOptions: ["--mount=type=bind,source=/data,target=/models"] }],
        ],
        path: "nodes[0].runtime.extraOptions[0]",
        message: "mounts /models, which clashes with the local model /models/qwen",
    },
    {
        name: "check.requireTransport that is not a transport",
        edits: [["check", { requireTransport: "NET IB; rm -rf /" }]],
        path: "check.requireTransport",
        message: "must be a transport like NET/IB",
        example: "NET/IB",
    },
    {
        name: "unknown secret-looking key hides its value",
        edits: [["model.apiToken", SECRET_LOOKING_VALUE]],
        path: "model.apiToken",
        message: "is not a known key",
        got: `a value of ${SECRET_LOOKING_VALUE.length} characters`,
    },
    // wrong types
    { name: "string for a number", edits: [["nodes[1].ssh.port", "22"]], path: "nodes[1].ssh.port", message: "must be a number", got: '"22"', example: "22" },
    { name: "number for a string", edits: [["nodes[0].name", 7]], path: "nodes[0].name", message: "must be a string", got: "7" },
    { name: "string for a boolean", edits: [["nodes[0].head", "yes"]], path: "nodes[0].head", message: "must be true or false" },
    { name: "fraction for a whole number", edits: [["nodes[0].gpus", 1.5]], path: "nodes[0].gpus", message: "must be a whole number" },
    { name: "string for a mapping", edits: [["interconnect", "switch"]], path: "interconnect", message: "must be a mapping" },
    { name: "string for a list", edits: [["nodes", "spark-a,spark-b"]], path: "nodes", message: "must be a list" },
    // missing required keys
    { name: "missing model.source", edits: [["model.source", REMOVE]], path: "model.source", message: "is required", got: "nothing" },
    { name: "missing model", edits: [["model", REMOVE]], path: "model", message: "is required", example: "source: Qwen/" },
    { name: "missing ssh host", edits: [["nodes[0].ssh.host", REMOVE]], path: "nodes[0].ssh.host", message: "is required", example: "10.0.0.11" },
    { name: "missing interconnect of a node", edits: [["nodes[1].interconnect", REMOVE]], path: "nodes[1].interconnect", message: "is required" },
    // secrets
    {
        name: "missing apiKey",
        edits: [["apiKey", REMOVE]],
        path: "apiKey",
        message: "is required",
        example: "pulumi config set --secret spark-cluster:apiKey",
    },
    {
        name: "apiKey set in plaintext",
        edits: [],
        secretKeys: ["sshPrivateKey"],
        path: "apiKey",
        message: "was set without --secret",
        got: `a value of ${API_KEY.length} characters`,
        example: "pulumi config set --secret spark-cluster:apiKey",
    },
    { name: "sshPrivateKey set in plaintext", edits: [], secretKeys: ["apiKey"], path: "sshPrivateKey", message: "was set without --secret" },
    {
        name: "hfToken set in plaintext",
        edits: [["hfToken", HF_TOKEN]],
        secretKeys: ["apiKey", "sshPrivateKey"],
        path: "hfToken",
        message: "was set without --secret",
        got: `a value of ${HF_TOKEN.length} characters`,
    },
    {
        name: "apiKey too short",
        edits: [["apiKey", SHORT_API_KEY]],
        path: "apiKey",
        message: "must be at least 16 characters long",
        got: `a value of ${SHORT_API_KEY.length} characters`,
    },
    { name: "apiKey of the wrong type", edits: [["apiKey", 12345678901234567890]], path: "apiKey", message: "must be a string", got: "a number" },
    { name: "apiKey ending in a space (HTTP drops it)", edits: [["apiKey", `${API_KEY} `]], path: "apiKey", message: "or a space at either end" },
    { name: "apiKey with a line break", edits: [["apiKey", `${API_KEY}\nX=1`]], path: "apiKey", message: "without control characters" },
    { name: "hfToken starting with a space", edits: [["hfToken", ` ${HF_TOKEN}`]], path: "hfToken", message: "or a space at either end" },
    { name: "apiKey outside ASCII (an HTTP header carries it)", edits: [["apiKey", `${API_KEY}é`]], path: "apiKey", message: "must be printable ASCII" },
    {
        name: "rayAuthToken with a line break",
        edits: [["rayAuthToken", `${"a".repeat(40)}\nX=1`]],
        secretKeys: [...ALL_SECRET_KEYS, "rayAuthToken"],
        path: "rayAuthToken",
        message: "must be 32-256 letters, digits, _ or -",
    },
    {
        name: "a venv path with $",
        edits: [["nodes[1].runtime", { kind: "venv", path: "/opt/$HOME/venv" }]],
        path: "nodes[1].runtime.path",
        message: "without spaces, quotes, $",
    },
    {
        name: "an NCCL override longer than NCCL reads",
        edits: [["nccl", { overrides: { NCCL_IB_MERGE_NICS: "1".repeat(1024) } }]],
        path: "nccl.overrides.NCCL_IB_MERGE_NICS",
        message: "at most 1023 bytes",
    },
    {
        name: "no SSH key at all",
        edits: [["sshPrivateKey", REMOVE]],
        path: "sshPrivateKey",
        message: "set exactly one of spark-cluster:sshPrivateKey (the key text, as a secret) or spark-cluster:sshPrivateKeyPath",
        example: 'pulumi config set --secret spark-cluster:sshPrivateKey "$(cat ~/.ssh/id_ed25519)"',
    },
    {
        name: "both SSH key sources",
        edits: [["sshPrivateKeyPath", "/home/you/.ssh/id_ed25519"]],
        path: "sshPrivateKeyPath",
        message: "and spark-cluster:sshPrivateKey are both set",
    },
    {
        name: "sshPrivateKey holding a path instead of the key",
        edits: [["sshPrivateKey", SECRET_KEY_PATH_VALUE]],
        path: "sshPrivateKey",
        message: "must be the text of a private key",
        got: `a value of ${SECRET_KEY_PATH_VALUE.length} characters`,
    },
    {
        name: "sshPrivateKeyPath with a tilde",
        edits: [
            ["sshPrivateKey", REMOVE],
            ["sshPrivateKeyPath", "~/.ssh/id_ed25519"],
        ],
        path: "sshPrivateKeyPath",
        message: "is not expanded",
    },
    {
        name: "key text pasted into sshPrivateKeyPath is not shown",
        edits: [
            ["sshPrivateKey", REMOVE],
            ["sshPrivateKeyPath", SSH_KEY],
        ],
        path: "sshPrivateKeyPath",
        message: "holds key text, not a path",
        got: `a value of ${SSH_KEY.length} characters`,
    },
    {
        name: "node privateKeyPath with a tilde",
        edits: [["nodes[1].ssh.privateKeyPath", "~/.ssh/b"]],
        path: "nodes[1].ssh.privateKeyPath",
        message: "is not expanded",
    },
    // node fields
    { name: "node name not a DNS label", edits: [["nodes[0].name", "Spark_A"]], path: "nodes[0].name", message: "must be a DNS label", got: '"Spark_A"' },
    { name: "unknown node kind", edits: [["nodes[1].kind", "jetson"]], path: "nodes[1].kind", message: "must be one of spark, thor, workstation" },
    {
        name: "unknown runtime kind",
        edits: [["nodes[0].runtime", { kind: "podman" }]],
        path: "nodes[0].runtime.kind",
        message: "must be one of docker, venv",
        got: '"podman"',
    },
    {
        name: "relative venv path",
        edits: [["nodes[0].runtime", { kind: "venv", path: "opt/venv" }]],
        path: "nodes[0].runtime.path",
        message: "must be an absolute path",
    },
    {
        name: "bad shm size",
        edits: [["nodes[0].runtime", { kind: "docker", shmSize: "16 GB" }]],
        path: "nodes[0].runtime.shmSize",
        message: "must be a size like 16g",
    },
    {
        name: "user@ in ssh host",
        edits: [["nodes[0].ssh.host", "root@10.0.0.11"]],
        path: "nodes[0].ssh.host",
        message: "must be an IPv4 address or a hostname",
    },
    {
        name: "octet out of range in ssh host",
        edits: [["nodes[1].ssh.host", "10.0.0.256"]],
        path: "nodes[1].ssh.host",
        message: "must be an IPv4 address or a hostname",
    },
    { name: "ssh port out of range", edits: [["nodes[1].ssh.port", 70000]], path: "nodes[1].ssh.port", message: "must be at most 65535" },
    { name: "a single node", edits: [["nodes", [firstNode()]]], path: "nodes", message: "must list at least 2 items" },
    { name: "zero GPUs", edits: [["nodes[0].gpus", 0]], path: "nodes[0].gpus", message: "must be at least 1" },
    {
        name: "three interfaces on one node",
        edits: [["nodes[0].interconnect[2]", { address: "192.168.102.11/24" }]],
        path: "nodes[0].interconnect",
        message: "must list at most 2 items",
    },
    {
        name: "interface name too long",
        edits: [["nodes[0].interconnect[0].name", "enp1s0f1np1-too-long"]],
        path: "nodes[0].interconnect[0].name",
        message: "must be a Linux interface name",
    },
    {
        name: "loopback as an interconnect interface",
        edits: [["nodes[0].interconnect[0].name", "lo"]],
        path: "nodes[0].interconnect[0].name",
        message: "names the loopback interface, which cannot be an interconnect port; give the NIC's port (`ibdev2netdev` lists them",
        got: '"lo"',
    },
    {
        name: "docker0 as an interconnect interface",
        edits: [["nodes[1].interconnect[1].name", "docker0"]],
        path: "nodes[1].interconnect[1].name",
        message: "names a Docker bridge",
    },
    {
        name: "ssh.host inside the node's own interconnect subnet",
        edits: [["nodes[0].ssh.host", "192.168.101.50"]],
        path: "nodes[0].ssh.host",
        message: "lies inside 192.168.101.0/24, the subnet of this node's interconnect[1] (192.168.101.11/24): netplan would route it over the interconnect",
        example: "10.0.0.11",
    },
    {
        name: "address without prefix",
        edits: [["nodes[0].interconnect[0].address", "192.168.100.11"]],
        path: "nodes[0].interconnect[0].address",
        message: "with its prefix length",
    },
    {
        name: "network address",
        edits: [["nodes[1].interconnect[0].address", "192.168.100.0/24"]],
        path: "nodes[1].interconnect[0].address",
        message: "is the network address of 192.168.100.0/24",
    },
    {
        name: "broadcast address",
        edits: [["nodes[1].interconnect[1].address", "192.168.101.255/24"]],
        path: "nodes[1].interconnect[1].address",
        message: "is the broadcast address of 192.168.101.0/24",
    },
    {
        name: "a /32",
        edits: [["nodes[1].interconnect[0].address", "192.168.100.12/32"]],
        path: "nodes[1].interconnect[0].address",
        message: "no room for a peer",
    },
    { name: "loopback address", edits: [["nodes[1].interconnect[0].address", "127.0.0.2/8"]], path: "nodes[1].interconnect[0].address", message: "loopback" },
    // cluster-wide fields
    { name: "MTU too large", edits: [["interconnect", { mtu: 9500 }]], path: "interconnect.mtu", message: "must be at most 9216", got: "9500" },
    { name: "MTU too small", edits: [["interconnect", { mtu: 1000 }]], path: "interconnect.mtu", message: "must be at least 1280" },
    {
        name: "unknown topology",
        edits: [["interconnect", { topology: "star" }]],
        path: "interconnect.topology",
        message: "must be one of pair, switch, mesh, ring",
    },
    { name: "PFC priority out of range", edits: [["roce", { priority: 8 }]], path: "roce.priority", message: "must be at most 7" },
    { name: "unknown NCCL debug level", edits: [["nccl", { debug: "VERBOSE" }]], path: "nccl.debug", message: "must be one of WARN, INFO, TRACE" },
    {
        name: "pinned GID index",
        edits: [["nccl", { overrides: { NCCL_IB_GID_INDEX: "3" } }]],
        path: "nccl.overrides.NCCL_IB_GID_INDEX",
        message: "the RoCE GID index moves at run time",
        got: '"NCCL_IB_GID_INDEX"',
    },
    {
        name: "override key not an NCCL variable",
        edits: [["nccl", { overrides: { nccl_debug: "INFO" } }]],
        path: "nccl.overrides.nccl_debug",
        message: "is not an NCCL variable",
    },
    {
        name: "override that has its own key",
        edits: [["nccl", { overrides: { NCCL_SOCKET_IFNAME: "eth0" } }]],
        path: "nccl.overrides.NCCL_SOCKET_IFNAME",
        message: "is rendered from nccl.socketIfname",
    },
    {
        name: "override value not a string",
        edits: [["nccl", { overrides: { NCCL_IB_MERGE_NICS: 1 } }]],
        path: "nccl.overrides.NCCL_IB_MERGE_NICS",
        message: "must be a string",
        example: 'NCCL_IB_MERGE_NICS: "1"',
    },
    { name: "unknown transport", edits: [["nccl", { transport: "ib" }]], path: "nccl.transport", message: "must be one of auto, roce, socket" },
    // model fields
    {
        name: "model.env with a name that is not a variable name",
        edits: [["model.env", { "VLLM-X": "1" }]],
        path: 'model.env["VLLM-X"]',
        message: "is not an environment variable name",
        example: "VLLM_USE_FLASHINFER_MOE_FP4",
    },
    {
        name: "model.env setting a variable of the runtime env file",
        edits: [["model.env", { VLLM_HOST_IP: "10.0.0.1" }]],
        path: "model.env.VLLM_HOST_IP",
        message: "is set by the project itself (/etc/spark-cluster/runtime.env); remove it",
    },
    {
        name: "model.env setting an NCCL variable with its own key",
        edits: [["model.env", { NCCL_DEBUG: "INFO" }]],
        path: "model.env.NCCL_DEBUG",
        message: "set nccl.debug instead",
        example: "nccl: { debug: INFO }",
    },
    {
        name: "model.env setting an NCCL variable the transport renders",
        edits: [["model.env", { NCCL_PROTO: "LL" }]],
        path: "model.env.NCCL_PROTO",
        message: "set nccl.overrides instead",
        example: "nccl: { overrides: { NCCL_PROTO:",
    },
    {
        name: "model.env setting the API key",
        edits: [["model.env", { VLLM_API_KEY: "x" }]],
        path: "model.env.VLLM_API_KEY",
        message: "is set by the project itself (/etc/spark-cluster/vllm.env)",
    },
    {
        name: "model.env setting Ray's token",
        edits: [["model.env", { RAY_AUTH_TOKEN: "x" }]],
        path: "model.env.RAY_AUTH_TOKEN",
        message: "is set by the project itself (/etc/spark-cluster/ray.env)",
    },
    {
        name: "model.env setting what the unit sets",
        edits: [["model.env", { HF_HUB_OFFLINE: "0" }]],
        path: "model.env.HF_HUB_OFFLINE",
        message: "is set by the project itself (the unit spark-cluster-vllm.service)",
    },
    {
        name: "model.env moving the HF cache",
        edits: [["model.env", { HF_HOME: "/data/hf" }]],
        path: "model.env.HF_HOME",
        message: "must not move the Hugging Face cache",
    },
    {
        name: "model.env value with a line break",
        edits: [["model.env", { VLLM_X: "a\nB=1" }]],
        path: "model.env.VLLM_X",
        message: "must be a single line without control characters",
    },
    {
        name: "model.env value with a lone surrogate",
        edits: [["model.env", { VLLM_X: "a\uD800" }]],
        path: "model.env.VLLM_X",
        message: "must be valid Unicode",
    },
    {
        name: "model.env value not a string",
        edits: [["model.env", { VLLM_X: 1 }]],
        path: "model.env.VLLM_X",
        message: "must be a string",
    },
    {
        name: "model.env and nccl.overrides setting the same variable",
        edits: [
            ["model.env", { NCCL_IB_MERGE_NICS: "0" }],
            ["nccl", { overrides: { NCCL_IB_MERGE_NICS: "1" } }],
        ],
        path: "model.env.NCCL_IB_MERGE_NICS",
        message: "is also set by nccl.overrides.NCCL_IB_MERGE_NICS",
    },
    { name: "readyTimeoutSeconds too short", edits: [["model.readyTimeoutSeconds", 30]], path: "model.readyTimeoutSeconds", message: "must be at least 60" },
    { name: "readyTimeoutSeconds too long", edits: [["model.readyTimeoutSeconds", 7201]], path: "model.readyTimeoutSeconds", message: "must be at most 7200" },
    {
        name: "readyTimeoutSeconds not whole",
        edits: [["model.readyTimeoutSeconds", 90.5]],
        path: "model.readyTimeoutSeconds",
        message: "must be a whole number",
    },
    {
        name: "extraArgs setting a rendered flag",
        edits: [["model.extraArgs", ["--tensor-parallel-size=2"]]],
        path: "model.extraArgs[0]",
        message: "use model.tensorParallel instead",
        example: "tensorParallel: 2",
    },
    {
        name: "extraArgs passing the API key",
        edits: [["model.extraArgs", ["--max-num-batched-tokens=8192", "--api-key=abc"]]],
        path: "model.extraArgs[1]",
        message: "use the apiKey secret instead",
        example: "pulumi config set --secret spark-cluster:apiKey",
    },
    {
        name: "extraArgs element without --",
        edits: [["model.extraArgs", ["max-num-batched-tokens=8192"]]],
        path: "model.extraArgs[0]",
        message: "must be one token starting with --",
    },
    {
        name: "extraArgs negated rendered flag",
        edits: [["model.extraArgs", ["--no-enforce-eager"]]],
        path: "model.extraArgs[0]",
        message: "use model.enforceEager instead",
    },
    {
        name: "extraArgs rendered flag with underscores",
        edits: [["model.extraArgs", ["--max_model_len=4096"]]],
        path: "model.extraArgs[0]",
        message: "use model.maxModelLen instead",
    },
    { name: "extraArgs as a string", edits: [["model.extraArgs", "--max-num-batched-tokens=8192"]], path: "model.extraArgs", message: "must be a list" },
    { name: "gpuMemoryUtilization zero", edits: [["model.gpuMemoryUtilization", 0]], path: "model.gpuMemoryUtilization", message: "must be greater than 0" },
    { name: "gpuMemoryUtilization above 1", edits: [["model.gpuMemoryUtilization", 1.5]], path: "model.gpuMemoryUtilization", message: "must be at most 1" },
    {
        name: "model source neither id nor path",
        edits: [["model.source", "qwen"]],
        path: "model.source",
        message: "Hugging Face model id (org/name) or an absolute path",
    },
    { name: "unknown executor", edits: [["model.executor", "torchrun"]], path: "model.executor", message: "must be one of ray, mp" },
    { name: "upper-case quantization", edits: [["model.quantization", "FP8"]], path: "model.quantization", message: "must be a vLLM quantization name" },
    { name: "zero tensor parallelism", edits: [["model.tensorParallel", 0]], path: "model.tensorParallel", message: "must be at least 1" },
    { name: "object store below 64 MiB", edits: [["ray", { objectStoreMemoryMb: 10 }]], path: "ray.objectStoreMemoryMb", message: "must be at least 64" },
    {
        name: "kvCacheMemoryBytes below 64 MiB",
        edits: [["model.kvCacheMemoryBytes", 1024]],
        path: "model.kvCacheMemoryBytes",
        message: "must be at least 67108864",
    },
    // cross-field rules
    {
        name: "kvCacheMemoryBytes together with gpuMemoryUtilization",
        edits: [
            ["model.kvCacheMemoryBytes", 32 * 2 ** 30],
            ["model.gpuMemoryUtilization", 0.85],
        ],
        path: "model.kvCacheMemoryBytes",
        message: "cannot be set together with model.gpuMemoryUtilization",
        example: "model: { kvCacheMemoryBytes: 34359738368 } (or model: { gpuMemoryUtilization: 0.85 })",
    },
    {
        name: "thor without a runtime",
        edits: [...THOR_B, ["nodes[1].runtime", REMOVE]],
        path: "nodes[1].runtime",
        message: "is required on a thor",
        example: "{ kind: venv, path: /opt/vllm-venv }",
    },
    {
        name: "thor with the docker runtime",
        edits: [...THOR_B, ["nodes[1].runtime", { kind: "docker" }]],
        path: "nodes[1].runtime.kind",
        message: "must be venv on a thor",
    },
    {
        name: "thor interface without a name",
        edits: [...THOR_B, ["nodes[1].interconnect", [{ address: "192.168.100.12/24" }]]],
        path: "nodes[1].interconnect[0].name",
        message: "is required on a thor",
        example: "name: mgbe0_0",
    },
    {
        name: "workstation with twin interfaces",
        edits: [["nodes[1].kind", "workstation"]],
        path: "nodes[1].interconnect",
        message: "only a spark has twin interfaces",
    },
    {
        name: "no head",
        edits: [["nodes[0].head", false]],
        path: "nodes",
        message: "has no head",
        example: "head: true on nodes[0] (spark-a)",
    },
    { name: "two heads", edits: [["nodes[1].head", true]], path: "nodes[1].head", message: "nodes[0] (spark-a) is already the head" },
    { name: "duplicate node names", edits: [["nodes[1].name", "spark-a"]], path: "nodes[1].name", message: "repeats the name of nodes[0]" },
    {
        name: "duplicate SSH endpoint",
        edits: [["nodes[1].ssh.host", "10.0.0.11"]],
        path: "nodes[1].ssh.host",
        message: "is also the SSH endpoint of nodes[0] (spark-a)",
    },
    {
        name: "duplicate interconnect address",
        edits: [["nodes[1].interconnect[0].address", "192.168.100.11/24"]],
        path: "nodes[1].interconnect[0].address",
        message: "which nodes[0].interconnect[0] (spark-a) already has",
    },
    {
        name: "address outside the link's subnet",
        edits: [["nodes[1].interconnect[0].address", "192.168.102.12/24"]],
        path: "nodes[1].interconnect[0].address",
        message: "is not inside 192.168.100.0/24, the subnet of nodes[0].interconnect[0] (spark-a)",
        example: "192.168.100.12/24",
    },
    {
        name: "prefix differs on one link",
        edits: [["nodes[1].interconnect[0].address", "192.168.100.12/25"]],
        path: "nodes[1].interconnect[0].address",
        message: "has prefix /25, but nodes[0].interconnect[0] (spark-a) uses /24",
    },
    {
        name: "twin without a peer",
        edits: [["nodes[1].interconnect", [{ name: "enp1s0f1np1", address: "192.168.100.12/24" }]]],
        path: "nodes[0].interconnect[1].address",
        message: "has no peer on this link",
    },
    {
        name: "twins sharing a subnet",
        edits: [
            ["nodes[0].interconnect[1].address", "192.168.100.21/24"],
            ["nodes[1].interconnect[1].address", "192.168.100.22/24"],
        ],
        path: "nodes[0].interconnect[1].address",
        message: "twin interfaces must never share a subnet",
        count: 2,
    },
    {
        name: "duplicate interface names on one node",
        edits: [["nodes[0].interconnect[1].name", "enp1s0f1np1"]],
        path: "nodes[0].interconnect[1].name",
        message: "names the same interface",
    },
    {
        name: "TP x PP above the GPUs",
        edits: [
            ["model.tensorParallel", 2],
            ["model.pipelineParallel", 2],
        ],
        path: "model.tensorParallel",
        message: "2 x 2 = 4 GPUs, but the cluster has 2 GPUs",
    },
    {
        name: "PP alone above the GPUs",
        edits: [["model.pipelineParallel", 3]],
        path: "model.pipelineParallel",
        message: "1 x 3 = 3 GPUs, but the cluster has 2 GPUs",
    },
    {
        name: "RoCE forced with a Thor",
        edits: [...THOR_B, ["nccl", { transport: "roce" }]],
        path: "nccl.transport",
        message: "Thor has no RoCE; NCCL fails with 'wrong type 3 != 4'",
    },
    { name: "API port on the Ray port", edits: [["model.apiPort", 6379]], path: "model.apiPort", message: "collides with ray.port", got: "6379" },
    {
        name: "dashboard on the SSH port",
        edits: [["ray", { dashboardPort: 22 }]],
        path: "ray.dashboardPort",
        message: "collides with nodes[0].ssh.port (spark-a)",
    },
    {
        name: "pair topology with three nodes",
        edits: [["nodes[2]", THIRD_NODE]],
        path: "interconnect.topology",
        message: "is pair (two nodes cabled back to back), but nodes lists 3",
        example: "switch",
    },
];

describe("parseConfig rejects bad configs with the exact path and an actionable message", () => {
    test("the table is big enough", () => {
        assert.ok(BAD_CONFIGS.length >= 30);
        assert.equal(new Set(BAD_CONFIGS.map((c) => c.name)).size, BAD_CONFIGS.length, "case names are unique");
    });

    for (const c of BAD_CONFIGS) {
        test(c.name, () => {
            const err = parseError(edited(c.edits), c.secretKeys);
            const issue = err.issues.find((i) => i.path === c.path && i.message.includes(c.message));
            assert.ok(issue, `no issue at ${c.path} saying "${c.message}"; the error was:\n${err.message}`);
            assert.equal(err.issues.length, c.count ?? 1, `unexpected issue count; the error was:\n${err.message}`);
            const line = renderIssue(issue);
            assert.ok(line.startsWith(`spark-cluster:${c.path}: `));
            assert.match(line, / \(got .+\)\. Example: .+$/);
            assert.ok(err.message.split("\n").includes(line), `message lacks the line ${line}`);
            if (c.got !== undefined) {
                assert.equal(issue.got, c.got);
            }
            if (c.example !== undefined) {
                assert.ok(issue.example.includes(c.example), `example "${issue.example}" lacks "${c.example}"`);
            }
            assert.notEqual(issue.example, "");
            assertNoPlaintext(err);
        });
    }
});

describe("a key named __proto__ is refused before the schema drops it", () => {
    for (const [where, json, path] of [
        ["nccl", '{"overrides": {"__proto__": "1", "NCCL_IB_MERGE_NICS": "1"}}', "nccl.overrides.__proto__"],
        ["model.env", '{"__proto__": "x"}', "model.env.__proto__"],
    ] as const) {
        test(`at ${path}`, () => {
            // JSON.parse makes `__proto__` an own key, as Pulumi's config reader does.
            const err = parseError(edited([[where, JSON.parse(json)]]));
            assert.equal(err.issues.length, 1, err.message);
            assert.equal(err.issues[0]?.path, path);
            assert.match(err.message, /reserves for the prototype/);
            assert.match(renderIssue(err.issues[0]!), / \(got "__proto__"\)\. Example: .+$/);
        });
    }
});

describe("secrets take any printable character", () => {
    test("quotes, backslashes, $, %, backticks and inner spaces are accepted as they are", () => {
        const apiKey = `sk-lab only'"\\$HOME%n%%\`id\`$(id)#;&|<>{}=~!`;
        const hfToken = `hf_lab'"\\$USER%i%% \`x\`#token`;
        const config = parse(
            edited([
                ["apiKey", apiKey],
                ["hfToken", hfToken],
            ]),
        );
        assert.equal(config.apiKey.reveal(), apiKey);
        assert.equal(config.hfToken?.reveal(), hfToken);
    });
});

describe("all problems are reported at once", () => {
    test("three field problems in one config", () => {
        const err = parseError(
            edited([
                ["nodes[1].ssh.port", "22"],
                ["model.foo", 1],
                ["apiKey", REMOVE],
            ]),
        );
        assert.deepEqual(err.issues.map((i) => i.path).sort(), ["apiKey", "model.foo", "nodes[1].ssh.port"]);
        assert.equal(err.message.split("\n").length, 3);
        assert.deepEqual(err.message.split("\n"), err.issues.map(renderIssue));
    });

    test("three cross-field problems in one config", () => {
        const err = parseError(
            edited([
                ["nodes[1].name", "spark-a"],
                ["model.tensorParallel", 4],
                ["model.apiPort", 6379],
            ]),
        );
        assert.deepEqual(err.issues.map((i) => i.path).sort(), ["model.apiPort", "model.tensorParallel", "nodes[1].name"]);
    });

    test("cross-field rules wait until every field is valid", () => {
        const err = parseError(
            edited([
                ["nodes[1].name", "spark-a"],
                ["nodes[1].ssh.port", "22"],
            ]),
        );
        assert.deepEqual(
            err.issues.map((i) => i.path),
            ["nodes[1].ssh.port"],
        );
    });

    test("secret problems are reported with field problems", () => {
        const err = parseError(
            edited([
                ["interconnect", { mtu: 100 }],
                ["sshPrivateKey", REMOVE],
            ]),
            ["apiKey"],
        );
        assert.deepEqual(err.issues.map((i) => i.path).sort(), ["interconnect.mtu", "sshPrivateKey"]);
    });
});

// ---------------------------------------------------------------------------------------------
// Defaults and resolution
// ---------------------------------------------------------------------------------------------

describe("a minimal config gets the documented defaults", () => {
    const config = parse(base());

    test("nodes", () => {
        const [a, b] = config.nodes;
        assert.deepEqual(
            { host: a.ssh.host, port: a.ssh.port, user: a.ssh.user, keyKind: a.ssh.privateKey.kind },
            { host: "10.0.0.11", port: 22, user: "root", keyKind: "secret" },
        );
        assert.equal(a.gpus, 1);
        assert.equal(b.head, false);
        assert.deepEqual(a.runtime, { kind: "docker", image: DEFAULT_VLLM_IMAGE, privileged: true, memlockUnlimited: true, infiniband: true, shmSize: "16g" });
        assert.deepEqual(b.interconnect[1], {
            name: "enP2p1s0f1np1",
            address: "192.168.101.12/24",
            ip: "192.168.101.12",
            prefixLength: 24,
            subnet: "192.168.101.0/24",
        });
        assert.equal(config.head.name, "spark-a");
        assert.deepEqual(
            config.workers.map((n) => n.name),
            ["spark-b"],
        );
        assert.equal(config.totalGpus, 2);
    });

    test("cluster sections", () => {
        assert.deepEqual(config.interconnect, {
            topology: "pair",
            takeOver: false,
            mtu: 9000,
            linkCheck: { lowSpeed: "refuse", rdmaBandwidth: { enabled: false, durationSeconds: 5, waitSeconds: 120, port: 18515 } },
        });
        assert.deepEqual(
            config.nodes.map((n) => n.linkCheck),
            config.nodes.map((n) => (n.kind === "spark" ? { minSpeedMbps: 200000, lowSpeed: "refuse" } : { lowSpeed: "refuse" })),
            "a Spark checks for its ConnectX-7 port speed, other nodes only report theirs",
        );
        assert.deepEqual(config.roce, { enabled: true, priority: 3, trustDscp: true, dscp: 26, peermem: "auto" });
        assert.deepEqual(
            config.nodes.map((n) => (n.roce.enabled ? n.roce.peermem.load : undefined)),
            config.nodes.map((n) => n.kind === "workstation"),
            "nvidia-peermem on a workstation only: a Spark's GB10 has no GPUDirect RDMA",
        );
        assert.deepEqual(config.nccl, { debug: "WARN", overrides: {} });
        assert.deepEqual(config.ray, {
            port: 6379,
            dashboardHost: "127.0.0.1",
            dashboardPort: 8265,
            clientServerPort: 10001,
            nodeManagerPort: 6800,
            objectManagerPort: 6801,
            runtimeEnvAgentPort: 6802,
            dashboardAgentGrpcPort: 6803,
            dashboardAgentListenPort: 52365,
            metricsExportPort: 6804,
            minWorkerPort: 10002,
            maxWorkerPort: 10101,
        });
        assert.deepEqual(config.firewall, { enabled: true, apiAllowFrom: [], allowPorts: [] });
        assert.equal(config.transport, "roce");
    });

    test("model", () => {
        assert.deepEqual(config.model, {
            source: "Qwen/Qwen2.5-7B-Instruct",
            servedName: "Qwen2.5-7B-Instruct",
            tensorParallel: 2,
            pipelineParallel: 1,
            executor: "mp",
            engine: "vllm",
            gpuMemoryUtilization: 0.9,
            enforceEager: false,
            trustRemoteCode: false,
            extraArgs: [],
            env: {},
            readyTimeoutSeconds: 600,
            apiPort: 8000,
            apiHost: "0.0.0.0",
            masterPort: 29501,
            syncStreams: 4,
        });
    });

    test("secrets are wrapped and never serialized", () => {
        assert.ok(config.apiKey instanceof SecretString);
        assert.equal(config.apiKey.reveal(), API_KEY);
        assert.equal(config.hfToken, undefined);
        const key = config.nodes[0].ssh.privateKey;
        assert.equal(key.kind === "secret" ? key.text.reveal() : undefined, SSH_KEY);
        const dumped = `${JSON.stringify(config)}\n${inspect(config, { depth: 10 })}\n${String(config.apiKey)}`;
        assert.ok(!dumped.includes(API_KEY) && !dumped.includes("SECRETMATERIAL"));
    });
});

describe("resolution", () => {
    test("a Thor makes the transport socket and eager mode the default", () => {
        const config = parse(edited(THOR_B));
        assert.equal(config.transport, "socket");
        assert.equal(config.model.enforceEager, true);
        assert.deepEqual(config.nodes[1].runtime, { kind: "venv", path: "/opt/vllm-venv" });
        assert.equal(config.nodes[1].interconnect[0].name, "mgbe0_0");
    });

    test("an explicit enforceEager wins over the Thor default", () => {
        assert.equal(parse(edited([...THOR_B, ["model.enforceEager", false]])).model.enforceEager, false);
    });

    test("explicit socket transport on Sparks is kept", () => {
        assert.equal(parse(edited([["nccl", { transport: "socket" }]])).transport, "socket");
    });

    test("only tensorParallel given: pipelineParallel is 1", () => {
        const { model } = parse(
            edited([
                ["model.tensorParallel", 1],
                ["model.executor", "ray"],
            ]),
        );
        assert.deepEqual([model.tensorParallel, model.pipelineParallel], [1, 1]);
    });

    test("only pipelineParallel given: tensorParallel is 1", () => {
        const { model } = parse(edited([["model.pipelineParallel", 2]]));
        assert.deepEqual([model.tensorParallel, model.pipelineParallel], [1, 2]);
    });

    test("a local model path names the served model by its last segment", () => {
        assert.equal(parse(edited([["model.source", "/models/qwen2.5-72b/"]])).model.servedName, "qwen2.5-72b");
        assert.equal(parse(edited([["model.servedName", "qwen"]])).model.servedName, "qwen");
    });

    test("a key path and per-node key paths", () => {
        const config = parse(
            edited([
                ["sshPrivateKey", REMOVE],
                ["sshPrivateKeyPath", "/home/you/.ssh/id_ed25519"],
                ["nodes[1].ssh.privateKeyPath", "/home/you/.ssh/b"],
            ]),
            ["apiKey"],
        );
        assert.deepEqual(config.nodes[0].ssh.privateKey, { kind: "path", path: "/home/you/.ssh/id_ed25519" });
        assert.deepEqual(config.nodes[1].ssh.privateKey, { kind: "path", path: "/home/you/.ssh/b" });
    });

    test("no cluster key is needed when every node names its own", () => {
        const config = parse(
            edited([
                ["sshPrivateKey", REMOVE],
                ["nodes[0].ssh.privateKeyPath", "/keys/a"],
                ["nodes[1].ssh.privateKeyPath", "/keys/b"],
            ]),
            ["apiKey"],
        );
        assert.deepEqual(
            config.nodes.map((n) => n.ssh.privateKey),
            [
                { kind: "path", path: "/keys/a" },
                { kind: "path", path: "/keys/b" },
            ],
        );
    });

    test("hfToken is wrapped", () => {
        const config = parse(edited([["hfToken", HF_TOKEN]]));
        assert.equal(config.hfToken?.reveal(), HF_TOKEN);
    });

    test("a switch of three nodes with one interface each is accepted", () => {
        const config = parse(
            edited([
                ["interconnect", { topology: "switch" }],
                ["nodes[0].interconnect", [{ address: "192.168.100.11/24" }]],
                ["nodes[1].interconnect", [{ address: "192.168.100.12/24" }]],
                ["nodes[2]", THIRD_NODE],
            ]),
        );
        assert.equal(config.totalGpus, 3);
        assert.equal(config.model.tensorParallel, 3);
    });

    test("same host on different SSH ports is two endpoints", () => {
        assert.doesNotThrow(() => parse(edited([["nodes[1].ssh", { host: "10.0.0.11", port: 2222 }]])));
    });
});

describe("SecretString", () => {
    const secret = new SecretString("hunter2-hunter2-hunter2");
    test("prints as [secret] everywhere", () => {
        assert.equal(String(secret), "[secret]");
        assert.equal(`${secret}`, "[secret]");
        assert.equal(JSON.stringify({ secret }), '{"secret":"[secret]"}');
        assert.equal(inspect(secret), "[secret]");
        assert.equal(inspect({ nested: { secret } }, { depth: 5 }).includes("hunter2"), false);
    });
    test("reveals the plaintext on request", () => {
        assert.equal(secret.reveal(), "hunter2-hunter2-hunter2");
    });
});

// ---------------------------------------------------------------------------------------------
// The cross-field rules, called directly
// ---------------------------------------------------------------------------------------------

function node(name: string, addresses: string[], extra: Partial<ParsedNode> = {}): ParsedNode {
    return {
        name,
        kind: "spark",
        head: false,
        ssh: { host: `${name}.lan`, port: 22, user: "root" },
        gpus: 1,
        interconnect: addresses.map((address) => ({ address })),
        ...extra,
    };
}

function paths(issues: readonly ConfigIssue[]): string[] {
    return issues.map((i) => i.path);
}

interface RuleCase {
    name: string;
    issues: () => ConfigIssue[];
    paths: string[];
    message?: string;
}

const RULE_CASES: readonly RuleCase[] = [
    { name: "checkExactlyOneHead: one head", issues: () => checkExactlyOneHead([node("a", [], { head: true }), node("b", [])]), paths: [] },
    { name: "checkExactlyOneHead: none", issues: () => checkExactlyOneHead([node("a", []), node("b", [])]), paths: ["nodes"], message: "has no head" },
    {
        name: "checkExactlyOneHead: three heads report each extra",
        issues: () => checkExactlyOneHead([node("a", []), node("b", [], { head: true }), node("c", [], { head: true }), node("d", [], { head: true })]),
        paths: ["nodes[2].head", "nodes[3].head"],
        message: "nodes[1] (b) is already the head",
    },
    { name: "checkUniqueNodeNames: unique", issues: () => checkUniqueNodeNames([node("a", []), node("b", [])]), paths: [] },
    {
        name: "checkUniqueNodeNames: every repeat",
        issues: () => checkUniqueNodeNames([node("a", []), node("a", []), node("b", []), node("a", [])]),
        paths: ["nodes[1].name", "nodes[3].name"],
    },
    {
        name: "checkUniqueSshEndpoints: host names compare case-insensitively",
        issues: () =>
            checkUniqueSshEndpoints([
                node("a", [], { ssh: { host: "Spark.lan", port: 22, user: "root" } }),
                node("b", [], { ssh: { host: "spark.lan", port: 22, user: "root" } }),
            ]),
        paths: ["nodes[1].ssh.host"],
    },
    {
        name: "checkSshHostOutsideInterconnect: an address in the node's own subnet, or its own interconnect address",
        issues: () =>
            checkSshHostOutsideInterconnect([
                node("a", ["192.168.100.1/24", "192.168.101.1/24"], { ssh: { host: "192.168.101.9", port: 22, user: "root" } }),
                node("b", ["192.168.100.2/24"], { ssh: { host: "192.168.100.2", port: 22, user: "root" } }),
            ]),
        paths: ["nodes[0].ssh.host", "nodes[1].ssh.host"],
        message: "netplan would route it over the interconnect and cut the SSH connection",
    },
    {
        name: "checkSshHostOutsideInterconnect: management addresses, host names, and a subnet only another node has",
        issues: () =>
            checkSshHostOutsideInterconnect([
                node("a", ["192.168.100.1/24"], { ssh: { host: "10.0.0.11", port: 22, user: "root" } }),
                node("b", ["192.168.100.2/24"], { ssh: { host: "192.168.100.2.lan", port: 22, user: "root" } }),
                node("c", ["10.9.0.1/31"], { ssh: { host: "192.168.100.3", port: 22, user: "root" } }),
                node("d", ["192.168.100.4/30"], { ssh: { host: "192.168.100.8", port: 22, user: "root" } }),
            ]),
        paths: [],
    },
    {
        name: "checkUniqueSshEndpoints: other port is fine",
        issues: () =>
            checkUniqueSshEndpoints([
                node("a", [], { ssh: { host: "h", port: 22, user: "root" } }),
                node("b", [], { ssh: { host: "h", port: 2222, user: "root" } }),
            ]),
        paths: [],
    },
    {
        name: "checkUniqueAddresses: same IP with other prefix is still the same IP",
        issues: () => checkUniqueAddresses([node("a", ["10.1.0.1/24"]), node("b", ["10.1.0.1/16"])]),
        paths: ["nodes[1].interconnect[0].address"],
    },
    {
        name: "checkUniqueAddresses: twins on one node with one IP",
        issues: () => checkUniqueAddresses([node("a", ["10.1.0.1/24", "10.1.0.1/24"])]),
        paths: ["nodes[0].interconnect[1].address"],
    },
    {
        name: "checkAddressesInSubnets: a good pair with twins",
        issues: () => checkAddressesInSubnets([node("a", ["192.168.100.1/24", "192.168.101.1/24"]), node("b", ["192.168.100.2/24", "192.168.101.2/24"])]),
        paths: [],
    },
    {
        name: "checkAddressesInSubnets: a /31 point-to-point link",
        issues: () => checkAddressesInSubnets([node("a", ["10.9.0.0/31"]), node("b", ["10.9.0.1/31"])]),
        paths: [],
    },
    {
        name: "checkAddressesInSubnets: offenders are reported against the first node",
        issues: () => checkAddressesInSubnets([node("a", ["192.168.100.1/24"]), node("b", ["192.168.100.2/24"]), node("c", ["192.168.200.3/24"])]),
        paths: ["nodes[2].interconnect[0].address"],
        message: "is not inside 192.168.100.0/24, the subnet of nodes[0].interconnect[0] (a)",
    },
    {
        name: "checkAddressesInSubnets: the first node with an i-th interface is the reference",
        issues: () =>
            checkAddressesInSubnets([
                node("t", ["192.168.100.3/24"]),
                node("a", ["192.168.100.1/24", "192.168.101.1/24"]),
                node("b", ["192.168.100.2/24", "192.168.111.2/24"]),
            ]),
        paths: ["nodes[2].interconnect[1].address"],
        message: "the subnet of nodes[1].interconnect[1] (a)",
    },
    {
        name: "checkAddressesInSubnets: prefix length differs",
        issues: () => checkAddressesInSubnets([node("a", ["10.0.0.1/24"]), node("b", ["10.0.0.2/16"])]),
        paths: ["nodes[1].interconnect[0].address"],
        message: "has prefix /16",
    },
    {
        name: "checkAddressesInSubnets: a lone interface has no peer",
        issues: () => checkAddressesInSubnets([node("a", ["10.0.0.1/24", "10.0.1.1/24"]), node("b", ["10.0.0.2/24"])]),
        paths: ["nodes[0].interconnect[1].address"],
        message: "no peer on this link",
    },
    {
        name: "checkTwinSubnets: overlapping /23 and /24",
        issues: () => checkTwinSubnets([node("a", ["192.168.100.1/23", "192.168.101.1/24"])]),
        paths: ["nodes[0].interconnect[1].address"],
    },
    { name: "checkTwinSubnets: separate subnets", issues: () => checkTwinSubnets([node("a", ["192.168.100.1/24", "192.168.101.1/24"])]), paths: [] },
    {
        name: "checkInterfaceNames: unnamed interfaces never clash",
        issues: () => checkInterfaceNames([node("a", ["10.0.0.1/24", "10.0.1.1/24"])]),
        paths: [],
    },
    {
        name: "checkInterfaceNames: same name on two nodes is fine, twice on one is not",
        issues: () =>
            checkInterfaceNames([
                { name: "a", interconnect: [{ name: "eth1", address: "10.0.0.1/24" }] },
                {
                    name: "b",
                    interconnect: [
                        { name: "eth1", address: "10.0.0.2/24" },
                        { name: "eth1", address: "10.0.1.2/24" },
                    ],
                },
            ]),
        paths: ["nodes[1].interconnect[1].name"],
    },
    { name: "checkParallelismFitsGpus: defaults fit", issues: () => checkParallelismFitsGpus({}, 4), paths: [] },
    { name: "checkParallelismFitsGpus: 2x2 on 4", issues: () => checkParallelismFitsGpus({ tensorParallel: 2, pipelineParallel: 2 }, 4), paths: [] },
    { name: "checkParallelismFitsGpus: fewer than all GPUs is allowed", issues: () => checkParallelismFitsGpus({ tensorParallel: 1 }, 4), paths: [] },
    {
        name: "checkParallelismFitsGpus: 4x2 on 4",
        issues: () => checkParallelismFitsGpus({ tensorParallel: 4, pipelineParallel: 2 }, 4),
        paths: ["model.tensorParallel"],
        message: "4 x 2 = 8 GPUs, but the cluster has 4 GPUs",
    },
    {
        name: "checkTransport: roce with a Thor",
        issues: () => checkTransport("roce", [node("a", []), node("t", [], { kind: "thor" })]),
        paths: ["nccl.transport"],
        message: "nodes[1] (t) is a thor",
    },
    { name: "checkTransport: auto with a Thor", issues: () => checkTransport("auto", [node("t", [], { kind: "thor" })]), paths: [] },
    { name: "checkTransport: roce without a Thor", issues: () => checkTransport("roce", [node("a", []), node("w", [], { kind: "workstation" })]), paths: [] },
    {
        name: "checkPorts: defaults",
        issues: () => checkPorts({ port: 6379, dashboardPort: 8265 }, { apiPort: 8000, masterPort: 29500 }, [node("a", [])]),
        paths: [],
    },
    {
        name: "checkPorts: every collision, each on the later key",
        issues: () =>
            checkPorts({ port: 6379, dashboardPort: 6379 }, { apiPort: 2222, masterPort: 8000 }, [
                node("a", []),
                node("b", [], { ssh: { host: "b", port: 2222, user: "root" } }),
            ]),
        paths: ["ray.dashboardPort", "model.apiPort"],
        message: "collides with",
    },
    {
        name: "checkMpLayout: TP=2 over two 1-GPU nodes",
        issues: () => checkMpLayout({ executor: "mp", tensorParallel: 2 }, [node("a", []), node("b", [])]),
        paths: [],
    },
    {
        name: "checkMpLayout: TP=1 cannot be split over two nodes (vLLM's reason)",
        issues: () => checkMpLayout({ executor: "mp", tensorParallel: 1 }, [node("a", []), node("b", [])]),
        paths: ["model.tensorParallel"],
        message: 'vLLM refuses it with "global world_size (1) must be divisible by nnodes_within_dp (2)"',
    },
    {
        name: "checkMpLayout: PP=3 over two nodes",
        issues: () => checkMpLayout({ executor: "mp", pipelineParallel: 3 }, [node("a", [], { gpus: 2 }), node("b", [], { gpus: 2 })]),
        paths: ["model.pipelineParallel"],
        message: "must be divisible by nnodes_within_dp (2)",
    },
    {
        name: "checkMpLayout: 4 workers per node, but one node has 2 GPUs",
        issues: () => checkMpLayout({ executor: "mp", tensorParallel: 8 }, [node("a", [], { gpus: 6 }), node("b", [], { gpus: 2 })]),
        paths: ["model.tensorParallel"],
        message: "nodes[1] (b) has 2 GPU(s)",
    },
    {
        name: "executor rules: the ray executor places shards itself (no mp layout rule)",
        issues: () => checkExecutorRules({ executor: "ray", tensorParallel: 1, source: "org/model" }, [node("a", []), node("b", [])]),
        paths: [],
    },
    {
        name: "checkLocalModelWithRay: a local path outside the HF cache on docker nodes",
        issues: () => checkLocalModelWithRay({ executor: "ray", source: "/models/m" }, [node("a", []), node("b", [])]),
        paths: ["model.source"],
        message: "with the ray executor vLLM's workers run in the Ray container of nodes[0] (a)",
    },
    {
        name: "checkLocalModelWithRay: under the HF cache",
        issues: () => checkLocalModelWithRay({ executor: "ray", source: "/root/.cache/huggingface/models/m" }, [node("a", [])]),
        paths: [],
    },
    {
        name: "executor rules: the mp executor mounts a local model (no Ray container rule)",
        issues: () => checkExecutorRules({ executor: "mp", tensorParallel: 1, source: "/models/m" }, [node("a", [])]),
        paths: [],
    },
    {
        name: "checkLocalModelWithRay: venv nodes see the host's paths",
        issues: () => checkLocalModelWithRay({ executor: "ray", source: "/models/m" }, [node("a", [], { runtime: { kind: "venv", path: "/opt/v" } })]),
        paths: [],
    },
    { name: "checkTopology: pair of two", issues: () => checkTopology("pair", 2), paths: [] },
    { name: "checkTopology: pair of four", issues: () => checkTopology("pair", 4), paths: ["interconnect.topology"], message: "nodes lists 4" },
    { name: "checkTopology: switch of one", issues: () => checkTopology("switch", 1), paths: ["interconnect.topology"] },
    { name: "checkTopology: switch of four", issues: () => checkTopology("switch", 4), paths: [] },
    {
        name: "checkNodeKinds: Thor with a venv and one interface",
        issues: () =>
            checkNodeKinds([
                node("t", [], { kind: "thor", runtime: { kind: "venv", path: "/opt/v" }, interconnect: [{ name: "mgbe0_0", address: "10.0.0.1/24" }] }),
            ]),
        paths: [],
    },
    {
        name: "checkNodeKinds: Thor without runtime, with two unnamed interfaces",
        issues: () => checkNodeKinds([node("t", ["10.0.0.1/24", "10.0.1.1/24"], { kind: "thor" })]),
        paths: ["nodes[0].runtime", "nodes[0].interconnect[0].name", "nodes[0].interconnect[1].name", "nodes[0].interconnect"],
    },
    {
        name: "checkSecretsAreSecret: only plaintext secrets are reported",
        issues: () => checkSecretsAreSecret({ apiKey: API_KEY, hfToken: HF_TOKEN, sshPrivateKeyPath: "/k" }, new Set(["apiKey"])),
        paths: ["hfToken"],
        message: "without --secret",
    },
    { name: "checkSshKeySource: the path alone", issues: () => checkSshKeySource({ sshPrivateKeyPath: "/k" }), paths: [] },
    { name: "checkSshKeySource: neither", issues: () => checkSshKeySource({ nodes: [{ ssh: { host: "h" } }] }), paths: ["sshPrivateKey"] },
    {
        name: "checkSshKeySource: neither, but every node has its own",
        issues: () => checkSshKeySource({ nodes: [{ ssh: { privateKeyPath: "/a" } }, { ssh: { privateKeyPath: "/b" } }] }),
        paths: [],
    },
    { name: "checkSshKeySource: both", issues: () => checkSshKeySource({ sshPrivateKey: SSH_KEY, sshPrivateKeyPath: "/k" }), paths: ["sshPrivateKeyPath"] },
];

describe("cross-field rules", () => {
    for (const c of RULE_CASES) {
        test(c.name, () => {
            const issues = c.issues();
            assert.deepEqual(paths(issues), c.paths, issues.map(renderIssue).join("\n"));
            if (c.message !== undefined) {
                assert.ok(
                    issues.every((i) => i.message.includes(c.message ?? "")),
                    issues.map(renderIssue).join("\n"),
                );
            }
            for (const issue of issues) {
                assert.ok(issue.got !== "" && issue.example !== "");
                assert.ok(!renderIssue(issue).includes(API_KEY) && !renderIssue(issue).includes(HF_TOKEN));
            }
        });
    }

    test("resolveParallelism", () => {
        assert.deepEqual(resolveParallelism({}, 4), { tensorParallel: 4, pipelineParallel: 1 });
        assert.deepEqual(resolveParallelism({ pipelineParallel: 4 }, 4), { tensorParallel: 1, pipelineParallel: 4 });
        assert.deepEqual(resolveParallelism({ tensorParallel: 2 }, 4), { tensorParallel: 2, pipelineParallel: 1 });
    });

    test("resolveTransport", () => {
        assert.equal(resolveTransport("auto", false), "roce");
        assert.equal(resolveTransport("auto", true), "socket");
        assert.equal(resolveTransport("socket", false), "socket");
        assert.equal(resolveTransport("roce", false), "roce");
    });
});

describe("runtime.extraOptions: docker run options from the allow-list", () => {
    const options: [string, string | undefined][] = [
        ["--mount=type=bind,source=/data/templates,target=/templates,readonly", undefined],
        ["--mount=type=bind,src=/data/x,dst=/x,ro", undefined],
        ["--mount=type=bind,source=/data/x,target=/x,readonly=false", undefined],
        ["--mount=target=/x,type=bind,source=/srv/a_b.c@1+2", undefined],
        ["--mount=type=bind,source=/home/nvidia/.cache/huggingface,target=/hf,readonly", undefined],
        ["--mount=type=bind,source=/mnt/nvme/models,target=/m", undefined],
        ["--device=/dev/infiniband/uverbs0", undefined],
        ["--device=/dev/nvidia0:rw", undefined],
        ["--device=/dev/a:/dev/b:rwm", undefined],
        ["--ulimit=nofile=1048576:1048576", undefined],
        ["--ulimit=core=0", undefined],
        ["--ulimit=rtprio=-1:-1", undefined],
        ["--cap-add=IPC_LOCK", undefined],
        ["--cap-add=CAP_SYS_NICE", undefined],
        ["--group-add=video", undefined],
        ["--group-add=44", undefined],
        // refused by name, each with why and the key to set instead
        ["--privileged", "rendered from runtime.privileged"],
        ["--shm-size=64g", "rendered from runtime.shmSize"],
        ["--volume=/data/a:/b", "creates a missing host directory"],
        ["-v=/data/a:/b", "is -v"],
        ["--network=bridge", "host networking"],
        ["--net=none", "host networking"],
        ["--ipc=private", "the host's IPC namespace"],
        ["--pid=container:x", "the host's PID namespace"],
        ["-p=8000:8000", "is -p (--publish), which has no effect with host networking"],
        ["--publish=8000:8000", "has no effect with host networking"],
        ["--user=1000", "belong to root"],
        ["-u=nobody", "is -u (--user)"],
        ["--entrypoint=bash", "would replace the program the unit runs"],
        ["-e=A=1", "use model.env"],
        ["--env=VLLM_X=1", "use model.env"],
        ["--env-file=/tmp/x", "use model.env"],
        ["--name=x", "stops and removes the container by its name"],
        ["--rm", "removed when it ends"],
        ["--detach", "systemd supervises the container"],
        ["--restart=always", "would fight systemd"],
        ["--gpus=0", "all of the node's GPUs"],
        ["--security-opt=seccomp=unconfined", "confinement"],
        ["--log-driver=none", "the journal"],
        ["--cap-add=ALL", "as good as privileged"],
        ["--cap-add=SYS_ADMIN", "as good as privileged"],
        ["--cap-add=NET_ADMIN", "not a capability on the allow-list"],
        // off the list, or not one token
        ["--memory=8g", "is not on the allow-list of docker options (--mount, --device, --ulimit, --cap-add, --group-add)"],
        ["--ulimit nofile=1", "must be one token --flag=value"],
        ["ulimit=nofile=1", "must be one token --flag=value"],
        ["--ulimit", "needs its value in the same token"],
        ["--ulimit=", "needs its value in the same token"],
        ["--ulimit=nofile=1\n--privileged", "must not contain line breaks"],
        // values
        ["--ulimit=memlock=-1", "runtime.memlockUnlimited"],
        ["--ulimit=stack=1", "the project renders (64 MiB)"],
        ["--ulimit=files=1", "names no limit docker knows"],
        ["--ulimit=nofile=2:1", "no greater than the hard limit"],
        ["--ulimit=nofile=5:-1", "for both limits or for neither"],
        ["--ulimit=nofile=01", "whole numbers"],
        ["--mount=type=volume,source=v,target=/v", "type=bind"],
        ["--mount=type=bind,source=/a,target=/b,bind-propagation=rshared", "bind-propagation"],
        ["--mount=type=bind,source=/a", "needs source= (a host directory) and target="],
        ["--mount=type=bind,source=/a b,target=/b", "absolute path of letters"],
        ["--mount=type=bind,source=relative,target=/b", "absolute path of letters"],
        ["--mount=type=bind,source=/a/../etc,target=/b", ". or .. segments"],
        ["--mount=type=bind,source=/a/$HOME,target=/b", "absolute path of letters"],
        ["--mount=type=bind,source=/etc/spark-cluster,target=/s", "secrets among them"],
        ["--mount=type=bind,source=/var/run/docker.sock,target=/s", "Docker's socket"],
        // the host's own directories, refused by the allow-list of roots (issue 40)
        ["--mount=type=bind,source=/etc,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/etc/ssh,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/run,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/root,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/usr/lib,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/var/lib,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/home,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/home/nvidia,target=/s", "whole homes are not mounted"],
        ["--mount=type=bind,source=/datastore,target=/s", "outside the directories a mount may come from"],
        ["--mount=type=bind,source=/home/nvidia/.ssh,target=/s", "in .ssh, a directory of credentials"],
        ["--mount=type=bind,source=/dev,target=/d", "--device=/dev/NAME"],
        ["--mount=type=bind,source=/data,target=/root/.cache/huggingface/hub", "where the project mounts /root/.cache/huggingface itself"],
        ["--mount=type=bind,source=/data,target=/tmp", "where the project mounts /tmp/ray itself"],
        ["--mount=type=bind,source=/data,target=/", "absolute path of letters"],
        ["--mount=type=bind,source=/data,target=/proc/x", "kernel file system"],
        ["--device=/tmp/x", "under /dev"],
        ["--device=/dev", "under /dev"],
        ["--device=/dev/a:/dev/b:rx", "permissions of r, w and m"],
        ["--group-add=Video!", "group name"],
    ];
    for (const [option, problem] of options) {
        test(`dockerOptionProblem(${JSON.stringify(option)})`, () => {
            const got = dockerOptionProblem(option);
            if (problem === undefined) assert.equal(got, undefined, got?.message);
            else {
                assert.ok(got !== undefined && got.message.includes(problem), `${option}: ${String(got?.message)}`);
                assert.notEqual(got.example, "");
                assert.equal(
                    dockerOptionProblem(got.example.startsWith("--") ? got.example : "--ulimit=core=0"),
                    undefined,
                    `the example ${got.example} is itself accepted`,
                );
            }
        });
    }

    test("every allowed option's own example is accepted, every refused option is refused", () => {
        for (const [flag, allowed] of Object.entries(ALLOWED_DOCKER_OPTIONS)) {
            assert.ok(allowed.example.startsWith(`${flag}=`), flag);
            assert.equal(dockerOptionProblem(allowed.example), undefined, allowed.example);
        }
        for (const flag of Object.keys(REFUSED_DOCKER_OPTIONS)) {
            assert.ok(dockerOptionProblem(`${flag}=x`)?.message.startsWith(`sets ${flag}, which `), flag);
            assert.ok(dockerOptionProblem(flag), flag);
        }
    });

    test("accepted options reach the parsed runtime as written; none by default", () => {
        const parsed = parse(edited([["nodes[0].runtime", { kind: "docker", extraOptions: ["--ulimit=nofile=65536", "--cap-add=IPC_LOCK"] }]]));
        const runtime = parsed.nodes[0].runtime;
        assert.ok(runtime.kind === "docker");
        assert.deepEqual(runtime.extraOptions, ["--ulimit=nofile=65536", "--cap-add=IPC_LOCK"]);
        const plain = parse(base()).nodes[0].runtime;
        assert.ok(plain.kind === "docker" && plain.extraOptions === undefined);
    });
});

describe("interconnect names that cannot be a NIC's port are refused", () => {
    const names: [string, string | undefined][] = [
        ["enp1s0f1np1", undefined],
        ["enP2p1s0f1np1", undefined],
        ["mgbe0_0", undefined],
        ["eth0", undefined],
        ["bond0", undefined],
        ["enp1s0f1np1.100", undefined],
        ["lo", "the loopback interface"],
        ["all", "/proc/sys/net/ipv6/conf"],
        ["default", "/proc/sys/net/ipv6/conf"],
        ["bonding_masters", "control file of the bonding driver"],
        ["docker0", "a Docker bridge"],
        ["docker1", "a Docker bridge"],
        ["br-1a2b3c4d5e6f", "a Docker bridge"],
        ["veth12ab", "virtual Ethernet pair"],
        ["virbr0", "libvirt bridge"],
        ["tun0", "TUN/TAP"],
        ["tap3", "TUN/TAP"],
        ["wg0", "VPN device"],
        ["tailscale0", "VPN device"],
        ["zt5u4y6j4c", "VPN device"],
        ["cni0", "Kubernetes"],
        ["flannel.1", "Kubernetes"],
    ];
    for (const [name, problem] of names) {
        test(`interconnectNameProblem(${name})`, () => {
            const got = interconnectNameProblem(name);
            if (problem === undefined) assert.equal(got, undefined);
            else {
                assert.ok(got?.includes(problem), `${name}: ${String(got)}`);
                assert.ok(got?.includes("ibdev2netdev"), "the message says where the right names are");
            }
        });
    }
});

describe("field formats", () => {
    const addresses: [string, string | undefined][] = [
        ["192.168.100.11/24", undefined],
        ["10.9.0.0/31", undefined],
        ["169.254.3.4/16", undefined],
        ["192.168.100.11", "with its prefix length"],
        ["192.168.100.011/24", "not an IPv4 address"],
        ["192.168.100.11/33", "prefix length must be 1-31"],
        // nft refuses a prefix with a leading zero (found by the property test: 10.0.0.0/08).
        ["192.168.100.11/024", "without leading zeros"],
        ["192.168.100.11/08", "without leading zeros"],
        ["192.168.100.11/0", "prefix length must be 1-31"],
        ["192.168.100.11/32", "no room for a peer"],
        ["224.0.0.5/24", "multicast"],
        ["0.1.2.3/8", "'this network'"],
        ["10.0.0.0/8", "network address of 10.0.0.0/8"],
        ["10.0.0.3/30", "broadcast address of 10.0.0.0/30"],
    ];
    test("ipv4RangeProblem: a range as nft reads it (no leading zeros in the prefix)", () => {
        assert.equal(ipv4RangeProblem("10.0.0.0/8"), undefined);
        assert.equal(ipv4RangeProblem("0.0.0.0/0"), undefined);
        for (const text of ["10.0.0.0/08", "10.0.0.0/00", "10.0.0.0/33", "10.0.0.01/8", "10.0.0.0"]) {
            assert.match(String(ipv4RangeProblem(text)), /must be an IPv4 range/, text);
        }
    });
    for (const [text, problem] of addresses) {
        test(`interfaceAddressProblem(${text})`, () => {
            const got = interfaceAddressProblem(text);
            if (problem === undefined) {
                assert.equal(got, undefined);
            } else {
                assert.ok(got?.includes(problem), `${String(got)} lacks ${problem}`);
            }
        });
    }

    test("isLoopback: localhost and all of 127.0.0.0/8, one rule for the Ray dashboard and Open WebUI", () => {
        for (const host of ["localhost", "127.0.0.1", "127.0.0.53", "127.255.255.254"]) assert.equal(isLoopback(host), true, host);
        for (const host of ["0.0.0.0", "10.77.0.11", "128.0.0.1", "126.255.255.255", "localhost.lan", "spark-a"]) assert.equal(isLoopback(host), false, host);
    });

    test("sshTarget: user@host, and -p only for a port other than 22", () => {
        assert.equal(sshTarget({ user: "root", host: "10.77.0.11", port: 22 }), "root@10.77.0.11");
        assert.equal(sshTarget({ user: "admin", host: "spark-a.lan", port: 2222 }), "admin@spark-a.lan -p 2222");
    });

    test("IMAGE_REFERENCE follows docker's reference grammar (a registry host's labels cannot start or end with -)", () => {
        for (const image of [
            "nvcr.io/nvidia/vllm:25.09-py3",
            "localhost:5000/a/b",
            "my-registry.lan:443/x/y@sha256:" + "a".repeat(64),
            "vllm/vllm-openai:latest",
            "a__b/c-d",
        ]) {
            assert.match(image, IMAGE_REFERENCE, image);
        }
        // Found by test/process/sinks.property.test.ts (seed 275358056): docker refuses this one ("invalid reference format").
        for (const image of ["nvcr.--helpio/nvidia/vllm:25.09-py3", "-nvcr.io/x", "nvcr.io-/x", "nvcr..io/x", "Upper/x", "x:tag:tag", "--help"]) {
            assert.doesNotMatch(image, IMAGE_REFERENCE, image);
        }
    });

    test("extraArgProblem", () => {
        assert.equal(extraArgProblem("--max-num-batched-tokens=8192"), undefined);
        assert.equal(extraArgProblem("--disable-custom-all-reduce"), undefined);
        assert.equal(extraArgProblem('--compilation-config={"level":3}'), undefined);
        for (const [arg, key] of [
            ["--pipeline-parallel-size=2", "model.pipelineParallel"],
            ["--distributed-executor-backend=mp", "model.executor"],
            ["--gpu-memory-utilization=0.8", "model.gpuMemoryUtilization"],
            ["--max-num-seqs=8", "model.maxNumSeqs"],
            ["--quantization=fp8", "model.quantization"],
            ["--kv-cache-dtype=fp8", "model.kvCacheDtype"],
            ["--served-model-name=x", "model.servedName"],
            ["--port=9000", "model.apiPort"],
            ["--host=0.0.0.0", "model.apiHost"],
            ["--enforce-eager", "model.enforceEager"],
            ["--trust-remote-code", "model.trustRemoteCode"],
            ["--attention-backend=TRITON_ATTN", "model.attentionBackend"],
            ["--kv-cache-memory-bytes=8g", "model.kvCacheMemoryBytes"],
            ["--API-KEY=x", "apiKey"],
        ] as const) {
            assert.ok(extraArgProblem(arg)?.message.includes(key), `${arg} should point to ${key}`);
        }
        assert.ok(extraArgProblem("-tp=2")?.message.includes("starting with --"));
        // Found by test/process/sinks.property.test.ts with vLLM 0.33's own argument table: an alias of a
        // rendered flag, and the `--flag.key=value` form FlexibleArgumentParser turns into --flag.
        for (const [arg, key] of [
            ["--device-memory-utilization=0.5", "model.gpuMemoryUtilization"],
            ["--device_memory=0.5", "model.gpuMemoryUtilization"],
            ["--served-model-name.x=1", "model.servedName"],
            ["--served.x=1", "model.servedName"],
            ["--max-model-len.a.b=2", "model.maxModelLen"],
        ] as const) {
            assert.ok(extraArgProblem(arg)?.message.includes(key), `${arg} should point to ${key}`);
        }
        assert.equal(extraArgProblem("--compilation-config.level=3"), undefined);
        assert.equal(extraArgProblem("--max-num-batched-tokens=1.5"), undefined);
        assert.ok(extraArgProblem(`--chat-template=${"t".repeat(5000)}`)?.message.includes("at most 4096 characters"));
    });

    // Found by test/process/sinks.property.test.ts: ids the hub client (huggingface_hub's validate_repo_id)
    // refuses, a served name vLLM would read as a flag, paths Linux cannot open.
    const sources: [string, string | undefined][] = [
        ["Qwen/Qwen2.5-7B-Instruct", undefined],
        ["org/a_", undefined],
        [`org/${"n".repeat(96)}`, undefined],
        [`org/${"n".repeat(97)}`, "at most 96 characters"],
        ["org/name-", "each part ending in a letter, digit or _"],
        ["org./name", "each part ending in a letter, digit or _"],
        ["org/a--b", "no -- or .."],
        ["org/a..b", "no -- or .."],
        ["org/name.git", "Hugging Face model id"],
        ["/models/qwen", undefined],
        ["/models/-qwen", "starts with -"],
        ["/models/-qwen/", "starts with -"],
        [`/models/${"m".repeat(255)}`, undefined],
        [`/models/${"m".repeat(256)}`, "at most 4095 bytes, each name in it at most 255"],
        [`/m/${"long/".repeat(820)}x`, "at most 4095 bytes"],
    ];
    for (const [text, problem] of sources) {
        test(`modelSourceProblem(${text.length > 40 ? `${text.slice(0, 30)}… (${text.length})` : text})`, () => {
            const got = modelSourceProblem(text);
            if (problem === undefined) {
                assert.equal(got, undefined);
            } else {
                assert.ok(got?.includes(problem), `${String(got)} lacks ${problem}`);
            }
        });
    }

    test("isHostOrIpv4", () => {
        for (const good of ["10.0.0.11", "spark-a", "spark-a.lan", "SPARK-A.example.com", "0.0.0.0"]) {
            assert.equal(isHostOrIpv4(good), true, good);
        }
        for (const bad of ["10.0.0.256", "10.0.0", "root@spark", "spark:22", "ssh://spark", "-spark", "", "spark a"]) {
            assert.equal(isHostOrIpv4(bad), false, bad);
        }
    });

    test("defaultServedName", () => {
        assert.equal(defaultServedName("Qwen/Qwen2.5-7B-Instruct"), "Qwen2.5-7B-Instruct");
        assert.equal(defaultServedName("/models/llama/"), "llama");
    });
});

describe("examples live beside their fields", () => {
    /** Every key path of the schema: array items as [0], map values as ["*"], the runtime union once per arm. */
    function keyPaths(schema: unknown, prefix: PropertyKey[], root: Record<string, unknown>): { path: PropertyKey[]; root: Record<string, unknown> }[] {
        let current = schema as {
            _zod: { def: { type: string; innerType?: unknown; element?: unknown; valueType?: unknown; options?: unknown[] } };
            shape?: Record<string, unknown>;
        };
        while (["optional", "default", "prefault"].includes(current._zod.def.type)) {
            current = current._zod.def.innerType as typeof current;
        }
        const def = current._zod.def;
        if (def.type === "object" && current.shape) {
            return Object.entries(current.shape).flatMap(([key, field]) => [{ path: [...prefix, key], root }, ...keyPaths(field, [...prefix, key], root)]);
        }
        if (def.type === "array") {
            return [{ path: [...prefix, 0], root }, ...keyPaths(def.element, [...prefix, 0], root)];
        }
        if (def.type === "record") {
            return [{ path: [...prefix, "*"], root }];
        }
        if (def.type === "union") {
            // The runtime union: one walk per arm, picked by its `kind`; a union of scalars (allowPorts) has no keys.
            const arms = (def.options ?? []) as { shape?: { kind?: { _zod: { values: Set<string> } } } }[];
            // The root holds `{ kind }` at the union's own path (nodes[0].runtime, frontend.openWebui.runtime).
            const rootAt = (kind: string): Record<string, unknown> =>
                prefix.reduceRight<unknown>((inner, key) => (typeof key === "number" ? [inner] : { [key]: inner }), { kind }) as Record<string, unknown>;
            return arms.flatMap((arm) => (arm.shape?.kind ? keyPaths(arm, prefix, rootAt([...arm.shape.kind._zod.values][0])) : []));
        }
        return [];
    }

    test("every key of the schema has an example in its .meta()", () => {
        const paths = keyPaths(ClusterConfigSchema, [], {});
        assert.ok(paths.length > 60, `walked ${paths.length} key paths`);
        const missing = paths.filter(({ path, root }) => exampleFor(path, root).startsWith("see the doc comment")).map(({ path }) => path.join("."));
        assert.deepEqual(missing, []);
    });

    test("the runtime union gives the example of the arm the value names", () => {
        assert.equal(exampleFor(["nodes", 0, "runtime", "path"], { nodes: [{ runtime: { kind: "venv" } }] }), "/opt/vllm-venv");
        assert.equal(exampleFor(["nodes", 0, "runtime", "shmSize"], { nodes: [{ runtime: { kind: "docker" } }] }), "16g");
    });
});

describe("the fit check runs at parse time, before any host is touched", () => {
    const QWEN_72B = { paramsB: 72.7, dtype: "bf16", layers: 80, hiddenSize: 8192, attentionHeads: 64, kvHeads: 8, vocabSize: 152064 };
    const LLAMA_405B = { paramsB: 405, dtype: "bf16", layers: 126, hiddenSize: 16384, attentionHeads: 128, kvHeads: 8, vocabSize: 128256 };

    test("72B BF16 over two Sparks fits, and the estimate is kept for the outputs", () => {
        const config = parse(
            edited([
                ["model.size", QWEN_72B],
                ["model.maxModelLen", 8192],
            ]),
        );
        assert.equal(config.fit.status, "fits");
        assert.match(
            config.fit.status === "fits" ? config.fit.summary : "",
            /^fits: Qwen\/Qwen2\.5-7B-Instruct \(72\.7B, bf16 weights\) with TP=2 PP=1; tightest spark-a: /,
        );
    });

    test("405B BF16 over two Sparks is refused, with a plan that fits in the message", () => {
        const error = parseError(
            edited([
                ["model.size", LLAMA_405B],
                ["model.maxModelLen", 8192],
            ]),
        );
        assert.deepEqual(
            error.issues.map((i) => i.path),
            ["model"],
        );
        assert.match(
            error.message,
            /^spark-cluster:model: .*does not fit: spark-a needs \d+\.\d GiB .* It fits with model\.quantization: \(unset\) → modelopt_fp4/,
        );
        assert.match(error.issues[0].example, /model\.quantization: \(unset\) → modelopt_fp4/);
    });

    test("a hub id with no size given is not checked, and the output says why", () => {
        const config = parse(base());
        assert.equal(config.fit.status, "skipped");
        assert.match(config.fit.status === "skipped" ? config.fit.reason : "", /not known offline and model\.size gives no numbers/);
    });

    test("a local model directory's config.json, when the caller read it, sizes the model", () => {
        const qwen72bConfig = {
            num_hidden_layers: 80,
            hidden_size: 8192,
            intermediate_size: 29568,
            num_attention_heads: 64,
            num_key_value_heads: 8,
            vocab_size: 152064,
            torch_dtype: "bfloat16",
            tie_word_embeddings: false,
        };
        const onOneSpark = edited([
            ["model.tensorParallel", 1],
            ["model.executor", "ray"],
            ["model.source", "/root/.cache/huggingface/models/qwen2.5-72b"],
        ]);
        const error = (() => {
            try {
                parseConfig({ values: onOneSpark, secretKeys: new Set(ALL_SECRET_KEYS), modelConfigJson: qwen72bConfig });
            } catch (err) {
                return err as ConfigError;
            }
            return undefined;
        })();
        assert.ok(error instanceof ConfigError, "72B BF16 on one Spark is refused");
        assert.match(error.message, /does not fit/);
    });

    test("kvCacheMemoryBytes: the start-up check's utilization is what the fit estimate needs, or the default when the size is unknown", () => {
        const size = { paramsB: 7.6, dtype: "bf16", layers: 28, kvHeads: 4, headDim: 128 };
        const budgeted = parse(
            edited([
                ["model.kvCacheMemoryBytes", 8 * 2 ** 30],
                ["model.size", size],
            ]),
        );
        assert.equal(budgeted.model.kvCacheMemoryBytes, 8 * 2 ** 30);
        assert.ok(budgeted.fit.status === "fits" && budgeted.fit.startupUtilization !== undefined);
        assert.equal(budgeted.model.gpuMemoryUtilization, budgeted.fit.status === "fits" ? budgeted.fit.startupUtilization : NaN);
        // TP=2: 7.6B BF16 halves to ~7.1 GiB, + 8 GiB of KV + 6.5 GiB overhead (CUDA graphs on) over 121.63 GiB.
        assert.equal(budgeted.model.gpuMemoryUtilization, 0.18);
        assert.match(budgeted.fit.status === "fits" ? budgeted.fit.summary : "", /KV cache fixed at 8\.0 GiB per GPU/);
        const unknown = parse(edited([["model.kvCacheMemoryBytes", 8 * 2 ** 30]]));
        assert.equal(unknown.fit.status, "skipped");
        assert.equal(unknown.model.gpuMemoryUtilization, 0.9);
        assert.equal(parse(edited([["model.size", size]])).model.gpuMemoryUtilization, 0.9);
    });

    test("spark and thor nodes have unified memory, a workstation does not", () => {
        const config = parse(
            edited([
                ["interconnect", { topology: "switch" }],
                ["nodes[2]", THIRD_NODE],
            ]),
        );
        assert.deepEqual(
            config.nodes.map((n) => [n.kind, n.unifiedMemory]),
            [
                ["spark", true],
                ["spark", true],
                ["workstation", false],
            ],
        );
        assert.deepEqual(
            parse(edited(THOR_B)).nodes.map((n) => n.unifiedMemory),
            [true, true],
        );
    });
});

// ---------------------------------------------------------------------------------------------
// A node that is gone: ssh.connectTimeoutSeconds, retired, and the cluster without the node
// ---------------------------------------------------------------------------------------------

describe("a node that is gone (nodes[].ssh.connectTimeoutSeconds, nodes[].retired)", () => {
    test("defaults: 60 s to reach a node over SSH, and no node retired", () => {
        const config = parse(base());
        assert.deepEqual(
            config.nodes.map((n) => [n.name, n.ssh.connectTimeoutSeconds, n.retired]),
            [
                ["spark-a", 60, false],
                ["spark-b", 60, false],
            ],
        );
    });

    test("both are per node, and a retired node stays in the plan (head, GPUs, peers as before)", () => {
        const config = parse(
            edited([
                ["nodes[1].ssh.connectTimeoutSeconds", 20],
                ["nodes[1].retired", true],
            ]),
        );
        assert.deepEqual(
            config.nodes.map((n) => [n.name, n.ssh.connectTimeoutSeconds, n.retired]),
            [
                ["spark-a", 60, false],
                ["spark-b", 20, true],
            ],
        );
        assert.equal(config.totalGpus, 2);
        assert.equal(config.model.tensorParallel, 2);
        assert.deepEqual(
            config.nodes[0].peers.map((p) => p.node),
            ["spark-b", "spark-b"],
        );
    });

    const refused: [string, unknown, RegExp][] = [
        ["nodes[0].ssh.connectTimeoutSeconds", 4, /^spark-cluster:nodes\[0\]\.ssh\.connectTimeoutSeconds: .*5/],
        ["nodes[0].ssh.connectTimeoutSeconds", 3601, /^spark-cluster:nodes\[0\]\.ssh\.connectTimeoutSeconds: .*3600/],
        ["nodes[0].ssh.connectTimeoutSeconds", 1.5, /^spark-cluster:nodes\[0\]\.ssh\.connectTimeoutSeconds: /],
        ["nodes[1].retired", "yes", /^spark-cluster:nodes\[1\]\.retired: /],
    ];
    for (const [path, value, expected] of refused) {
        test(`${path}: ${JSON.stringify(value)} is refused, naming the key`, () => {
            const error = parseError(edited([[path, value]]));
            assert.deepEqual(
                error.issues.map((i) => i.path),
                [path],
            );
            assert.match(error.message, expected);
        });
    }

    test("without the node that is gone, the validation says what to change", () => {
        // A pair cannot lose a node: a cluster needs two (finish it with pulumi destroy instead).
        const pair = base();
        pair.nodes = (pair.nodes as unknown[]).slice(0, 1);
        assert.match(parseError(pair).message, /^spark-cluster:nodes: must list at least 2 items/);

        // Three Sparks on a switch with TP=3, one gone: TP=3 no longer fits the two left.
        const spark = (name: string, host: string, last: number) => ({
            name,
            kind: "spark",
            ssh: { host },
            interconnect: [{ address: `192.168.100.${last}/24` }, { address: `192.168.101.${last}/24` }],
        });
        const trio = edited([
            ["interconnect", { topology: "switch" }],
            ["model.tensorParallel", 3],
        ]);
        trio.nodes = [...(trio.nodes as unknown[]), spark("spark-c", "10.0.0.13", 13)];
        assert.equal(parse(trio).nodes.length, 3, "three Sparks on a switch with TP=3 is fine");
        trio.nodes = (trio.nodes as unknown[]).filter((n) => (n as { name: string }).name !== "spark-b");
        const error = parseError(trio);
        assert.deepEqual(
            error.issues.map((i) => i.path),
            ["model.tensorParallel"],
        );
        assert.match(error.message, /asks for tensorParallel x pipelineParallel = 3 x 1 = 3 GPUs, but the cluster has 2 GPUs/);
        assert.match(error.issues[0].example, /tensorParallel: 2/);
    });
});

describe("first contact in config (issue 35): the sudo password, the take-over, GPUDirect on GB10", () => {
    test("sudoPassword is a secret, refused in plaintext and when every node logs in as root; resolved on a node with another user", () => {
        const plain = parseError({ ...base(), sudoPassword: "pass word" });
        assert.ok(plain.issues.some((i) => i.path === "sudoPassword" && /--secret/.test(i.message)));
        const unused = parseError({ ...base(), sudoPassword: "pass word" }, [...ALL_SECRET_KEYS, "sudoPassword"]);
        assert.ok(unused.issues.some((i) => i.path === "sudoPassword" && /every node logs in as root/.test(i.message)));
        const values = edited([["nodes.1.ssh.user", "nvidia"]]);
        const config = parse({ ...values, sudoPassword: "pass word 1" }, [...ALL_SECRET_KEYS, "sudoPassword"]);
        assert.equal(config.nodes[0].ssh.sudoPassword, undefined, "root needs no sudo password");
        assert.equal(config.nodes[1].ssh.sudoPassword?.reveal(), "pass word 1");
        assert.equal(String(config.nodes[1].ssh.sudoPassword), "[secret]");
        const lineBreak = parseError({ ...values, sudoPassword: "a\nb" }, [...ALL_SECRET_KEYS, "sudoPassword"]);
        assert.ok(lineBreak.issues.some((i) => i.path === "sudoPassword" && /one line/.test(i.message)));
    });

    test("a GPUDirect setting in nccl.overrides is refused on a cluster with a Spark (its GB10 has none), unless roce.peermem is true", () => {
        for (const [name, value] of [
            ["NCCL_NET_GDR_LEVEL", "PHB"],
            ["NCCL_DMABUF_ENABLE", "1"],
            ["NCCL_GDRCOPY_ENABLE", "1"],
            ["NCCL_NET_GDR_READ", "1"],
        ]) {
            const err = parseError({ ...base(), nccl: { overrides: { [name]: value } } });
            assert.ok(
                err.issues.some((i) => i.path === `nccl.overrides.${name}` && /GB10 does not support/.test(i.message)),
                name,
            );
            parse({ ...base(), nccl: { overrides: { [name]: value } }, roce: { peermem: true } });
        }
        parse({ ...base(), nccl: { overrides: { NCCL_NET_GDR_LEVEL: "LOC", NCCL_DMABUF_ENABLE: "0" } } });
    });
});
