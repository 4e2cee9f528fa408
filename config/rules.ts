/**
 * Cross-field rules: what the schema cannot see field by field (one head, unique names and
 * addresses, subnets per link, parallelism vs GPUs, transport vs Thor, ports, topology). Each is
 * pure and exported, and table-tested in test/unit/config.test.ts; {@link checkCrossFieldRules} runs
 * them all on a config that passed the schema.
 */
import { checkOpenWebui } from "./frontendRules";
import { checkCabling, isSwitchless } from "./cablingRules";
import { ConfigIssue, describeValue, formatPath } from "./issues";
import { CONFIG_NAMESPACE } from "./namespace";
import { formatIpv4, formatSubnet, parseCidr, parseIpv4, subnetsOverlap } from "./ipv4";
import { Facts, RUNTIME_TRAITS, gatherFacts, hasThorIn, localModelFacts, resolveParallelism, runtimeOf, totalGpusOf } from "./facts";
import { HF_HOME_DIR } from "./hostPaths";
import type { InterconnectSchema, NcclSchema, ParsedConfig, ParsedModel, ParsedNode } from "./schema";
import { checkPorts } from "./portRules";
import { checkEngineRules } from "./engineRules";
import { mountTargets } from "./dockerOptions";
import type { z } from "zod";

function nodeLabel(index: number, nodes: readonly { name: string }[]): string {
    return `nodes[${index}] (${nodes[index].name})`;
}

/** A Thor needs a venv runtime (pip wheels lack sm_110 kernels); only a Spark has twin interfaces. */
export function checkNodeKinds(nodes: readonly Pick<ParsedNode, "name" | "kind" | "runtime" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        if (node.kind === "thor" && node.runtime === undefined) {
            issues.push({
                path: `nodes[${i}].runtime`,
                message: "is required on a thor: vLLM's pip wheels lack sm_110 kernels, so a Jetson Thor runs vLLM from a source-built venv",
                got: "nothing",
                example: "{ kind: venv, path: /opt/vllm-venv }",
            });
        } else if (node.kind === "thor" && node.runtime !== undefined && !RUNTIME_TRAITS[node.runtime.kind].runsOnThor) {
            issues.push({
                path: `nodes[${i}].runtime.kind`,
                message: "must be venv on a thor: vLLM's pip wheels lack sm_110 kernels, so a Jetson Thor runs vLLM from a source-built venv",
                got: describeValue(node.runtime.kind),
                example: "{ kind: venv, path: /opt/vllm-venv }",
            });
        }
        if (node.kind === "thor") {
            node.interconnect.forEach((iface, j) => {
                if (iface.name === undefined) {
                    issues.push({
                        path: `nodes[${i}].interconnect[${j}].name`,
                        message:
                            "is required on a thor: interfaces are detected through ibdev2netdev, and a Jetson Thor has no RoCE device to report (`ip -br link` on the Thor shows the name)",
                        got: "nothing",
                        example: "name: mgbe0_0",
                    });
                }
            });
        }
        if (node.kind !== "spark" && node.interconnect.length > 1) {
            issues.push({
                path: `nodes[${i}].interconnect`,
                message: `lists ${node.interconnect.length} interfaces, but only a spark has twin interfaces; a ${node.kind} has one`,
                got: `${node.interconnect.length} interfaces`,
                example: "[{ address: 192.168.100.31/24 }]",
            });
        }
    });
    return issues;
}

/** Exactly one node has `head: true`. */
export function checkExactlyOneHead(nodes: readonly Pick<ParsedNode, "name" | "head">[]): ConfigIssue[] {
    const heads = nodes.flatMap((node, i) => (node.head ? [i] : []));
    if (heads.length === 0) {
        return [
            {
                path: "nodes",
                message: "has no head: exactly one node must have head: true (it runs the Ray head and serves the API)",
                got: `${nodes.length} nodes, none with head: true`,
                example: nodes.length > 0 ? `head: true on ${nodeLabel(0, nodes)}` : "head: true on one node",
            },
        ];
    }
    return heads.slice(1).map((i) => ({
        path: `nodes[${i}].head`,
        message: `is true, but ${nodeLabel(heads[0], nodes)} is already the head; exactly one node may be the head`,
        got: "true",
        example: "false (or leave head out)",
    }));
}

