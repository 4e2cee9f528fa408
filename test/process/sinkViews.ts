/**
 * A rendered program read back the way the nodes read it, for test/process/sinks.property.test.ts: every
 * resource of a render (test/process/sinkRender.ts) is decoded layer by layer with each sink's reader
 * (test/process/sinkParsers.ts) into a view, a tree whose strings are what the last reader of each place
 * gets; the readers that run as programs (systemd, docker, python, nft, bash) run in batches for
 * all renders at once. The comparison of a view with its template (substitute, differences) and
 * the config's own expectations of the parsed layers (the secrets, the NCCL settings, what vLLM
 * reads, the paths a node opens) live here too.
 */
import * as path from "node:path";
import * as yaml from "js-yaml";
import { Config } from "../../config";
import { SECRET_PURPOSES } from "../../components/clusterSecrets";
import { hostKeyFingerprint } from "../../components/hostKey";
import { SECRET_SIG, SECRET_SIG_KEY, mockDerivedSecret } from "../support/mockHarness";
import type { RenderResult, RenderedResource } from "./sinkRender";
import {
    DockerCreate,
    DockerRunRequest,
    EnvVars,
    FakeDockerDaemon,
    PythonRequest,
    ShellItem,
    SystemdUnit,
    bashCommandSubstitution,
    bashSyntaxErrors,
    bashWords,
    decodeRemoteCommand,
    lexShell,
    nftLoad,
    parseDockerEnvFile,
    parseDockerEnvFileEntries,
    parseNcclConf,
    parseSystemdEnvFile,
    pythonBatch,
    systemdEnvOracle,
    systemdLoadUnits,
    systemdReplaceEnvArgv,
    unitNameToPath,
    vllmStandInDir,
} from "./sinkParsers";

/** The repository root (the lab's vLLM stand-in lives under it). */
const ROOT = path.resolve(__dirname, "..", "..", "..");

// ---------------------------------------------------------------------------------------------
// Derived values
// ---------------------------------------------------------------------------------------------

/** The Ray token the nodes get: rayAuthToken, or the one derived from the (mocked) root secret. */
function rayToken(config: Config): string {
    return config.rayAuthToken?.reveal() ?? mockDerivedSecret(SECRET_PURPOSES.rayAuthToken, config.secretsGeneration);
}

/** Values the program derives from config values (secrets, fingerprints, the hub id's parts, the served name), by name. */
function derived(config: Config): Map<string, string> {
    const out = new Map<string, string>();
    // The internal secrets, derived from the mocked root secret (test/support/mockHarness.ts).
    out.set("rayToken", rayToken(config));
    out.set("syncSecret", mockDerivedSecret(SECRET_PURPOSES.modelSync(config.model.source), config.secretsGeneration));
    out.set("rayAuthToken", rayToken(config));
    // The hostKeys output: fingerprint and key type.
    config.nodes.forEach((node, i) => {
        if (node.ssh.hostKey) out.set(`hostKey${i}`, `${hostKeyFingerprint(node.ssh.hostKey)} (${node.ssh.hostKey.split(" ")[0]})`);
    });
    // A hub id's parts (the cache directory models--ORG--NAME).
    if (!config.model.source.startsWith("/")) {
        const [org, name] = config.model.source.split("/");
        out.set("org", org);
        out.set("name", name);
    }
    // Open WebUI's session key (WEBUI_SECRET_KEY), derived from the root secret.
    if (config.openWebui) out.set("webuiSecretKey", mockDerivedSecret(SECRET_PURPOSES.openWebuiSessionKey, config.secretsGeneration));
    // The served name (a local path's last segment when not given).
    out.set("servedName", config.model.servedName);
    return out;
}

/** The template's derived values: where they appear, a job's must. */
export function derivedFrom(template: Config): string[] {
    return [...derived(template).values()].filter((v) => v.length >= 6);
}

/** Each derived value of the template mapped to the job's. */
export function derivedPairs(template: Config, job: Config): [string, string][] {
    const theirs = derived(job);
    return [...derived(template)].flatMap(([name, value]): [string, string][] => {
        const other = theirs.get(name);
        return other !== undefined && other !== value && value.length >= 6 ? [[value, other]] : [];
    });
}

// ---------------------------------------------------------------------------------------------
// nft's JSON listing
// ---------------------------------------------------------------------------------------------

/** `a.b.c.d/len` as nft prints a prefix: the network address, then the length (a /32 as the address alone). */
export function ipv4Network(range: string): string {
    const [ip, len] = range.split("/");
    const bits = Number(len ?? 32);
    const n = ip.split(".").reduce((acc, octet) => acc * 256 + Number(octet), 0);
    const net = bits === 0 ? 0 : (n >>> (32 - bits)) * 2 ** (32 - bits);
    const text = [24, 16, 8, 0].map((shift) => Math.floor(net / 2 ** shift) % 256).join(".");
    return bits === 32 ? text : `${text}/${bits}`;
}

type NftJson = { nftables?: Record<string, { name?: string; elem?: unknown[]; expr?: { match?: { left?: unknown; right?: unknown } }[] }>[] } | undefined;

const nftValue = (v: unknown): string[] => {
    if (Array.isArray(v)) return v.flatMap(nftValue);
    if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        if (o.set) return nftValue(o.set);
        if (o.prefix) {
            const p = o.prefix as { addr: string; len: number };
            return [p.len === 32 ? p.addr : `${p.addr}/${p.len}`];
        }
        return [];
    }
    return [String(v)];
};

/** The elements of a named set in nft's JSON listing. */
export function nftElements(json: unknown, set: string): string[] {
    return ((json as NftJson)?.nftables ?? []).flatMap((entry) => (entry.set?.name === set ? nftValue(entry.set.elem ?? []) : []));
}

