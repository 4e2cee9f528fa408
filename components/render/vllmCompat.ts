// Can each node's vLLM run what we render, and do the nodes agree? Decided from what the vLLM
// probes found (render/probe.ts `vllmProbe`), before anything changes on any node: the cluster's runtime check
// step (components/sparkCluster.ts) runs the script rendered here, and every host layer of every
// node waits for it.
import type { Runtime } from "../../config";
import { VLLM_FLAG_VERSIONS, compareVllmVersions, flagAccepted, parseVllmVersion } from "../../config/vllmFlags";
import { runtimeStrategy } from "./host/runtime";
import { bashScript, shellQuote } from "./host/shell";
import { type EngineProbeResult, runtimeLabel } from "./probe";

/** What the flag tables say of one flag for one version. */
export type FlagAnswer = "accepted" | "refused" | "unknown";

/** The per-version flag tables the project ships (config/vllmFlags.ts), as this check reads them. */
export interface FlagTables {
    /** The versions with a table, oldest first. */
    versions: readonly string[];
    /** Whether `vllm serve` of `version` (one of {@link versions}) accepts `flag` (a `--long` spelling). */
    accepts(version: string, flag: string): boolean;
    /** Compares two versions (both {@link publicVersion}s): negative when a is older. */
    compare(a: string, b: string): number;
    /** The public version: `0.31.0+lab.standin` → `0.31.0`; undefined for text that is not a version. */
    publicVersion(version: string): string | undefined;
}

/**
 * The tables the project ships (config/vllmFlags/, generated from each release's own argument
 * definitions). A version that is not a version (unparsable) compares as text and matches no table.
 */
export const SHIPPED_FLAG_TABLES: FlagTables = {
    versions: VLLM_FLAG_VERSIONS,
    accepts: flagAccepted,
    compare: compareVllmVersions,
    publicVersion: (v) => parseVllmVersion(v)?.public,
};

/** One node as the check sees it: its runtime, what its probe found and the argv we render for it. */
export interface NodeVllm {
    node: string;
    runtime: Runtime;
    probe: EngineProbeResult;
    /** `vllm serve …` as rendered for this node (every node: with the ray executor only the head serves, but its workers run the same vLLM). */
    argv: readonly string[];
}

/** The flags of an argv, in order, once each: `--x` and `--x=v` give `--x`; short options as they are. */
export function renderedFlags(argv: readonly string[]): string[] {
    return [...new Set(argv.filter((a) => a.startsWith("-") && a !== "-" && a !== "--").map((a) => a.split("=")[0]))];
}

/**
 * What the tables say of `flag` for `version`. A version with a table answers from it. Between two
 * tables, a flag both accept is accepted and one both refuse is refused; otherwise it is unknown.
 * Newer than every table: the newest table answers (vLLM seldom brings a removed flag back). Older
 * than every table: a flag the oldest table refuses is refused (it came later); else unknown.
 */
export function flagAnswer(tables: FlagTables, version: string, flag: string): FlagAnswer {
    const v = tables.publicVersion(version);
    if (v === undefined) return "unknown";
    const exact = tables.versions.find((t) => tables.compare(t, v) === 0);
    if (exact) return tables.accepts(exact, flag) ? "accepted" : "refused";
    const older = tables.versions.filter((t) => tables.compare(t, v) < 0).at(-1);
    const newer = tables.versions.find((t) => tables.compare(t, v) > 0);
    const answer = (t: string) => (tables.accepts(t, flag) ? "accepted" : "refused");
    if (older && newer) return answer(older) === answer(newer) ? answer(older) : "unknown";
    if (older) return answer(older);
    return newer && answer(newer) === "refused" ? "refused" : "unknown";
}

/** The flags of vLLM's multi-node mp mode (`vllm serve --nnodes N --node-rank K --master-addr A`). */
export const MULTI_NODE_MP_FLAGS = ["--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless"] as const;

/** The config key each rendered flag comes from, for messages. */
const FLAG_KEYS: Record<string, string> = {
    "--served-model-name": "model.servedName",
    "--tensor-parallel-size": "model.tensorParallel",
    "--pipeline-parallel-size": "model.pipelineParallel",
    "--distributed-executor-backend": "model.executor",
    "--gpu-memory-utilization": "model.gpuMemoryUtilization",
    "--kv-cache-memory-bytes": "model.kvCacheMemoryBytes",
    "--host": "model.apiHost",
    "--port": "model.apiPort",
    "--max-model-len": "model.maxModelLen",
    "--max-num-seqs": "model.maxNumSeqs",
    "--quantization": "model.quantization",
    "--kv-cache-dtype": "model.kvCacheDtype",
    "--enforce-eager": "model.enforceEager",
    "--attention-backend": "model.attentionBackend",
    "--trust-remote-code": "model.trustRemoteCode",
};

/** The verdict: what is wrong (nothing may change while there is anything), what is unchecked, and what each node runs. */
export interface VllmVerdict {
    problems: string[];
    warnings: string[];
    /** Per node, in the nodes' order (an object would list an all-digit name first): `vLLM 0.31.0 (the image …, sha256:…)`. */
    versions: readonly (readonly [node: string, text: string])[];
}