/** Node names are unique (they name resources and /etc/hosts entries). */
export function checkUniqueNodeNames(nodes: readonly Pick<ParsedNode, "name">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const first = nodes.findIndex((other) => other.name === node.name);
        if (first < i) {
            issues.push({
                path: `nodes[${i}].name`,
                message: `repeats the name of nodes[${first}]; node names must be unique`,
                got: describeValue(node.name),
                example: `${node.name}-2`,
            });
        }
    });
    return issues;
}

/** A sudo password is only for nodes that log in as another user than root: set on a cluster of root logins, it is a mistake. */
export function checkSudoPasswordUsed(sudoPasswordSet: boolean, nodes: readonly (Pick<ParsedNode, "name"> & { ssh: { user: string } })[]): ConfigIssue[] {
    if (!sudoPasswordSet || nodes.some((node) => node.ssh.user !== "root")) return [];
    return [
        {
            path: "sudoPassword",
            message: `is set, but every node logs in as root (${nodes.map((_, i) => `nodes[${i}].ssh.user`).join(", ")}), so no step uses it. Fix: remove it, or set ssh.user to the user whose sudo asks for it`,
            got: "a password",
            example: `pulumi config rm ${CONFIG_NAMESPACE}:sudoPassword`,
        },
    ];
}

/** No two nodes share an SSH endpoint (host:port); host names compare case-insensitively. */
export function checkUniqueSshEndpoints(nodes: readonly (Pick<ParsedNode, "name"> & { ssh: { host: string; port: number } })[]): ConfigIssue[] {
    const endpoint = (node: { ssh: { host: string; port: number } }) => `${node.ssh.host.toLowerCase()}:${node.ssh.port}`;
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const first = nodes.findIndex((other) => endpoint(other) === endpoint(node));
        if (first < i) {
            issues.push({
                path: `nodes[${i}].ssh.host`,
                message: `with port ${node.ssh.port} is also the SSH endpoint of ${nodeLabel(first, nodes)}; each node needs its own`,
                got: describeValue(node.ssh.host),
                example: "10.0.0.12",
            });
        }
    });
    return issues;
}

/**
 * A node's SSH address lies outside its own interconnect subnets: netplan would route that subnet
 * over the interconnect, taking the management connection with it (and `destroy` would cut it).
 * A host name is not resolved here, so only an IPv4 `ssh.host` is checked.
 */
export function checkSshHostOutsideInterconnect(nodes: readonly (Pick<ParsedNode, "name" | "interconnect"> & { ssh: { host: string } })[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const ip = parseIpv4(node.ssh.host);
        if (ip === undefined) return;
        const k = node.interconnect.findIndex((iface) => {
            const cidr = parseCidr(iface.address);
            return ip >= cidr.network && ip <= cidr.broadcast;
        });
        if (k < 0) return;
        const cidr = parseCidr(node.interconnect[k].address);
        issues.push({
            path: `nodes[${i}].ssh.host`,
            message: `lies inside ${formatSubnet(cidr)}, the subnet of this node's interconnect[${k}] (${node.interconnect[k].address}): netplan would route it over the interconnect and cut the SSH connection; give the node's management address (its 10 GbE port or Wi-Fi)`,
            got: describeValue(node.ssh.host),
            example: "10.0.0.11",
        });
    });
    return issues;
}

/** Every interconnect IP address is used once in the whole cluster. */
export function checkUniqueAddresses(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const seen = new Map<number, string>();
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        node.interconnect.forEach((iface, k) => {
            const ip = parseCidr(iface.address).ip;
            const owner = seen.get(ip);
            if (owner !== undefined) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `uses ${formatIpv4(ip)}, which ${owner} already has; every interconnect address must be unique`,
                    got: describeValue(iface.address),
                    example: "192.168.100.12/24",
                });
            } else {
                seen.set(ip, `nodes[${i}].interconnect[${k}] (${node.name})`);
            }
        });
    });
    return issues;
}

/**
 * Each link is one subnet: for every interface index i, each node's i-th interface lies in the
 * subnet (same prefix length) of the first node that has an i-th interface, and that subnet has
 * at least two members ("no peer on this link" otherwise).
 */