/** What rules match on `field` (`tcp dport`, `ip saddr`): every value of their sets. */
export function nftMatches(json: unknown, field: string): string[] {
    const [protocol, name] = field.split(" ");
    return ((json as NftJson)?.nftables ?? []).flatMap((entry) =>
        (entry.rule?.expr ?? []).flatMap((e) => {
            const left = e.match?.left as { payload?: { protocol: string; field: string } } | undefined;
            return left?.payload?.protocol === protocol && left.payload.field === name ? nftValue(e.match?.right) : [];
        }),
    );
}

// ---------------------------------------------------------------------------------------------
// Views: a rendered program read back layer by layer with each sink's reader
// ---------------------------------------------------------------------------------------------

/** A view: the parsed form of everything rendered. Strings are decoded values; the wrappers mark leaves that are not. */
export type View = string | number | boolean | null | View[] | { [key: string]: View };
/** Shell code or file text no reader decodes: a value may appear there only when it needs no quoting. */
export const CODE = "~code";
/** Text systemd shows a person (Description=): the renderer maps it to printable ASCII. */
export const TEXT = "~text";
/** Marks the reader of a subtree, for the `sinks=` of each key. */
export const SINK = "~sink";

/** Hashes of rendered content (heredoc delimiters, `# input …`, `# unit …`) change with any value: code leaves drop them. */
const code = (text: string): View => ({
    [CODE]: text.replace(/(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/g, "<sha256>").replace(/(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])/g, "<hash>"),
});
const sink = (name: string, view: View): View => ({ [SINK]: name, v: view });

/** What was found while reading a job back, beyond its view. */
export interface JobView {
    view: View;
    problems: string[];
    /** Files each node gets: heredoc bodies and stdin, by path. */
    files: Map<string, Map<string, string>>;
    /** Env files as their reader read them, by node and path. */
    env: Map<string, Map<string, EnvVars>>;
    /** The firewall as nft read it back, by node. */
    nft: Map<string, unknown>;
    /** Per resource: its inputs as rendered (JSON), and the files of its node its docker runs read. */
    raw: Map<string, { inputs: string; node?: string; reads: string[] }>;
}

/** Runs requests of one kind together: every request made before the next turn of the event loop goes in one batch. */
export class Batcher<Q, R> {
    readonly #cache = new Map<string, Promise<R>>();
    #queue: { req: Q; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
    constructor(private readonly runBatch: (reqs: Q[]) => Promise<R[]>) {}
    get(req: Q): Promise<R> {
        const k = JSON.stringify(req);
        let p = this.#cache.get(k);
        if (!p) {
            p = new Promise<R>((resolve, reject) => {
                if (this.#queue.length === 0) setImmediate(() => void this.#flush());
                this.#queue.push({ req, resolve, reject });
            });
            this.#cache.set(k, p);
        }
        return p;
    }
    async #flush(): Promise<void> {
        const batch = this.#queue;
        this.#queue = [];
        try {
            const results = await this.runBatch(batch.map((b) => b.req));
            batch.forEach((b, i) => b.resolve(results[i]));
        } catch (err) {
            batch.forEach((b) => b.reject(err));
        }
    }
}

/** Where the time goes (SPARK_PROPERTY_PROFILE=1 prints it). */
export const PROFILE = new Map<string, { calls: number; ms: number }>();
export async function timed<T>(what: string, work: () => Promise<T>): Promise<T> {
    const start = Date.now();
    try {
        return await work();
    } finally {
        const entry = PROFILE.get(what) ?? { calls: 0, ms: 0 };
        entry.calls++;
        entry.ms += Date.now() - start;
        PROFILE.set(what, entry);
    }
}

/** Every reader the views use, shared by all jobs (so that each runs in batches). */
export class Readers {
    readonly docker = new FakeDockerDaemon();
    readonly dockerRun = new Batcher<DockerRunRequest, DockerCreate | { error: string }>((requests) => timed("docker", () => this.docker.runAll(requests)));
    readonly systemd = new Batcher<string, SystemdUnit>(async (texts) => {
        const names = texts.map(() => `sinkprop-${this.#units++}.service`);
        const loaded = await timed("systemd", () => systemdLoadUnits(new Map(names.map((n, i) => [n, texts[i]]))));
        return names.map((n) => loaded.get(n) as SystemdUnit);
    });
    readonly python = new Batcher<PythonRequest, Record<string, unknown>>((reqs) => timed("python", () => pythonBatch(reqs, vllmStandInDir(ROOT))));
    readonly nft = new Batcher<string, { json: unknown } | { error: string }>((files) => timed("nft", () => nftLoad(files)));
    readonly commandSubstitution = new Batcher<string, string>((inputs) => timed("bash $(cat)", () => bashCommandSubstitution(inputs)));
    #units = 0;
    /** systemd's own reading of an env file the systemd port read: undefined when they agree. */
    readonly systemdEnvFile = new Batcher<string, string | undefined>((files) => timed("systemd env oracle", () => systemdEnvOracle(files)));
    /** What bash makes of a word (raw, as rendered). */
    readonly bashWord = new Batcher<string, string[]>((words) => timed("bash words", () => bashWords(words)));
    /** `bash -n` on a script: its syntax error, if any. */
    readonly bashSyntax = new Batcher<string, string | undefined>(async (scripts) => {
        const errors = await timed("bash -n", () => bashSyntaxErrors(scripts));
        return scripts.map((_, i) => errors.get(i));
    });
    readonly #lexed = new Map<string, ShellItem[]>();

    lex(script: string): ShellItem[] {
        let items = this.#lexed.get(script);
        if (!items) {
            items = lexShell(script);
            this.#lexed.set(script, items);
        }
        return items;
    }
}

export function isSecret(value: unknown): value is { value: unknown } {
    return typeof value === "object" && value !== null && (value as Record<string, unknown>)[SECRET_SIG_KEY] === SECRET_SIG;
}

function plain(value: unknown): unknown {
    if (isSecret(value)) return plain(value.value);
    if (Array.isArray(value)) return value.map(plain);
    if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
    return value;
}

/** The path a here-document is written to: `sc_install_file PATH MODE <<…` or `cat > PATH <<…`. */
function heredocPath(command: string): string {
    const install = /sc_install_file (\S+) \d+/.exec(command);
    if (install) return install[1].replace(/^'|'$/g, "");
    const cat = /cat > (\S+)/.exec(command);
    if (cat) return cat[1].replace(/^"|"$/g, "");
    return `?${command}`;
}