/**
 * Checks every node's vLLM against what we render for it, and the nodes against each other:
 * - a flag we render that the node's version does not accept (by the tables), naming its config key;
 * - the mp executor across nodes on a vLLM without multi-node mp;
 * - nodes whose vLLM versions differ;
 * - docker nodes whose one tag names different images (different image IDs).
 */
export function vllmVerdict(nodes: readonly NodeVllm[], tables: FlagTables): VllmVerdict {
    const problems: string[] = [];
    const warnings: string[] = [];
    const firstMultiNode = tables.versions.find((t) => tables.accepts(t, "--nnodes"));
    for (const n of nodes) {
        const where = `${runtimeLabel(n.runtime)} on ${n.node}`;
        const version = n.probe.version;
        if (version === "none") {
            problems.push(`${where} has no vLLM. Fix: give ${n.node} a runtime with vLLM (nodes[].runtime).`);
            continue;
        }
        const flags = renderedFlags(n.argv);
        const answers = flags.map((flag) => ({ flag, answer: flagAnswer(tables, version, flag) }));
        const refused = answers.filter((a) => a.answer === "refused").map((a) => a.flag);
        const multiNode = refused.filter((f) => (MULTI_NODE_MP_FLAGS as readonly string[]).includes(f));
        if (multiNode.length > 0) {
            problems.push(
                `spark-cluster:model.executor is mp across ${nodes.length} nodes, but ${where} has vLLM ${version}, whose vllm serve has no ` +
                    `multi-node mp (${multiNode.join(", ")}${firstMultiNode ? `; vLLM has them from ${firstMultiNode} on among the versions we know` : ""}). ` +
                    `Fix: a runtime with a newer vLLM (nvcr.io/nvidia/vllm:26.10-py3 has 0.31.0), or model.executor: ray with a runtime that has Ray.`,
            );
        }
        const others = refused.filter((f) => !multiNode.includes(f));
        if (others.length > 0) {
            const named = others.map((f) => `${f} (${FLAG_KEYS[f] ?? "model.extraArgs"})`).join(", ");
            problems.push(
                `vLLM ${version} in ${where} does not accept ${named}. Fix: leave that setting out, or give ${n.node} a runtime with a vLLM that has it.`,
            );
        }
        const unknown = answers.filter((a) => a.answer === "unknown").map((a) => a.flag);
        if (unknown.length > 0) {
            warnings.push(
                `vLLM ${version} in ${where}: no flag table for this version; not checked: ${unknown.join(", ")} ` +
                    `(tables: ${tables.versions.join(", ")}). vLLM will refuse an unknown flag when it starts.`,
            );
        }
    }
    const found = nodes.filter((n) => n.probe.version !== "none");
    const byVersion = groupBy(found, (n) => tables.publicVersion(n.probe.version) ?? n.probe.version);
    if (byVersion.size > 1) {
        const list = [...byVersion].map(([v, ns]) => `${v} on ${ns.map((n) => `${n.node} (${runtimeLabel(n.runtime)})`).join(", ")}`).join("; ");
        problems.push(`the nodes' vLLM versions differ: ${list}. Every rank of one model must run the same vLLM. Fix: give every node the same vLLM version.`);
    }
    const imaged = found.filter((n) => runtimeStrategy(n.runtime).image !== undefined && n.probe.imageId);
    for (const [image, ns] of groupBy(imaged, (n) => runtimeStrategy(n.runtime).image ?? "")) {
        const ids = groupBy(ns, (n) => n.probe.imageId ?? "");
        if (ids.size > 1) {
            const list = [...ids].map(([id, holders]) => `${id} on ${holders.map((n) => n.node).join(", ")}`).join("; ");
            problems.push(
                `the tag ${image} names different images on the nodes: ${list}. ` +
                    `Fix: docker pull ${image} on every node (or name the image by digest, repo@sha256:…) so that all run the same one.`,
            );
        }
    }
    const versions = nodes.map(
        (n) =>
            [
                n.node,
                n.probe.version === "none"
                    ? `no vLLM found in ${runtimeLabel(n.runtime)}`
                    : `vLLM ${n.probe.version} (${runtimeLabel(n.runtime)}${n.probe.imageId ? `, ${n.probe.imageId}` : ""})`,
            ] as const,
    );
    return { problems, warnings, versions };
}

/**
 * The runtime check step's script: prints each node's vLLM and the warnings, then fails with the
 * problems when there are any (nothing has changed on any node yet: every host layer waits for it).
 */
export function vllmCheckScript(verdict: VllmVerdict): string {
    const lines = [
        ...verdict.versions.map(([node, v]) => `echo ${shellQuote(`${node}: ${v}`)}`),
        ...verdict.warnings.map((w) => `echo ${shellQuote(`warning: ${w}`)} >&2`),
    ];
    if (verdict.problems.length > 0) {
        lines.push(
            `echo ${shellQuote(`spark-cluster: nothing was changed on any node; the nodes' vLLM cannot run this stack:`)} >&2`,
            ...verdict.problems.map((p) => `echo ${shellQuote(`- ${p}`)} >&2`),
            "exit 1",
        );
    }
    return bashScript(lines);
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
    const groups = new Map<string, T[]>();
    for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
    return groups;
}