export function checkAddressesInSubnets(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const maxInterfaces = Math.max(0, ...nodes.map((node) => node.interconnect.length));
    for (let k = 0; k < maxInterfaces; k++) {
        const members = nodes.flatMap((node, i) => (node.interconnect[k] ? [i] : []));
        const refIndex = members[0];
        const ref = parseCidr(nodes[refIndex].interconnect[k].address);
        const refLabel = `nodes[${refIndex}].interconnect[${k}] (${nodes[refIndex].name})`;
        if (members.length < 2) {
            issues.push({
                path: `nodes[${refIndex}].interconnect[${k}].address`,
                message: `has no peer on this link: no other node has an interconnect[${k}] in ${formatSubnet(ref)}`,
                got: describeValue(nodes[refIndex].interconnect[k].address),
                example: `remove this interface, or give another node an interconnect[${k}] in ${formatSubnet(ref)}`,
            });
            continue;
        }
        for (const i of members.slice(1)) {
            const address = nodes[i].interconnect[k].address;
            const cidr = parseCidr(address);
            if (cidr.prefixLength !== ref.prefixLength) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `has prefix /${cidr.prefixLength}, but ${refLabel} uses /${ref.prefixLength}; every address on one link needs the same prefix`,
                    got: describeValue(address),
                    example: `${formatIpv4(cidr.ip)}/${ref.prefixLength}`,
                });
            } else if (cidr.network !== ref.network) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `is not inside ${formatSubnet(ref)}, the subnet of ${refLabel}`,
                    got: describeValue(address),
                    example: `${formatIpv4(ref.network + ((cidr.ip - cidr.network) % (ref.broadcast - ref.network)))}/${ref.prefixLength}`,
                });
            }
        }
    }
    return issues;
}

/** A Spark's twin interfaces never share (or overlap) a subnet (NVIDIA's playbook). */
export function checkTwinSubnets(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const [first, second] = node.interconnect;
        if (first && second && subnetsOverlap(parseCidr(first.address), parseCidr(second.address))) {
            issues.push({
                path: `nodes[${i}].interconnect[1].address`,
                message: `overlaps the subnet of its twin interconnect[0] (${first.address}); twin interfaces must never share a subnet`,
                got: describeValue(second.address),
                example: "192.168.101.11/24 next to 192.168.100.11/24",
            });
        }
    });
    return issues;
}