/** The longest argument execve takes (32 pages), with its NUL. */
export const MAX_ARG_STRLEN = 32 * 4096;

/** Why Linux cannot open `path` (PATH_MAX 4096 with its NUL, NAME_MAX 255), or undefined. */
export function pathTooLong(path: string): string | undefined {
    if (Buffer.byteLength(path, "utf8") > 4095) return `${Buffer.byteLength(path, "utf8")} bytes, more than PATH_MAX`;
    const long = path.split("/").find((name) => Buffer.byteLength(name, "utf8") > 255);
    return long === undefined ? undefined : `a name of ${Buffer.byteLength(long, "utf8")} bytes, more than NAME_MAX`;
}

/** Open WebUI's env file and unit (frontend.openWebui): they follow Open WebUI's runtime, not the node's. */
const OPEN_WEBUI_ENV = "/etc/spark-cluster/open-webui.env";
const OPEN_WEBUI_UNIT = /spark-cluster-open-webui\.service$/;
/** SGLang's root-only --config file (model.engine sglang): YAML, as SGLang reads it. */
const SGLANG_CONFIG = "/etc/spark-cluster/sglang.yaml";

function runtimeImage(config: Config, node: string | undefined, where: string): string | undefined {
    const runtime = OPEN_WEBUI_UNIT.test(where) ? config.openWebui?.runtime : config.nodes.find((n) => n.name === node)?.runtime;
    return runtime?.kind === "docker" ? runtime.image : undefined;
}

/**
 * The variables a file must hold as its reader reads them, from the config: the secrets (vllm.env,
 * ray.env) and the NCCL settings and address (runtime.env, nccl.conf); and vllm.env must not hold
 * the HF token.
 */
function expectedVars(config: Config, nodeName: string | undefined, file: string, vars: EnvVars, reader: string): string[] {
    const node = config.nodes.find((n) => n.name === nodeName);
    const want: Record<string, string> = {};
    const extra: string[] = [];
    if (file.endsWith("/vllm.env")) {
        // The API key alone: the HF token is the model download's (vLLM serves offline).
        want.VLLM_API_KEY = config.apiKey.reveal();
        if (vars.has("HF_TOKEN")) extra.push(`${nodeName}:${file}: ${reader} reads HF_TOKEN, which only the model download may have`);
    } else if (file.endsWith("/ray.env")) {
        want.RAY_AUTH_TOKEN = rayToken(config);
    } else if (file === OPEN_WEBUI_ENV && config.openWebui) {
        const ui = config.openWebui;
        want.OPENAI_API_KEYS = config.apiKey.reveal();
        want.WEBUI_ADMIN_EMAIL = ui.adminEmail;
        want.WEBUI_ADMIN_NAME = ui.adminName;
        want.WEBUI_ADMIN_PASSWORD = ui.adminPassword.reveal();
        // The image's DATA_DIR is its own (the data directory is mounted there); its start.sh reads HOST.
        if (ui.runtime.kind === "venv") {
            want.DATA_DIR = ui.dataDir;
            want.STATIC_DIR = `${ui.dataDir}/static`;
        } else want.HOST = ui.listenAddress;
    } else if (file === SGLANG_CONFIG) {
        want["api-key"] = config.apiKey.reveal();
    } else if (file.endsWith("/runtime.env") || file === "/etc/nccl.conf") {
        Object.assign(want, config.nccl.overrides);
        want.NCCL_DEBUG = config.nccl.debug;
        if (config.nccl.socketIfname !== undefined) want.NCCL_SOCKET_IFNAME = config.nccl.socketIfname;
        if (config.transport === "roce" && config.nccl.ibHca !== undefined) want.NCCL_IB_HCA = config.nccl.ibHca.join(",");
        if (file.endsWith("/runtime.env") && node) want.VLLM_HOST_IP = node.ip;
    }
    return [
        ...extra,
        ...Object.entries(want)
            .filter(([k, v]) => vars.get(k) !== v)
            .map(
                ([k, v]) =>
                    `${nodeName}:${file}: ${reader} reads ${k} as ${JSON.stringify(vars.get(k))?.slice(0, 200)}, not ${JSON.stringify(v).slice(0, 200)}`,
            ),
    ];
}

/**
 * Reads one rendered job back: every resource, every layer. With `template` given, a resource
 * rendered exactly as in the template (and whose docker runs read the same files) keeps the
 * template's view: the same object, so the comparison skips it.
 */
