// The cluster's node check: every node's first-contact findings (./firstContactFindings.ts) and
// the fit of the model on the memory the nodes reported, judged once before anything changes on
// any node. `npm run doctor` prints the same findings.
import { type Config, type NodeConfig, checkpointBytes, probedFit } from "../../config";
import { type FirstContactFacts, type FirstContactProbe, firstContactProbe } from "./firstContact";
import { Finding, NodeContactSpec, nodeFindings } from "./firstContactFindings";

/** One node's report: its config, what its first-contact probe found, and its interconnect's interface names (resolved). */
export interface NodeReport {
    node: NodeConfig;
    facts: FirstContactFacts;
    interfaces: string[];
    /**
     * The probe ran on the node (its output has the facts' sections). A retired node keeps the
     * output it had, so retiring a node changes nothing here; one never probed is left out.
     */
    probed: boolean;
}

/** What a node's findings are judged against, from the resolved config. */
export function contactSpec(config: Config, node: NodeConfig, interfaces: readonly string[]): NodeContactSpec {
    const modelBytes = config.localModel ? undefined : checkpointBytes(config.fitInputs.description);
    return {
        node: node.name,
        index: config.nodes.indexOf(node),
        kind: node.kind,
        gpus: node.gpus,
        interfaces: node.interconnect.map((iface, i) => ({ name: interfaces[i] ?? iface.name ?? "", address: iface.address })),
        takeOver: config.interconnect.takeOver,
        runtime: node.runtime.kind === "docker" ? { kind: "docker", image: node.runtime.image } : { kind: "venv" },
        ...(modelBytes !== undefined ? { modelBytes } : {}),
        ...(config.metrics !== undefined ? { metrics: { prometheus: node.head } } : {}),
    };
}

/** The facts first contact reads on `node`: its runtime's image (docker), and the metrics packages when metrics are on. */
export function contactProbeFor(config: Config, node: NodeConfig): FirstContactProbe {
    return firstContactProbe({
        ...(node.runtime.kind === "docker" ? { dockerImage: node.runtime.image } : {}),
        ...(config.metrics !== undefined ? { metrics: true } : {}),
    });
}

const GIB = 2 ** 30;

/**
 * The fit on the memory the nodes reported: a unified-memory node (a 64 GB Spark) by MemTotal, a
 * workstation by its GPU (config/fitRule.ts probedFit). A plan the preview let through on the
 * default memory is refused here when a node has less, naming each node and both figures.
 */
export function fitFindings(config: Config, reports: readonly NodeReport[]): Finding[] {
    if (config.fit.status !== "fits") return [];
    const memory = Object.fromEntries(
        reports.map((r) => {
            const gpu = "gpus" in r.facts.gpu ? r.facts.gpu.gpus.find((g) => g.memoryMiB !== undefined)?.memoryMiB : undefined;
            return [
                r.node.name,
                {
                    ...(r.facts.memory.totalKiB !== undefined ? { unifiedGiB: (r.facts.memory.totalKiB * 1024) / GIB } : {}),
                    ...(gpu !== undefined ? { gpuGiB: (gpu * 2 ** 20) / GIB } : {}),
                },
            ];
        }),
    );
    const { result, nodes } = probedFit(config.fitInputs, memory);
    const figures = nodes.map((n) => `${n.name} ${n.gpuMemoryGiB !== undefined ? n.gpuMemoryGiB.toFixed(2) : "121.63"} GiB (${n.memoryFrom})`).join(", ");
    if (result.status === "does-not-fit") {
        const failing = [...new Set(result.estimates.filter((e) => !e.fits).map((e) => e.node))];
        return [
            {
                node: failing.join(",") || "cluster",
                topic: "fit",
                level: "block",
                what: `on the memory the nodes report (${figures}): ${result.message}`,
                fix: "set the model and plan the message proposes, or serve on nodes with more memory (nodes[].gpuMemoryGiB overrides what a node reports)",
            },
        ];
    }
    return [
        {
            node: "cluster",
            topic: "fit",
            level: "ok",
            what: `${result.status === "fits" ? "fits" : result.reason} on the memory the nodes report (${figures})`,
        },
    ];
}

/** Every finding of the cluster: each probed node's, then the fit (when every node was probed). */
export function clusterFindings(config: Config, reports: readonly NodeReport[]): Finding[] {
    const probed = reports.filter((r) => r.probed);
    return [
        ...probed.flatMap((r) => nodeFindings(contactSpec(config, r.node, r.interfaces), r.facts)),
        ...(probed.length === reports.length ? fitFindings(config, probed) : []),
    ];
}