/** Interface names on one node are unique. */
export function checkInterfaceNames(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        node.interconnect.forEach((iface, k) => {
            if (iface.name !== undefined && node.interconnect.findIndex((other) => other.name === iface.name) < k) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].name`,
                    message: "names the same interface as another interconnect entry of this node",
                    got: describeValue(iface.name),
                    example: "enP2p1s0f1np1 next to enp1s0f1np1",
                });
            }
        });
    });
    return issues;
}

/** tensorParallel × pipelineParallel fits in the cluster's GPUs. */
export function checkParallelismFitsGpus(
    model: Pick<ParsedModel, "tensorParallel" | "pipelineParallel">,
    totalGpus: number,
    parallelism: Facts["parallelism"] = resolveParallelism(model, totalGpus),
): ConfigIssue[] {
    const { tensorParallel, pipelineParallel } = parallelism;
    const product = tensorParallel * pipelineParallel;
    if (product <= totalGpus) {
        return [];
    }
    const key = model.tensorParallel !== undefined ? "tensorParallel" : "pipelineParallel";
    return [
        {
            path: `model.${key}`,
            message: `asks for tensorParallel x pipelineParallel = ${tensorParallel} x ${pipelineParallel} = ${product} GPUs, but the cluster has ${totalGpus} GPUs (the sum of nodes[].gpus)`,
            got: describeValue(model[key]),
            example: `tensorParallel: ${totalGpus}, pipelineParallel: 1 (or tensorParallel: 1, pipelineParallel: ${totalGpus})`,
        },
    ];
}

/**
 * The mp executor runs world_size / nnodes workers on every node (vLLM 0.33,
 * vllm/v1/executor/multiproc_executor.py and ParallelConfig.local_world_size), so
 * tensorParallel x pipelineParallel must split evenly over the nodes and fit each node's GPUs.
 */
export function checkMpLayout(
    model: Pick<ParsedModel, "executor" | "tensorParallel" | "pipelineParallel">,
    nodes: readonly Pick<ParsedNode, "name" | "gpus">[],
    facts: Pick<Facts, "totalGpus" | "parallelism"> = { totalGpus: totalGpusOf(nodes), parallelism: resolveParallelism(model, totalGpusOf(nodes)) },
): ConfigIssue[] {
    const totalGpus = facts.totalGpus;
    const { tensorParallel, pipelineParallel } = facts.parallelism;
    const world = tensorParallel * pipelineParallel;
    if (world > totalGpus) {
        return []; // checkParallelismFitsGpus reports it
    }
    const key = model.pipelineParallel !== undefined && model.tensorParallel === undefined ? "pipelineParallel" : "tensorParallel";
    const fewest = Math.min(...nodes.map((node) => node.gpus));
    const fits = `tensorParallel: ${nodes.length * fewest}, pipelineParallel: 1 (or pipelineParallel: ${nodes.length}), or executor: ray`;
    if (world % nodes.length !== 0) {
        return [
            {
                path: `model.${key}`,
                message:
                    `gives world_size ${tensorParallel} x ${pipelineParallel} = ${world}, which the mp executor cannot split over ${nodes.length} nodes: ` +
                    `vLLM refuses it with "global world_size (${world}) must be divisible by nnodes_within_dp (${nodes.length})"`,
                got: describeValue(model[key] ?? world),
                example: fits,
            },
        ];
    }
    const perNode = world / nodes.length;
    const short = nodes.findIndex((node) => node.gpus < perNode);
    if (short >= 0) {
        return [
            {
                path: `model.${key}`,
                message: `makes the mp executor run ${perNode} workers on every node (world_size ${world} / ${nodes.length} nodes), but ${nodeLabel(short, nodes)} has ${nodes[short].gpus} GPU(s)`,
                got: describeValue(model[key] ?? world),
                example: fits,
            },
        ];
    }
    return [];
}

/**
 * With the ray executor, vLLM's workers run inside each docker node's Ray container, which mounts
 * the Hugging Face cache but no local model path (mounting one there would restart Ray on every
 * model change): a local model on a docker node must live under the cache.
 */
export function checkLocalModelWithRay(
    model: Pick<ParsedModel, "executor" | "source">,
    nodes: readonly Pick<ParsedNode, "name" | "kind" | "runtime">[],
    facts: Pick<Facts, "localModel" | "localModelInHfCache"> = localModelFacts(model.source),
): ConfigIssue[] {
    const dockerNode = nodes.findIndex((node) => node.kind !== "thor" && RUNTIME_TRAITS[runtimeOf(node).kind].containerized);
    if (!facts.localModel || facts.localModelInHfCache || dockerNode < 0) {
        return [];
    }
    return [
        {
            path: "model.source",
            message: `is a local path outside ${HF_HOME_DIR}, but with the ray executor vLLM's workers run in the Ray container of ${nodeLabel(dockerNode, nodes)}, which sees only that cache; move the model under it, or use the mp executor`,
            got: describeValue(model.source),
            example: `${HF_HOME_DIR}/models/qwen2.5-7b-instruct (or model.executor: mp)`,
        },
    ];
}

/** A cluster with a Thor runs NCCL over sockets everywhere: a Thor has no RoCE. */
export function checkTransport(requested: z.output<typeof NcclSchema>["transport"], nodes: readonly Pick<ParsedNode, "name" | "kind">[]): ConfigIssue[] {
    const thor = nodes.findIndex((node) => hasThorIn([node]));
    if (requested !== "roce" || thor < 0) {
        return [];
    }
    return [
        {
            path: "nccl.transport",
            message: `cannot be roce: ${nodeLabel(thor, nodes)} is a thor, and Thor has no RoCE; NCCL fails with 'wrong type 3 != 4'. A cluster with a Thor runs NCCL over sockets on every node`,
            got: describeValue(requested),
            example: "auto (socket when a Thor is present) or socket",
        },
    ];
}

/** `pair` is two nodes cabled back to back; `switch` is two or more; `mesh` is three; `ring` is four or more. */
export function checkTopology(topology: z.output<typeof InterconnectSchema>["topology"], nodeCount: number): ConfigIssue[] {
    if (topology === "pair" && nodeCount !== 2) {
        return [
            {
                path: "interconnect.topology",
                message: `is pair (two nodes cabled back to back), but nodes lists ${nodeCount}`,
                got: describeValue(topology),
                example: "switch",
            },
        ];
    }
    if (topology === "mesh" && nodeCount !== 3) {
        return [
            {
                path: "interconnect.topology",
                message: `is mesh (three nodes, each cabled to both others: a Spark has two ports), but nodes lists ${nodeCount}`,
                got: describeValue(topology),
                example: nodeCount >= 4 ? "ring" : "pair",
            },
        ];
    }
    if (topology === "ring" && nodeCount < 4) {
        return [
            {
                path: "interconnect.topology",
                message: `is ring, which needs at least 4 nodes, but nodes lists ${nodeCount} (three nodes cabled to each other are a mesh)`,
                got: describeValue(topology),
                example: nodeCount === 3 ? "mesh" : "pair",
            },
        ];
    }
    if (topology === "switch" && nodeCount < 2) {
        return [
            {
                path: "interconnect.topology",
                message: `is switch, but nodes lists ${nodeCount}; a cluster needs at least 2 nodes`,
                got: describeValue(topology),
                example: "switch, with two or more nodes",
            },
        ];
    }
    return [];
}