export async function readJob(result: RenderResult, config: Config, readers: Readers, template?: JobView): Promise<JobView> {
    const problems: string[] = [];
    const raw = new Map<string, { inputs: string; node?: string; reads: string[] }>();
    const files = new Map<string, Map<string, string>>();
    const env = new Map<string, Map<string, EnvVars>>();
    const nft = new Map<string, unknown>();
    const nodeOf = new Map(config.nodes.map((n) => [`${n.ssh.host}:${n.ssh.port}`, n]));
    const fileOf = (node: string) => files.get(node) ?? (files.set(node, new Map()), files.get(node) as Map<string, string>);
    if (result.errors.length > 0) problems.push(`rendering failed: ${result.errors.join("; ")}`);
    /** Checks by bash (syntax, quoted words) and systemd (env files), run together for every job. */
    const pending: Promise<void>[] = [];
    const checkWord = (raw: string, text: string) =>
        pending.push(
            readers.bashWord.get(raw).then((got) => {
                if (got.length !== 1 || got[0] !== text)
                    problems.push(
                        `bash reads ${raw.slice(0, 160)} as ${JSON.stringify(got).slice(0, 160)}, not one word ${JSON.stringify(text).slice(0, 160)}`,
                    );
            }),
        );

    // First pass: decode the command lines, lex the scripts, collect each node's files.
    interface Decoded {
        resource: RenderedResource;
        node?: string;
        scripts: Record<string, { comments: string[]; sudo: boolean; items: ShellItem[] }>;
        stdin?: string;
        stdinPath?: string;
    }
    const decoded: Decoded[] = [];
    for (const resource of result.resources) {
        const inputs = plain(resource.inputs) as Record<string, unknown>;
        if (resource.type !== "spark-remote:index:Step") {
            decoded.push({ resource, scripts: {} });
            continue;
        }
        const connection = inputs.connection as { host: string; port: number };
        const node = nodeOf.get(`${connection.host}:${connection.port}`)?.name;
        if (!node) problems.push(`${resource.name}: its connection ${connection.host}:${connection.port} is no node's`);
        const entry: Decoded = { resource, node, scripts: {} };
        // Rendered as in the template: checked there already.
        const unchanged = template?.raw.get(resource.name)?.inputs === JSON.stringify(resource.inputs);
        // `read`: what a refresh runs (components/render/host/read.ts), set by a transformation.
        for (const field of ["create", "delete", "read"] as const) {
            const text = inputs[field];
            if (typeof text !== "string" || text === "") continue;
            // sshd hands the command line to the login shell as one argument: the kernel's limit.
            if (Buffer.byteLength(text, "utf8") >= MAX_ARG_STRLEN) {
                problems.push(
                    `${resource.name}.${field}: the command line is ${Buffer.byteLength(text, "utf8")} bytes, more than the kernel passes in one argument (MAX_ARG_STRLEN, 128 KiB)`,
                );
            }
            try {
                const remote = decodeRemoteCommand(text);
                const where = `${resource.name}.${field}`;
                if (!unchanged) {
                    checkWord(remote.quoted, remote.word);
                    pending.push(
                        readers.bashSyntax.get(remote.script).then((error) => {
                            if (error !== undefined) problems.push(`${where}: bash -n refuses the script: ${error}`);
                        }),
                    );
                }
                const items = readers.lex(remote.script);
                entry.scripts[field] = { comments: remote.comments, sudo: remote.sudo, items };
                for (const item of items) {
                    if (item.kind === "heredoc" && node) fileOf(node).set(heredocPath(item.command), item.body);
                    if (unchanged) continue;
                    if (item.kind === "word" && /['"]/.test(item.raw)) checkWord(item.raw, item.text);
                    if (item.kind === "mixed") for (const part of item.parts) if ("raw" in part && /['"]/.test(part.raw)) checkWord(part.raw, part.text);
                }
                const fromStdin = /^result=\$\(sc_install_file (\S+) \d+\)$/m.exec(remote.script);
                if (field === "create" && fromStdin && typeof inputs.stdin === "string" && node) {
                    entry.stdinPath = fromStdin[1];
                    fileOf(node).set(fromStdin[1], inputs.stdin);
                }
            } catch (err) {
                problems.push(`${resource.name}.${field}: ${(err as Error).message}`);
            }
        }
        if (typeof inputs.stdin === "string") entry.stdin = inputs.stdin;
        decoded.push(entry);
    }

    const readerOf = (node: string | undefined) => (config.nodes.find((n) => n.name === node)?.runtime.kind === "docker" ? "docker" : "systemd");
    const envView = (text: string, node: string | undefined, where: string): View => {
        if (where === SGLANG_CONFIG) return sglangConfigView(text, node);
        // Open WebUI's env file is read by its own runtime: docker's --env-file or systemd's EnvironmentFile=.
        const reader = where === OPEN_WEBUI_ENV ? (config.openWebui?.runtime.kind === "docker" ? "docker" : "systemd") : readerOf(node);
        try {
            const vars = reader === "docker" ? parseDockerEnvFile(text) : parseSystemdEnvFile(text);
            if (reader === "systemd") {
                pending.push(
                    readers.systemdEnvFile.get(text).then((verdict) => {
                        if (verdict) problems.push(`${node}:${where}: ${verdict}`);
                    }),
                );
            }
            if (node) (env.get(node) ?? (env.set(node, new Map()), env.get(node) as Map<string, EnvVars>)).set(where, vars);
            problems.push(...expectedVars(config, node, where, vars, reader));
            return sink(`env:${reader}`, Object.fromEntries(vars));
        } catch (err) {
            problems.push(`${node}:${where}: ${reader} refuses the file: ${(err as Error).message}`);
            return sink(`env:${reader}`, null);
        }
    };

    // SGLang reads its --config file as YAML (a mapping of flag names): js-yaml's core schema, as PyYAML's safe_load types scalars.
    const sglangConfigView = (text: string, node: string | undefined): View => {
        try {
            const loaded = yaml.load(text) as Record<string, unknown>;
            const vars: EnvVars = new Map(Object.entries(loaded ?? {}).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]));
            problems.push(...expectedVars(config, node, SGLANG_CONFIG, vars, "YAML"));
            return sink("sglang-yaml", Object.fromEntries(vars));
        } catch (err) {
            problems.push(`${node}:${SGLANG_CONFIG}: not YAML: ${(err as Error).message}`);
            return sink("sglang-yaml", null);
        }
    };

    const vllmView = async (argv: string[], where: string): Promise<View> => {
        const parsed = await readers.python.get({ kind: "vllm", argv, extra: config.model.extraArgs.length });
        if (parsed.error) problems.push(`${where}: vLLM's parser refuses the argv: ${String(parsed.error)}`);
        if (Array.isArray(parsed.overridden) && parsed.overridden.length > 0) {
            problems.push(
                `${where}: model.extraArgs ${JSON.stringify(config.model.extraArgs)} override ${parsed.overridden.join(", ")}, which the project renders`,
            );
        }
        if (parsed.tailErrorNamesOurs) problems.push(`${where}: vLLM refuses model.extraArgs naming a flag the project renders: ${String(parsed.tailError)}`);
        // What vLLM reads must be the config's, byte for byte.
        const dests = (parsed.dests ?? {}) as Record<string, unknown>;
        const model = config.model;
        const want: [string, unknown][] = [
            ["model_tag", model.source],
            ["served_model_name", [model.servedName]],
            ...(model.quantization !== undefined ? [["quantization", model.quantization] as [string, unknown]] : []),
            ...(model.kvCacheDtype !== undefined ? [["kv_cache_dtype", model.kvCacheDtype] as [string, unknown]] : []),
            ...(model.attentionBackend !== undefined ? [["attention_backend", model.attentionBackend] as [string, unknown]] : []),
            ...("host" in dests ? [["host", model.apiHost] as [string, unknown]] : []),
        ];
        for (const [dest, value] of want) {
            if (parsed.dests && JSON.stringify(dests[dest]) !== JSON.stringify(value))
                problems.push(`${where}: vLLM reads ${dest} as ${JSON.stringify(dests[dest])}, not ${JSON.stringify(value)}`);
        }
        const tail = argv.slice(argv.length - model.extraArgs.length);
        if (model.extraArgs.length > 0 && JSON.stringify(tail) !== JSON.stringify(model.extraArgs))
            problems.push(`${where}: vLLM gets ${JSON.stringify(tail)} for model.extraArgs ${JSON.stringify(model.extraArgs)}`);
        return sink("vllm-argv", (parsed.dests ?? null) as View);
    };

    const unitView = async (text: string, node: string | undefined, where: string, reads: string[]): Promise<View> => {
        const unit = await readers.systemd.get(text);
        if (unit.loadState !== "loaded") problems.push(`${where}: systemd did not load the unit (${unit.loadState})`);
        for (const w of unit.warnings) problems.push(`${where}: systemd: ${w}`);
        const exec: Record<string, View> = {};
        for (const [kind, commands] of Object.entries(unit.exec)) {
            exec[kind] = await Promise.all(
                commands.map(async (raw) => {
                    const argv = systemdReplaceEnvArgv(raw);
                    const out: Record<string, View> = { execPath: raw[0] ?? null, argv: sink("systemd-exec", argv) };
                    // A venv unit runs the venv's own program.
                    const runtime = config.nodes.find((n) => n.name === node)?.runtime;
                    const served = /spark-cluster-(vllm|ray)\.service$/.test(where);
                    if (served && kind === "ExecStart" && runtime?.kind === "venv" && !(raw[0] ?? "").startsWith(`${runtime.path}/bin/`)) {
                        problems.push(`${where}: systemd runs ${JSON.stringify(raw[0])}, not a program of the venv ${JSON.stringify(runtime.path)}`);
                    }
                    const ui = config.openWebui?.runtime;
                    if (OPEN_WEBUI_UNIT.test(where) && kind === "ExecStart" && ui?.kind === "venv" && raw[0] !== `${ui.path}/bin/open-webui`) {
                        problems.push(`${where}: systemd runs ${JSON.stringify(raw[0])}, not Open WebUI of the venv ${JSON.stringify(ui.path)}`);
                    }
                    if (argv[0] === "/usr/bin/docker" && argv[1] === "run") {
                        const nodeFiles = files.get(node ?? "") ?? new Map<string, string>();
                        reads.push(...argv.filter((_, i) => argv[i - 1] === "--env-file"));
                        // The files the args name, only (a request is the key of a cache).
                        const named = Object.fromEntries(argv.filter((_, i) => argv[i - 1] === "--env-file").map((p) => [p, nodeFiles.get(p) ?? ""]));
                        const created = await readers.dockerRun.get({ args: argv.slice(1), files: named });
                        if ("error" in created) {
                            problems.push(`${where}: ${created.error}`);
                            out.docker = null;
                        } else {
                            // docker's own reading of the env files must be the port's.
                            const expected: string[] = [];
                            argv.forEach((arg, i) => {
                                if (argv[i - 1] === "--env-file") {
                                    const file = nodeFiles.get(arg);
                                    if (file === undefined) problems.push(`${where}: --env-file ${arg} is not a file this node gets`);
                                    else expected.push(...parseDockerEnvFileEntries(file).map(([k, v]) => `${k}=${v}`));
                                }
                                if (argv[i - 1] === "-e") expected.push(arg);
                            });
                            // docker builds the list through a map: its order says nothing (nor does Binds').
                            if (JSON.stringify([...expected].sort()) !== JSON.stringify([...created.env].sort())) {
                                problems.push(
                                    `${where}: docker reads the env files (${JSON.stringify(argv)}) as ${JSON.stringify(created.env)}, the port as ${JSON.stringify(expected)}`,
                                );
                            }
                            if (runtimeImage(config, node, where) !== created.image)
                                problems.push(
                                    `${where}: docker runs the image ${JSON.stringify(created.image)}, not ${JSON.stringify(runtimeImage(config, node, where))}`,
                                );
                            out.docker = sink("docker-run", {
                                image: created.image,
                                cmd: created.cmd,
                                entrypoint: created.entrypoint,
                                // Keyed, not listed: docker's order says nothing.
                                env: Object.fromEntries(created.env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)])),
                                binds: Object.fromEntries(created.binds.map((b) => [b, true])),
                            });
                            if (created.cmd[0] === "vllm" && created.cmd[1] === "serve") out.vllm = await vllmView(created.cmd.slice(1), where);
                        }
                    } else if (argv[0]?.endsWith("/bin/vllm") && argv[1] === "serve") {
                        out.vllm = await vllmView(argv.slice(1), where);
                    }
                    return out;
                }),
            );
        }
        const opaque = text
            .split("\n")
            .filter((line) => !/^(Exec[A-Za-z]*|Description|Environment|EnvironmentFile|Wants|After|Requires|Before)=/.test(line))
            .map((line) => code(line));
        return sink("systemd-unit", {
            description: { [TEXT]: unit.description ?? "" },
            environment: unit.environment,
            environmentFiles: unit.environmentFiles,
            // systemd lists dependencies in hash order.
            dependencies: unit.dependencies.map((d) => d.replace(/sys-subsystem-net-devices-\S+\.device/g, (name) => `device:${unitNameToPath(name)}`)).sort(),
            exec,
            opaque,
        });
    };

    const fileView = async (filePath: string, body: string, node: string | undefined, where: string, reads: string[]): Promise<View> => {
        if (/^\/etc\/systemd\/system\/.*\.service$/.test(filePath)) return unitView(body, node, where, reads);
        // The firewall's drop-ins on our units: constant text, no value of the config in it.
        if (/^\/etc\/systemd\/system\/[^/]+\.service\.d\/[^/]+\.conf$/.test(filePath)) return code(body);
        if (filePath.endsWith("/prometheus.yml")) {
            // Prometheus reads it as YAML (gopkg.in/yaml): js-yaml's core schema reads the same scalars.
            try {
                return sink("prometheus-yaml", yaml.load(body) as View);
            } catch (err) {
                problems.push(`${where}: not YAML: ${(err as Error).message}`);
                return null;
            }
        }
        if (filePath.startsWith("/etc/netplan/")) {
            try {
                return sink("netplan-yaml", yaml.load(body, { schema: yaml.FAILSAFE_SCHEMA }) as View);
            } catch (err) {
                problems.push(`${where}: not YAML: ${(err as Error).message}`);
                return null;
            }
        }
        if (filePath === "/etc/nccl.conf") {
            const vars = parseNcclConf(body);
            problems.push(...expectedVars(config, node, filePath, vars, "NCCL"));
            return sink("nccl.conf", Object.fromEntries(vars));
        }
        if (filePath.endsWith(".env")) return envView(body, node, filePath);
        if (filePath.endsWith(".nft")) {
            const loaded = await readers.nft.get(body);
            if ("error" in loaded) problems.push(`${where}: nft refuses the rules: ${loaded.error}`);
            else if (node) nft.set(node, loaded.json);
            // Handles count the tables nft made in its namespace so far: not the file's.
            return sink(
                "nft",
                "json" in loaded ? (JSON.parse(JSON.stringify(loaded.json, (k, v: unknown) => (k === "handle" ? undefined : v))) as View) : null,
            );
        }
        if (filePath.endsWith("chat-probe.py") || filePath.endsWith("open-webui-probe.py")) {
            const tree = await readers.python.get({ kind: "ast", source: body });
            if (tree.error) problems.push(`${where}: not Python: ${String(tree.error)}`);
            return sink("python", (tree.tree ?? null) as View);
        }
        if (filePath.endsWith("rsyncd.conf")) {
            // rsync's params.c: `[module]` or `name = value`, white space around both trimmed.
            return sink(
                "rsyncd.conf",
                body.split("\n").map((line) => {
                    const m = /^\s*([^=#]+?)\s*=\s*([^\n]*?)\s*$/.exec(line);
                    return m ? [m[1], m[2]] : code(line);
                }),
            );
        }
        if (filePath.endsWith("nccl_check.py") || filePath.startsWith("/etc/modules-load.d/")) return code(body);
        if (filePath.startsWith("?python3 - ")) {
            // A program fed to python3 on stdin (the first-contact probe's netplan lister): our code, parsed.
            const tree = await readers.python.get({ kind: "ast", source: body });
            if (tree.error) problems.push(`${where}: not Python: ${String(tree.error)}`);
            return code(body);
        }
        problems.push(`${where}: a file this test has no reader for: ${filePath}`);
        return code(body);
    };

    const itemsView = async (items: ShellItem[], node: string | undefined, where: string, reads: string[]): Promise<View> =>
        Promise.all(
            items.map(async (item): Promise<View> => {
                // A read-back's SHA-256 of a file's content: the content itself is checked where the create script writes it.
                if (item.kind === "word" && /^[0-9a-f]{64}$/.test(item.text) && where.endsWith(".read")) return sink("bash-word", "<sha256>");
                if (item.kind === "word") return sink("bash-word", item.text);
                if (item.kind === "code") return code(item.text);
                if (item.kind === "mixed") return { mixed: item.parts.map((part) => ("code" in part ? code(part.code) : sink("bash-word", part.text))) };
                const filePath = heredocPath(item.command);
                return { heredoc: await fileView(filePath, item.body, node, `${where} ${filePath}`, reads) };
            }),
        );

    // Second pass: the views.
    const view: Record<string, View> = { [SINK]: "resource-name" };
    await Promise.all(
        decoded.map(async (entry) => {
            const { resource, node } = entry;
            const inputs = plain(resource.inputs) as Record<string, unknown>;
            const rendered = JSON.stringify(resource.inputs);
            const before = template?.raw.get(resource.name);
            if (
                template &&
                before?.inputs === rendered &&
                before.node === node &&
                before.reads.every((path) => template.files.get(node ?? "")?.get(path) === files.get(node ?? "")?.get(path))
            ) {
                view[resource.name] = (template.view as Record<string, View>)[resource.name];
                raw.set(resource.name, before);
                return;
            }
            const reads: string[] = [];
            raw.set(resource.name, { inputs: rendered, node, reads });
            if (resource.type !== "spark-remote:index:Step") {
                view[resource.name] = resource.type;
                return;
            }
            const out: Record<string, View> = {};
            for (const [field, script] of Object.entries(entry.scripts)) {
                out[field] = sink("bash", {
                    comments: script.comments.map(code),
                    sudo: script.sudo,
                    items: await itemsView(script.items, node, `${resource.name}.${field}`, reads),
                });
            }
            const connection = inputs.connection as Record<string, unknown>;
            out.connection = sink("ssh-connection", connection as View);
            // A trigger is a value (the model id) or a content hash (a readiness step's unit).
            if (Array.isArray(inputs.triggers))
                out.triggers = (inputs.triggers as View[]).map((t) => (typeof t === "string" && /^[0-9a-f]{16}$/.test(t) ? "<hash>" : t));
            if (entry.stdin !== undefined) {
                if (entry.stdinPath) out.stdin = envView(entry.stdin, node, entry.stdinPath);
                else {
                    // `token=$(cat)` / `secret=$(cat)`: what the script's variable holds.
                    const held = await readers.commandSubstitution.get(entry.stdin);
                    if (held !== entry.stdin) problems.push(`${resource.name}: $(cat) reads its stdin as ${JSON.stringify(held)}`);
                    out.stdin = sink("stdin", held);
                }
            }
            view[resource.name] = out;
        }),
    );
    view["(outputs)"] = sink("output", result.outputs as View);

    // The readiness probe is a client: it reads the key back with its own reader and sends it.
    await Promise.all(
        config.nodes.map(async (node) => {
            const probe = files.get(node.name)?.get("$SC_STATE/chat-probe.py");
            const secrets = files.get(node.name)?.get("/etc/spark-cluster/vllm.env");
            if (probe === undefined || secrets === undefined) return;
            const read = await readers.python.get({ kind: "read", source: probe, function: "read_env_value", file: secrets, args: ["VLLM_API_KEY"] });
            if (read.value !== config.apiKey.reveal())
                problems.push(`${node.name}: the readiness probe reads the API key as ${JSON.stringify(read.value ?? read.error)}`);
            const header = await readers.python.get({ kind: "header", key: config.apiKey.reveal() });
            if (header.value !== config.apiKey.reveal())
                problems.push(`${node.name}: the API key cannot go out in an HTTP header as configured: ${String(header.error)}`);
            const token = config.hfToken?.reveal();
            if (token !== undefined) {
                const sent = await readers.python.get({ kind: "header", key: token });
                if (sent.value !== token) problems.push(`the hub client cannot send the HF token in an HTTP header as configured: ${String(sent.error)}`);
            }
        }),
    );
    // Open WebUI's probe signs in as the admin: it reads the email and password back with its own reader.
    if (config.openWebui) {
        const ui = config.openWebui;
        const probe = files.get(ui.node)?.get("$SC_STATE/open-webui-probe.py");
        const envFile = files.get(ui.node)?.get(OPEN_WEBUI_ENV);
        if (probe === undefined || envFile === undefined) problems.push(`${ui.node}: Open WebUI is on, but its probe or ${OPEN_WEBUI_ENV} is not rendered`);
        else
            for (const [name, value] of [
                ["WEBUI_ADMIN_EMAIL", ui.adminEmail],
                ["WEBUI_ADMIN_PASSWORD", ui.adminPassword.reveal()],
            ]) {
                const read = await readers.python.get({ kind: "read", source: probe, function: "read_env_value", file: envFile, args: [name] });
                if (read.value !== value) problems.push(`${ui.node}: Open WebUI's probe reads ${name} as ${JSON.stringify(read.value ?? read.error)}`);
            }
    }
    // Paths the nodes open: the kernel's limits.
    const paths: [string, string][] = [
        ...(config.model.source.startsWith("/") ? [["model.source", config.model.source] as [string, string]] : []),
        ...config.nodes.flatMap((n): [string, string][] => (n.runtime.kind === "venv" ? [[`${n.name}'s venv`, `${n.runtime.path}/bin/python`]] : [])),
    ];
    for (const [what, p] of paths) {
        const why = pathTooLong(p);
        if (why) problems.push(`${what} cannot be opened on a node: ${why}`);
    }
    // A hub id goes to the hub client (hf download, vLLM): it must take it.
    if (!config.model.source.startsWith("/")) {
        const checked = await readers.python.get({ kind: "repo-id", id: config.model.source });
        if (checked.error) problems.push(`huggingface_hub refuses the model id ${JSON.stringify(config.model.source)}: ${String(checked.error)}`);
    }
    // The NCCL check reads runtime.env with its own reader (venv nodes).
    await Promise.all(
        config.nodes.map(async (node) => {
            const check = files.get(node.name)?.get("/var/lib/spark-cluster/check/nccl_check.py");
            const runtimeEnv = files.get(node.name)?.get("/etc/spark-cluster/runtime.env");
            if (check === undefined || runtimeEnv === undefined) return;
            const reader = readerOf(node.name);
            const read = await readers.python.get({ kind: "read", source: check, function: "load_env_file", file: runtimeEnv, args: [reader] });
            const expected = Object.fromEntries(reader === "docker" ? parseDockerEnvFile(runtimeEnv) : parseSystemdEnvFile(runtimeEnv));
            if (JSON.stringify(read.value) !== JSON.stringify(expected))
                problems.push(`${node.name}: nccl_check.py reads runtime.env as ${JSON.stringify(read.value ?? read.error)}`);
        }),
    );
    await Promise.all(pending);
    return { view, problems, files, env, nft, raw };
}

// ---------------------------------------------------------------------------------------------
// Substitution and comparison
// ---------------------------------------------------------------------------------------------

/** Characters a value may have to appear raw in shell code: those shellQuote leaves bare. */
const NEEDS_NO_QUOTING = /^[A-Za-z0-9_@%+=:,./-]*$/;
/** What systemdText() makes of a value in Description=. */
const asDescription = (value: string) => value.replace(/[^\x20-\x7e]/g, "?").replace(/\\/g, "/");

function escapeRegExp(text: string): string {
    return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** For each object of a view: which of `needles` occur anywhere in it (keys included). */
export function containment(view: View, needles: readonly string[]): WeakMap<object, Set<string>> {
    const out = new WeakMap<object, Set<string>>();
    const walk = (v: View): Set<string> => {
        if (typeof v === "string") return new Set(needles.filter((n) => v.includes(n)));
        if (v === null || typeof v !== "object") return new Set();
        const found = new Set<string>();
        if (Array.isArray(v)) for (const x of v) for (const n of walk(x)) found.add(n);
        else
            for (const [k, x] of Object.entries(v)) {
                for (const n of needles) if (k.includes(n)) found.add(n);
                for (const n of walk(x)) found.add(n);
            }
        out.set(v, found);
        return found;
    };
    walk(view);
    return out;
}

/**
 * The template's view with each sentinel (and derived value) replaced by the job's. Objects that
 * hold none of them are returned as they are (the same object).
 */
export function substitute(view: View, pairs: readonly [string, string][], contains: WeakMap<object, Set<string>>): View {
    if (pairs.length === 0) return view;
    const map = new Map(pairs);
    const regex = new RegExp(
        [...map.keys()]
            .sort((a, b) => b.length - a.length)
            .map(escapeRegExp)
            .join("|"),
        "g",
    );
    const full = (text: string) => text.replace(regex, (m) => map.get(m) as string);
    const walk = (v: View): View => {
        if (typeof v === "string") return full(v);
        if (v === null || typeof v !== "object") return v;
        const holds = contains.get(v);
        if (holds && ![...map.keys()].some((k) => holds.has(k))) return v;
        if (Array.isArray(v)) return v.map(walk);
        if (CODE in v) return { [CODE]: (v[CODE] as string).replace(regex, (m) => (NEEDS_NO_QUOTING.test(map.get(m) as string) ? (map.get(m) as string) : m)) };
        if (TEXT in v) return { [TEXT]: (v[TEXT] as string).replace(regex, (m) => asDescription(map.get(m) as string)) };
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k === SINK ? k : full(k), k === SINK ? x : walk(x)]));
    };
    return walk(view);
}

function same(a: View, b: View): boolean {
    if (a === b) return true;
    if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
    if (a === null || b === null || typeof a !== "object" || typeof b !== "object" || Array.isArray(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && same(a[k], b[k]));
}

/** Where two views differ (at most `limit`), as `[reader] path: expected …, got …`. */
export function differences(expected: View, got: View, at = "", out: string[] = [], limit = 6, reader = "?"): string[] {
    if (out.length >= limit || same(expected, got)) return out;
    if (Array.isArray(expected) && Array.isArray(got) && expected.length === got.length) {
        expected.forEach((e, i) => differences(e, got[i], `${at}[${i}]`, out, limit, reader));
        return out;
    }
    if (expected && got && typeof expected === "object" && typeof got === "object" && !Array.isArray(expected) && !Array.isArray(got)) {
        const here = typeof expected[SINK] === "string" ? (expected[SINK] as string) : CODE in expected ? `${reader}(raw)` : reader;
        const keys = new Set([...Object.keys(expected), ...Object.keys(got)]);
        for (const k of keys) differences(expected[k] ?? null, got[k] ?? null, `${at}/${k}`, out, limit, here);
        return out;
    }
    const show = (v: View) => {
        const text = JSON.stringify(v) ?? "undefined";
        return text.length > 300 ? `${text.slice(0, 300)}…` : text;
    };
    out.push(`[${reader}] ${at}: expected ${show(expected)}, got ${show(got)}`);
    return out;
}

/**
 * The readers (sink names) under which a job's view holds a string equal to `value` where the
 * template's does not: where a value without a sentinel landed.
 */
export function sinksNew(template: View, view: View, value: string, current = "?", out = new Set<string>()): Set<string> {
    if (typeof view === "string") {
        if (view === value && template !== value) out.add(current);
    } else if (Array.isArray(view)) {
        view.forEach((v, i) => sinksNew(Array.isArray(template) ? template[i] : null, v, value, current, out));
    } else if (view !== null && typeof view === "object" && view !== template) {
        if (CODE in view || TEXT in view) return out;
        const here = typeof view[SINK] === "string" ? (view[SINK] as string) : current;
        const before = template !== null && typeof template === "object" && !Array.isArray(template) ? template : {};
        for (const [k, v] of Object.entries(view)) if (k !== SINK) sinksNew(before[k] ?? null, v, value, here, out);
    }
    return out;
}

/** The readers (sink names) under which a string holding `needle` appears. */
export function sinksHolding(view: View, needle: string, current = "?", out = new Set<string>()): Set<string> {
    if (typeof view === "string") {
        if (view.includes(needle)) out.add(current);
    } else if (Array.isArray(view)) {
        for (const v of view) sinksHolding(v, needle, current, out);
    } else if (view !== null && typeof view === "object") {
        if (CODE in view) {
            if ((view[CODE] as string).includes(needle)) out.add(`${current}(raw)`);
            return out;
        }
        if (TEXT in view) {
            if ((view[TEXT] as string).includes(needle)) out.add("systemd-text");
            return out;
        }
        const here = typeof view[SINK] === "string" ? (view[SINK] as string) : current;
        for (const [k, v] of Object.entries(view)) {
            if (k === SINK) continue;
            if (k.includes(needle)) out.add(here);
            sinksHolding(v, needle, here, out);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------------------------

/**
 * A secret's plaintext may only be in inputs marked secret (stdin, the connection). A place whose
 * text in `baseline` (the same variant's template, with a sentinel for the secret) already holds the
 * value is not a leak: the value is a word of our own script there (seed 1496472608 drew
 * "arguments", which the NCCL check's Python holds). Places are matched by the resource's position
 * and type, since a drawn node name renames the resources.
 */
export function secretsInPlaintext(value: string, rendered: RenderResult, baseline?: RenderResult): string[] {
    if (value.length < 8) return [];
    type Each = (place: string, text: string, secret: boolean) => void;
    const walk = (v: unknown, place: string, secret: boolean, each: Each): void => {
        if (isSecret(v)) return walk(v.value, place, true, each);
        if (typeof v === "string") each(place, v, secret);
        else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${place}[${i}]`, secret, each));
        else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, `${place}.${k}`, secret, each);
    };
    const placeOf = (r: RenderedResource, i: number) => `#${i}:${r.type}`;
    const already = new Set<string>();
    baseline?.resources.forEach((r, i) => walk(r.inputs, placeOf(r, i), false, (place, text) => text.includes(value) && already.add(place)));
    const found: string[] = [];
    rendered.resources.forEach((r, i) =>
        walk(r.inputs, placeOf(r, i), false, (place, text, secret) => {
            if (!secret && text.includes(value) && !already.has(place)) found.push(r.name + place.slice(placeOf(r, i).length));
        }),
    );
    walk(rendered.outputs, "(outputs)", false, (place, text, secret) => {
        if (!secret && text.includes(value)) found.push(place);
    });
    return found.map((at) => `the secret is in plaintext at ${at}`);
}