type ExecutorRule = (
    model: Pick<ParsedModel, "executor" | "tensorParallel" | "pipelineParallel" | "source">,
    nodes: readonly Pick<ParsedNode, "name" | "kind" | "runtime" | "gpus">[],
    facts: Pick<Facts, "totalGpus" | "parallelism" | "localModel" | "localModelInHfCache">,
) => ConfigIssue[];

/** The rules that hold for one executor only: the mp executor's even split, the Ray containers' view of a local model. */
const EXECUTOR_RULES: Record<ParsedModel["executor"], ExecutorRule> = {
    mp: checkMpLayout,
    ray: checkLocalModelWithRay,
};

/** The rules of the configured executor. */
export function checkExecutorRules(
    model: Parameters<ExecutorRule>[0],
    nodes: Parameters<ExecutorRule>[1],
    facts: Parameters<ExecutorRule>[2] = {
        totalGpus: totalGpusOf(nodes),
        parallelism: resolveParallelism(model, totalGpusOf(nodes)),
        ...localModelFacts(model.source),
    },
): ConfigIssue[] {
    return EXECUTOR_RULES[model.executor](model, nodes, facts);
}

/**
 * `model.kvCacheMemoryBytes` and `model.gpuMemoryUtilization` are two ways to size vLLM's KV cache:
 * with a fixed budget vLLM skips its profiling and ignores the utilization for the cache, so
 * giving both would leave one of them without effect.
 */
export function checkMemoryBudget(model: Pick<ParsedModel, "gpuMemoryUtilization" | "kvCacheMemoryBytes">): ConfigIssue[] {
    if (model.kvCacheMemoryBytes === undefined || model.gpuMemoryUtilization === undefined) return [];
    return [
        {
            path: "model.kvCacheMemoryBytes",
            message:
                "cannot be set together with model.gpuMemoryUtilization: both size vLLM's KV cache (a fixed budget, or a share of the GPU's memory). " +
                "Fix: remove one of them (with kvCacheMemoryBytes, the start-up check's utilization is derived from the fit estimate)",
            got: `${model.kvCacheMemoryBytes} and gpuMemoryUtilization ${model.gpuMemoryUtilization}`,
            example: "model: { kvCacheMemoryBytes: 34359738368 } (or model: { gpuMemoryUtilization: 0.85 })",
        },
    ];
}

/** Every cross-field rule, in the order their issues are reported. */
export function checkCrossFieldRules(config: ParsedConfig, facts: Facts = gatherFacts(config)): ConfigIssue[] {
    const totalGpus = facts.totalGpus;
    return [
        ...checkNodeKinds(config.nodes),
        ...checkExactlyOneHead(config.nodes),
        ...checkUniqueNodeNames(config.nodes),
        ...checkUniqueSshEndpoints(config.nodes),
        ...checkSudoPasswordUsed(config.sudoPassword !== undefined, config.nodes),
        ...checkSshHostOutsideInterconnect(config.nodes),
        ...checkUniqueAddresses(config.nodes),
        ...(isSwitchless(config.interconnect.topology) ? [] : checkAddressesInSubnets(config.nodes)),
        ...checkTwinSubnets(config.nodes),
        ...checkInterfaceNames(config.nodes),
        ...checkParallelismFitsGpus(config.model, totalGpus, facts.parallelism),
        ...checkMemoryBudget(config.model),
        ...checkExecutorRules(config.model, config.nodes, facts),
        ...checkEngineRules(config.model, config.nodes),
        ...checkTransport(config.nccl.transport, config.nodes),
        ...checkPorts(config.ray, config.model, config.nodes, config.metrics),
        ...checkTopology(config.interconnect.topology, config.nodes.length),
        ...checkCabling(config.interconnect, config.nodes),
        ...checkModelEnvAgainstOverrides(config.model.env, config.nccl.overrides),
        ...checkGpuDirectOverrides(config.nccl.overrides, config.nodes, config.roce.peermem),
        ...checkDockerMountsAgainstLocalModel(config.nodes, config.model.source, facts),
        ...checkOpenWebui(config),
    ];
}

/**
 * A bind mount of runtime.extraOptions whose container path is the local model's directory, or
 * lies inside or around it: the project mounts that directory (read-only, at the same path) into
 * vLLM's container, and docker refuses a path mounted twice.
 */
export function checkDockerMountsAgainstLocalModel(
    nodes: readonly Pick<ParsedNode, "name" | "runtime">[],
    source: string,
    facts: Pick<Facts, "localModel">,
): ConfigIssue[] {
    if (!facts.localModel) return [];
    const model = source.replace(/\/+$/, "");
    const clash = (target: string) => target === model || model.startsWith(target + "/") || target.startsWith(model + "/");
    return nodes.flatMap((node, i) => {
        const options = node.runtime?.kind === "docker" ? (node.runtime.extraOptions ?? []) : [];
        return options.flatMap((option, k) => {
            const [target] = mountTargets([option]);
            return target !== undefined && clash(target)
                ? [
                      {
                          path: `nodes[${i}].runtime.extraOptions[${k}]`,
                          message: `mounts ${target}, which clashes with the local model ${source} that the project mounts into vLLM's container`,
                          got: describeValue(option),
                          example: "--mount=type=bind,source=/data/templates,target=/templates,readonly",
                      },
                  ]
                : [];
        });
    });
}

/**
 * A variable in both model.env and nccl.overrides: the runtime env file and the unit's own
 * environment would both set it, and which wins differs by runtime (systemd lets the file win,
 * docker its `-e`). One place only.
 */
export function checkModelEnvAgainstOverrides(env: Readonly<Record<string, string>>, overrides: Readonly<Record<string, string>>): ConfigIssue[] {
    return Object.keys(env)
        .filter((name) => Object.hasOwn(overrides, name))
        .map((name) => ({
            path: formatPath(["model", "env", name]),
            message: `is also set by nccl.overrides.${name} (the runtime env file Ray, vLLM and the NCCL check read); set it in one place`,
            got: describeValue(env[name]),
            example: `remove it from model.env and keep nccl: { overrides: { ${name}: ${JSON.stringify(overrides[name])} } }`,
        }));
}

/**
 * NCCL variables that turn GPUDirect RDMA on, and the values that do. NCCL docs, "Environment
 * Variables": NCCL_NET_GDR_LEVEL (LOC: never), NCCL_NET_GDR_READ, NCCL_DMABUF_ENABLE, NCCL_GDRCOPY_ENABLE.
 */
const GPUDIRECT_OVERRIDES: Readonly<Record<string, (value: string) => boolean>> = {
    NCCL_NET_GDR_LEVEL: (v) => !["LOC", "0"].includes(v.trim().toUpperCase()),
    NCCL_NET_GDR_READ: (v) => v.trim() === "1",
    NCCL_DMABUF_ENABLE: (v) => v.trim() === "1",
    NCCL_GDRCOPY_ENABLE: (v) => v.trim() === "1",
};

/**
 * A GPUDirect setting in nccl.overrides on a cluster with a Spark, whose GB10 has no GPUDirect RDMA
 * (NVIDIA's developer forum, "dgx-spark-gpudirect-rdma": nvidia-peermem, dma-buf and GDRCopy do
 * not work there), unless roce.peermem is set to true on purpose: the same truth that leaves
 * nvidia-peermem off (resolvePeermem).
 */
export function checkGpuDirectOverrides(
    overrides: Readonly<Record<string, string>>,
    nodes: readonly Pick<ParsedNode, "name" | "kind">[],
    peermem: boolean | "auto",
): ConfigIssue[] {
    const spark = nodes.find((n) => n.kind === "spark");
    if (spark === undefined || peermem === true) return [];
    return Object.entries(overrides)
        .filter(([name, value]) => GPUDIRECT_OVERRIDES[name]?.(value) === true)
        .map(([name, value]) => ({
            path: formatPath(["nccl", "overrides", name]),
            message:
                `turns GPUDirect RDMA on, which ${spark.name}'s GB10 does not support (nvidia-peermem, dma-buf and GDRCopy do not work there; ` +
                "NCCL moves data through host memory). Fix: remove it (or set roce.peermem: true if a node of yours has it)",
            got: describeValue(value),
            example: "nccl: { overrides: {} }",
        }));
}

// ---------------------------------------------------------------------------------------------
