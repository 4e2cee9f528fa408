// The whole cluster as one plan (components/plan/types.ts): every node's host layers, the
// cluster's checks, Ray, the model sync, the engine's servers, Open WebUI and Prometheus, in the
// order `up` registers them, each step with its parent, the steps it runs after and its scripts.
// Pure: the renderers (components/render/) make the scripts; the materializer
// (components/materialize.ts) turns the plan into resources.
//
// Names are the URNs' last parts and stay as they were when each layer had a component class of
// its own building it (a deployed stack sees no change): the node's components and its serving
// layers keep an alias to the cluster, whose children they were before ClusterNode existed.
import type { Config, NodeConfig, ServerPlacement } from "../../config";
import { addressOnNode, isLoopback } from "../../config/ipv4";
import { SSH_LOGIN_SCRIPT, SSH_READY_SCRIPT, hostKeyFingerprint } from "../hostKey";
import { hcasFor, rayAuthStatus, resolveInterfaceNames } from "../nodeFacts";
import { apiBaseUrl } from "../render/enginePlan";
import { ncclCheckPlan } from "../render/check";
import { engineStrategy } from "../render/engine";
import type { EnginePlan } from "../render/enginePlan";
import { fabricNcclSelection, fabricNetplanSpec, forwardingPlan } from "../render/fabric";
import { FACT_SECTION_PREFIX } from "../render/facts";
import { firewallPlan } from "../render/firewall";
import { type FirstContactFacts, firstContactReadScript, firstContactScript, parseFirstContact } from "../render/firstContact";
import { nodeCheckScript } from "../render/firstContactFindings";
import { contentHash } from "../render/host/shell";
import { cablingCheckScript, lldpProbe } from "../render/lldp";
import { exporterStep, prometheusStep } from "../render/metrics";
import { modelSyncPlan, pullSummary } from "../render/modelSync";
import { type NcclSpec, ncclPlan } from "../render/nccl";
import { linkCheck, type NetplanSpec, netplanPlan } from "../render/netplan";
import { clusterFindings, contactProbeFor } from "../render/nodeCheck";
import { openWebuiPlan } from "../render/openWebui";
import { pfcPlan } from "../render/pfc";
import { type EngineProbeResult, type RoceDevice, engineProbeReadScript, hardwareProbe, rayProbe } from "../render/probe";
import { type RayStartSpec, rayPlan } from "../render/ray";
import { rdmaBandwidthProbe } from "../render/rdmaBandwidth";
import { type RoceChain, roceChainPlan } from "../render/roceChain";
import { takeOverPlan } from "../render/takeOver";
import { SECRET_PURPOSES } from "../clusterSecrets";
import { type ClusterPlan, type Derived, type PlanItem, type PlannedStep, type PlannedWarning, type Ref, type Val, derive, deriveSecret } from "./types";

/** The reference to a step's output. */
const stdoutOf = (step: string): Ref => `step:${step}:stdout`;
/** The reference to one of the plan's shared values. */
const valueOf = (name: string): Ref => `value:${name}`;
/** One of the plan's shared values as an output (an output given as a reference would be its text). */
const output = (ref: Ref): Derived<unknown> => derive([ref], (value: unknown) => value);

/** The `status=…` line a host step prints last (PFC, firewall), or why there is none. */
export function statusLine(stdout: string): string {
    const line = stdout
        .split("\n")
        .reverse()
        .find((l) => l.startsWith("status="));
    return line ? line.slice("status=".length) : "unknown: no status reported";
}

/** The plan being built: items in order, shared values, warnings, and what each node's later steps wait for. */
class PlanBuilder {
    readonly items: PlanItem[] = [];
    readonly values: Record<string, Derived<unknown>> = {};
    readonly warnings: PlannedWarning[] = [];
    /** Per node: the host layers every later step of the node waits for (ClusterNode's hostReady). */
    readonly hostReady = new Map<string, string[]>();
    #rootSecret = false;

    constructor(
        readonly cluster: string,
        readonly config: Config,
    ) {}

    value<T>(name: string, uses: readonly Ref[], make: (...values: never[]) => T): Ref {
        this.values[name] = derive(uses, make);
        return valueOf(name);
    }

    component(
        type: string,
        name: string,
        outputs: Record<string, Val<unknown>>,
        where: { parent?: string; aliasCluster?: true; after?: readonly string[]; retired?: true } = {},
    ): string {
        this.items.push({ kind: "component", type, name, outputs, after: [], ...where });
        return name;
    }

    step(step: Omit<PlannedStep, "kind" | "connection"> & { connection?: PlannedStep["connection"] }): string {
        this.items.push({ kind: "step", connection: "pinned", ...step });
        return step.name;
    }

    /** A secret derived from the stack's root secret, drawing the root on first use: a stack that needs none has none. */
    derived(purpose: string): Ref {
        if (!this.#rootSecret) {
            this.#rootSecret = true;
            this.items.push({ kind: "secret", name: `${this.cluster}-root-secret`, generation: this.config.secretsGeneration });
        }
        return `derived:${purpose}`;
    }

    warn(text: Val<readonly string[]>, on?: string): void {
        this.warnings.push({ ...(on !== undefined ? { on } : {}), text });
    }
}

/** A child of node `node`'s component, with the alias to the cluster it was a child of before. */
function nodeChild(node: string): { parent: string; aliasCluster: true } {
    return { parent: node, aliasCluster: true };
}

/** What a node's probes report, as the plan's values name them. */
interface NodeValues {
    devices: Ref;
    names: Ref;
    engine: Ref;
    imageId: Ref;
    firstContact: Ref;
    firstContactProbed: Ref;
    rayVersion?: Ref;
}

/**
 * The plan of the stack `cluster` (its SparkCluster's name) for `config`: what `up` registers,
 * in order. The cluster's engine check waits for every node's probes, and every node's host
 * layers wait for it: a runtime that cannot run what we render, on any node, stops the cluster
 * before anything changes anywhere.
 */
export function clusterPlan(cluster: string, config: Config): ClusterPlan {
    const plan = new PlanBuilder(cluster, config);
    const engine = engineStrategy(config.engine);
    const executor = config.executor;
    const serverOf = (node: NodeConfig): ServerPlacement => executor.servers.find((server) => server.node === node.name) ?? executor.servers[0];

    // Each node and its read-only probes: SSH, hardware, Ray, the engine, first contact, LLDP.
    const probed = new Map<string, { values: NodeValues; probes: string[] }>();
    for (const node of config.nodes) probed.set(node.name, nodeProbes(plan, node));
    clusterWarnings(plan);

    // The cluster's checks, on a node that is not retired, before anything changes anywhere: first
    // contact (each node as its owner left it, and the fit), then the engine (every node's against
    // what we render, and the nodes against each other). A retired node keeps the probe output it
    // had, so retiring a node changes nothing here; one that was never probed is left out.
    const checkOn = config.nodes.find((n) => !n.retired) ?? config.head;
    const allProbes = config.nodes.flatMap((n) => probed.get(n.name)?.probes ?? []);
    const onCheckNode = { node: checkOn.name, ...(checkOn.retired ? { retired: true as const } : {}) };
    const nodeValues = config.nodes.map((n) => probed.get(n.name)?.values as NodeValues);
    const nodeCheck = plan.step({
        name: `${cluster}-node-check`,
        ...onCheckNode,
        spec: {
            create: derive(
                nodeValues.flatMap((v) => [v.firstContact, v.names, v.firstContactProbed]),
                (...values: unknown[]) =>
                    nodeCheckScript(
                        clusterFindings(
                            config,
                            config.nodes.map((node, i) => ({
                                node,
                                facts: values[3 * i] as FirstContactFacts,
                                interfaces: values[3 * i + 1] as string[],
                                probed: values[3 * i + 2] as boolean,
                            })),
                        ),
                    ),
            ),
        },
        after: allProbes,
    });
    const engineCheck = plan.step({
        name: `${cluster}-vllm-check`,
        ...onCheckNode,
        spec: {
            create: derive(
                nodeValues.map((v) => v.engine),
                (...probes: EngineProbeResult[]) =>
                    engine.checkScript(
                        config.nodes
                            .map((node, i) => ({
                                node: node.name,
                                runtime: node.runtime,
                                probe: probes[i],
                                argv: engine.serveArgv(config.model, serverOf(node)),
                            }))
                            .filter((c, i) => !(config.nodes[i].retired && c.probe.version === "none")),
                    ),
            ),
        },
        after: [...allProbes, nodeCheck],
    });
    plan.values[`${cluster}.engineVersions`] = derive([stdoutOf(engineCheck)], (out: string) => engineVersionsOf(out, config.nodes));

    // Every node's host layers: firewall, interconnect, PFC, NCCL, the link and NCCL checks.
    const layers = config.nodes.map((node) => {
        const p = probed.get(node.name) as { values: NodeValues; probes: string[] };
        return hostLayers(plan, node, p.values, [...p.probes, engineCheck]);
    });
    const forwarding = layers.flatMap((l) => (l.forwarding ? [l.forwarding] : []));
    for (const [i, node] of config.nodes.entries()) {
        const check = checkLayers(plan, node, layers[i], node.fabric !== undefined ? forwarding : []);
        const { interconnect, nccl, firewall, rdma } = layers[i];
        plan.hostReady.set(node.name, [interconnect, nccl, ...(firewall ? [firewall] : []), ...(check ? [check] : []), ...(rdma ? [rdma] : []), ...forwarding]);
    }

    const serving = servingLayers(plan, nodeValues);
    frontends(plan, serving.headServer);
    return {
        items: plan.items,
        values: plan.values,
        warnings: plan.warnings,
        outputs: clusterOutputs(plan, probed, serving.dashboard),
    };
}

/** A node's component and its probes; the values they report. */
function nodeProbes(plan: PlanBuilder, node: NodeConfig): { values: NodeValues; probes: string[] } {
    const { config } = plan;
    const n = node.name;
    const child = nodeChild(n);
    plan.component("ClusterNode", n, { roce: output(valueOf(`${n}.roceStatus`)) }, node.retired ? { retired: true } : {});
    // A root login's step is the root check it always was; another user's proves it can become root, and says how.
    const ssh = plan.step({
        name: `${n}-ssh`,
        node: n,
        ...child,
        connection: "ssh",
        spec: node.ssh.user === "root" ? { create: SSH_READY_SCRIPT } : { create: SSH_LOGIN_SCRIPT, asLoginUser: true },
        after: [],
    });
    const hardware = plan.step({ name: `${n}-probe`, node: n, ...child, spec: { create: hardwareProbe.script() }, after: [ssh] });
    const ray =
        config.executor.ray !== undefined
            ? plan.step({ name: `${n}-ray-probe`, node: n, ...child, spec: { create: rayProbe.script({ node: n, runtime: node.runtime }) }, after: [ssh] })
            : undefined;
    // The serving engine's probe (its name stays `-vllm-probe` whatever the engine: URNs of deployed
    // stacks); its read-back (docker): the tag against the image ID it found, which the serving units start.
    const engine = engineStrategy(config.engine);
    const probeRead = engineProbeReadScript({ node: n, runtime: node.runtime });
    const engineProbe = plan.step({
        name: `${n}-vllm-probe`,
        node: n,
        ...child,
        spec: { create: engine.probe.script({ node: n, runtime: node.runtime }), ...(probeRead !== undefined ? { read: probeRead } : {}) },
        after: [ssh],
    });
    // First contact: the node as its owner left it, read before anything changes (the node check judges it).
    const contact = contactProbeFor(config, node);
    const facts = plan.step({
        name: `${n}-facts`,
        node: n,
        ...child,
        spec: {
            create: firstContactScript(contact),
            read: firstContactReadScript(
                contact,
                node.interconnect.map((i) => i.address),
            ),
        },
        after: [ssh],
    });
    // A mesh or ring: its cables against LLDP where lldpd runs; a mismatch stops the cluster
    // before anything changes anywhere (the cluster's checks wait for every probe).
    let cabling: string | undefined;
    if (node.fabric !== undefined) {
        const fabric = node.fabric;
        const lldp = plan.step({ name: `${n}-lldp-probe`, node: n, ...child, spec: { create: lldpProbe.script() }, after: [ssh] });
        const names = config.nodes.map((other) => other.name);
        cabling = plan.step({
            name: `${n}-cabling-check`,
            node: n,
            ...child,
            spec: { create: derive([stdoutOf(lldp)], (out: string | undefined) => cablingCheckScript(n, fabric.links, lldpProbe.parse(out ?? ""), names)) },
            after: [lldp],
        });
    }
    const devices = plan.value(`${n}.devices`, [stdoutOf(hardware)], (out: string) => hardwareProbe.parse(out));
    const engineResult = plan.value(`${n}.engine`, [stdoutOf(engineProbe)], (out: string) => engine.probe.parse(out));
    const values: NodeValues = {
        devices,
        names: plan.value(`${n}.names`, [devices], (d: RoceDevice[]) =>
            resolveInterfaceNames(
                n,
                node.interconnect.map((i) => i.name),
                d,
            ),
        ),
        engine: engineResult,
        imageId: plan.value(`${n}.imageId`, [engineResult], (probe: EngineProbeResult) => probe.imageId),
        firstContact: plan.value(`${n}.firstContact`, [stdoutOf(facts)], (out: string | undefined) => parseFirstContact(contact, out ?? "")),
        firstContactProbed: plan.value(`${n}.firstContactProbed`, [stdoutOf(facts)], (out: string | undefined) => (out ?? "").includes(FACT_SECTION_PREFIX)),
        ...(ray !== undefined ? { rayVersion: plan.value(`${n}.rayVersion`, [stdoutOf(ray)], (out: string) => rayProbe.parse(out)) } : {}),
    };
    return { values, probes: [hardware, engineProbe, ...(ray ? [ray] : []), ...(cabling ? [cabling] : []), facts] };
}

/** The cluster-wide warnings of the config itself: no firewall, an API open to everyone, retired nodes. */
function clusterWarnings(plan: PlanBuilder): void {
    const config = plan.config;
    if (!config.firewall.enabled) {
        plan.warn([
            "firewall.enabled is false: no firewall of ours guards the nodes, so Ray's ports, the engine's internal ports and NCCL's " +
                'listen to anyone who reaches a node (docs/operations.md, "Ports"). Set it to true (the default) unless another firewall ' +
                "keeps them to the cluster's nodes.",
        ]);
    }
    // The API beyond loopback with no source ranges: anyone who reaches the head, in plain HTTP.
    if (!isLoopback(config.model.apiHost) && (!config.firewall.enabled || config.firewall.apiAllowFrom.length === 0)) {
        plan.warn([
            `the API (${apiBaseUrl(config.head.ssh.host, config.model.apiPort)}) answers anyone who reaches ${config.head.name} on port ` +
                `${config.model.apiPort}, in plain HTTP: the API key crosses the network in clear, and it guards only /v1 and a few other ` +
                'prefixes (docs/operations.md, "Ports"). Set firewall.apiAllowFrom to the ranges that may use it (e.g. [192.168.1.0/24]), ' +
                "or model.apiHost: 127.0.0.1 and reach it through an SSH tunnel.",
        ]);
    }
    for (const node of config.nodes.filter((n) => n.retired)) {
        plan.warn(
            [
                `${node.name} is retired (nodes[${config.nodes.indexOf(node)}].retired): nothing runs on it, and its resources leave the stack ` +
                    "without their delete (nothing on the node is cleaned up). After an up with it retired, remove it from nodes and run up " +
                    "to plan the cluster without it; or tear the stack down with pulumi destroy --run-program.",
            ],
            node.name,
        );
    }
}

/**
 * A node's host layers after the cluster's checks (`probe`: what they wait for): the take-over of
 * other tools' claims, the firewall, the interconnect, forwarding (a mesh or ring), PFC and NCCL's
 * files, and the RDMA bandwidth test. Returns their names.
 */
function hostLayers(plan: PlanBuilder, node: NodeConfig, values: NodeValues, probe: string[]): HostLayers {
    const { config } = plan;
    const n = node.name;
    const child = nodeChild(n);
    // interconnect.takeOver: other tools' netplan files and NetworkManager off our ports, with a backup destroy puts back.
    let takeOver: string | undefined;
    if (config.interconnect.takeOver) {
        const takeOverOf = (names: string[]) =>
            takeOverPlan({ node: n, interfaces: node.interconnect.map((iface, i) => ({ name: names[i], address: iface.address })) });
        takeOver = plan.step({
            name: `${n}-takeover`,
            node: n,
            ...child,
            spec: {
                create: derive([values.names], (names: string[]) => takeOverOf(names).create),
                delete: derive([values.names], (names: string[]) => takeOverOf(names).delete),
                read: derive([values.names], (names: string[]) => takeOverOf(names).read),
            },
            after: probe,
            timeouts: { create: "5m", update: "5m", delete: "5m" },
        });
    }
    let firewall: string | undefined;
    if (config.firewall.enabled) {
        firewall = `${n}-firewall`;
        plan.component("Firewall", firewall, { status: output(valueOf(`${n}.firewallStatus`)) }, { ...child, after: probe });
        const apply = plan.step({ name: `${firewall}-apply`, node: n, parent: firewall, spec: firewallPlan(node.firewall).step, after: [] });
        plan.value(`${n}.firewallStatus`, [stdoutOf(apply)], statusLine);
        statusWarning(plan, apply, firewall);
    } else {
        plan.value(`${n}.firewallStatus`, [], () => "off: firewall.enabled is false (the internal ports listen to anyone who reaches them)");
    }
    // The interconnect: a mesh or ring names its ports in config (checkCabling): its cables, routes and MTU.
    const interconnect = `${n}-interconnect`;
    const linkSettings = {
        ...(node.linkCheck.minSpeedMbps !== undefined ? { minSpeedMbps: node.linkCheck.minSpeedMbps } : {}),
        lowSpeed: node.linkCheck.lowSpeed,
    };
    const netplanSpec = plan.value(`${n}.netplanSpec`, [values.names], (names: string[]): NetplanSpec => {
        if (node.fabric !== undefined) return fabricNetplanSpec(node.fabric, config.interconnect.mtu, linkSettings);
        return {
            node: n,
            mtu: config.interconnect.mtu,
            interfaces: node.interconnect.map((iface, i) => ({ name: names[i], address: iface.address })),
            peers: node.peers.map((p) => ({ node: p.node, ip: p.ip, via: names[p.via] })),
            linkCheck: linkSettings,
        };
    });
    const netplan = plan.value(`${n}.netplan`, [netplanSpec], (spec: NetplanSpec) => netplanPlan(spec));
    plan.component(
        "NetplanInterconnect",
        interconnect,
        { netplan: derive([netplan], (p: ReturnType<typeof netplanPlan>) => p.netplan), links: output(valueOf(`${n}.interconnectLinks`)) },
        // The interconnect waits for the probes and the cluster's checks (and the take-over).
        { ...child, after: takeOver ? [...probe, takeOver] : probe },
    );
    const interconnectApply = plan.step({
        name: `${interconnect}-apply`,
        node: n,
        parent: interconnect,
        spec: {
            create: derive([netplan], (p: ReturnType<typeof netplanPlan>) => p.step.create),
            delete: derive([netplan], (p: ReturnType<typeof netplanPlan>) => p.step.delete),
            read: derive([netplan], (p: ReturnType<typeof netplanPlan>) => p.step.read),
        },
        after: [],
        timeouts: { create: "10m", update: "10m", delete: "5m" },
    });
    plan.value(`${n}.interconnectLinks`, [stdoutOf(interconnectApply)], (out: string | undefined) => linkCheck.parse(out ?? "").links);
    plan.warn(
        derive([stdoutOf(interconnectApply)], (out: string | undefined) => linkCheck.parse(out ?? "").warnings.map((w) => `${interconnect}: ${w}`)),
        interconnect,
    );
    let forwarding: string | undefined;
    if (node.fabric !== undefined && node.fabric.forwardingOn.length > 0) {
        // After the interconnect (its interfaces carry the flags); the transit rules need the firewall's forward chain too.
        forwarding = plan.step({
            name: `${n}-forwarding`,
            node: n,
            ...child,
            spec: forwardingPlan(node.fabric, node.firewall.members),
            after: [interconnect, ...(firewall ? [firewall] : [])],
        });
    }
    const chain = roceChainPlan(config);
    let pfc: string | undefined;
    if (node.roce.enabled) {
        pfc = `${n}-roce`;
        const roce = { priority: chain.pfc.priority, trustDscp: chain.pfc.trustDscp, dscp: chain.pfc.dscp, peermem: node.roce.peermem.load };
        const pfcOf = plan.value(`${n}.pfc`, [values.names, values.devices], (names: string[], devices: RoceDevice[]) =>
            pfcPlan(
                names.filter((name) => devices.some((dev) => dev.netdev === name)),
                roce,
            ),
        );
        plan.component("RocePfc", pfc, { status: output(valueOf(`${n}.roceStatus`)) }, { ...child, after: [interconnect] });
        const apply = plan.step({
            name: `${pfc}-apply`,
            node: n,
            parent: pfc,
            spec: {
                create: derive([pfcOf], (p: ReturnType<typeof pfcPlan>) => p.step.create),
                delete: derive([pfcOf], (p: ReturnType<typeof pfcPlan>) => p.step.delete),
                read: derive([pfcOf], (p: ReturnType<typeof pfcPlan>) => p.step.read),
            },
            after: [],
        });
        plan.value(`${n}.roceStatus`, [stdoutOf(apply)], statusLine);
        statusWarning(plan, apply, pfc);
        if (!roce.trustDscp && roce.priority !== 0) {
            // Untagged RoCE v2 packets carry no PCP: with trust pcp the NIC puts them on priority 0.
            plan.warn(
                [
                    `${pfc}: roce.trustDscp is false, so the NIC ignores the DSCP NCCL marks and its untagged RoCE traffic lands on priority 0, not on PFC priority ${roce.priority}; set roce.trustDscp: true`,
                ],
                pfc,
            );
        }
    } else {
        const reason = node.roce.reason;
        plan.value(`${n}.roceStatus`, [], () => reason);
    }
    const trafficClass = chain.trafficClass;
    plan.value(`${n}.roce`, [valueOf(`${n}.roceStatus`)], (status: string): RoceChain => ({
        status,
        ...(node.roce.enabled
            ? {
                  priority: config.roce.priority,
                  trust: config.roce.trustDscp ? "dscp" : "pcp",
                  dscp: config.roce.dscp,
                  peermem: `${node.roce.peermem.load ? "loaded" : "not loaded"}: ${node.roce.peermem.reason}`,
              }
            : {}),
        ...(trafficClass !== undefined ? { trafficClass } : {}),
    }));
    // NCCL's files: /etc/nccl.conf and the environment file Ray and the engine load.
    const nccl = `${n}-nccl`;
    const ncclOf = ncclPlan(node.runtime, node.ip);
    const files = plan.value(`${n}.ncclFiles`, [values.names, values.devices], (names: string[], devices: RoceDevice[]) =>
        ncclOf.files({
            transport: config.transport,
            socketIfname: config.nccl.socketIfname ?? names[0],
            interfaceName: names[0],
            // A mesh or ring: both ports by exact name, and a routable RoCE GID (render/fabric.ts).
            ...(node.fabric !== undefined ? fabricNcclSelection(names, config.nccl.socketIfname) : {}),
            ibHca: config.transport === "roce" ? (config.nccl.ibHca ?? hcasFor(names, devices)) : [],
            heterogeneous: config.hasThor,
            ...(trafficClass !== undefined ? { ibTrafficClass: trafficClass } : {}),
            debug: config.nccl.debug,
            overrides: config.nccl.overrides,
        } satisfies NcclSpec),
    );
    type NcclFiles = ReturnType<typeof ncclOf.files>;
    plan.value(`${n}.envHash`, [files], (f: NcclFiles) => f.envHash);
    plan.component(
        "NcclConfig",
        nccl,
        { ncclConf: derive([files], (f: NcclFiles) => f.ncclConf), runtimeEnv: derive([files], (f: NcclFiles) => f.runtimeEnv) },
        { ...child, after: pfc ? [interconnect, pfc] : [interconnect] },
    );
    plan.step({
        name: `${nccl}-files`,
        node: n,
        parent: nccl,
        spec: { create: derive([files], (f: NcclFiles) => f.create), read: derive([files], (f: NcclFiles) => f.read), delete: ncclOf.delete },
        after: [],
    });
    // The RDMA bandwidth test: both ends of each rail run this step side by side (each node's own); it waits for the other end, bounded.
    const rdma = node.linkCheck.rdmaBandwidth;
    let rdmaStep: string | undefined;
    if (rdma !== undefined && rdma.rails.length > 0) {
        rdmaStep = plan.step({
            name: `${n}-rdma-bandwidth`,
            node: n,
            ...child,
            spec: {
                create: derive([values.names, values.devices], (names: string[], devices: RoceDevice[]) =>
                    rdmaBandwidthProbe.script({
                        node: n,
                        rails: rdma.rails.map((r) => {
                            const device = devices.find((dev) => dev.netdev === names[r.via])?.device;
                            return {
                                role: r.role,
                                iface: names[r.via],
                                ...(device !== undefined ? { device } : {}),
                                peer: r.peer,
                                peerIp: r.peerIp,
                                port: r.port,
                            };
                        }),
                        durationSeconds: rdma.durationSeconds,
                        waitSeconds: rdma.waitSeconds,
                        ...(rdma.minGbps !== undefined ? { minGbps: rdma.minGbps } : {}),
                        lowBandwidth: node.linkCheck.lowSpeed,
                    }),
                ),
            },
            after: [interconnect, ...(pfc ? [pfc] : []), ...(firewall ? [firewall] : [])],
            timeouts: { create: "30m", update: "30m" },
        });
        const measured = stdoutOf(rdmaStep);
        plan.warn(
            derive([measured], (out: string | undefined) => rdmaBandwidthProbe.parse(out ?? "").warnings.map((w) => `${n}-rdma-bandwidth: ${w}`)),
            n,
        );
        plan.value(`${n}.links`, [valueOf(`${n}.interconnectLinks`), measured], (a: string[], out: string | undefined) => [
            ...a,
            ...rdmaBandwidthProbe.parse(out ?? "").links,
        ]);
    } else {
        plan.value(`${n}.links`, [valueOf(`${n}.interconnectLinks`)], (a: string[]) => a);
    }
    return { interconnect, nccl, ...(firewall ? { firewall } : {}), ...(rdmaStep ? { rdma: rdmaStep } : {}), ...(forwarding ? { forwarding } : {}) };
}

/** A node's host layers by what they are (undefined: the node has none of it). */
interface HostLayers {
    interconnect: string;
    nccl: string;
    firewall?: string;
    rdma?: string;
    forwarding?: string;
}

/** A node's NCCL check rank (check.enabled) and node_exporter (metrics.enabled), after its host layers; the check's name, if any. */
function checkLayers(plan: PlanBuilder, node: NodeConfig, layers: HostLayers, fabricSteps: readonly string[]): string | undefined {
    const { config } = plan;
    const n = node.name;
    const { interconnect, nccl, firewall, rdma } = layers;
    let check: string | undefined;
    if (config.check.enabled) {
        // Rank 0 on the head, whose address every rank dials; the workers in config order.
        check = `${n}-check`;
        const checkOf = ncclCheckPlan({
            node: n,
            runtime: node.runtime,
            rank: config.rankOrder.indexOf(n),
            worldSize: config.nodes.length,
            masterAddr: config.head.ip,
            passMarkGBps: config.check.passMarkGBps,
            requireTransport: config.check.requireTransport,
        });
        // After the RDMA bandwidth test, when there is one: the two would share the links. In a
        // mesh or ring, after every node's forwarding too (rank 0 may be behind a neighbour).
        plan.component(
            "ClusterCheck",
            check,
            { result: output(valueOf(`${n}.checkResult`)) },
            { ...nodeChild(n), after: [interconnect, nccl, ...(firewall ? [firewall] : []), ...(rdma ? [rdma] : []), ...fabricSteps] },
        );
        const step = plan.step({
            name: `${check}-nccl`,
            node: n,
            parent: check,
            spec: { create: derive([valueOf(`${n}.envHash`)], checkOf.create) },
            after: [],
            timeouts: { create: "15m", update: "15m" },
        });
        plan.value(`${n}.checkResult`, [stdoutOf(step)], checkOf.summary);
    }
    // metrics.enabled: node_exporter on the node's cluster address (the firewall keeps it to the members).
    if (config.metrics !== undefined) {
        plan.step({
            name: `${n}-node-exporter`,
            node: n,
            ...nodeChild(n),
            spec: exporterStep({ node: n, address: node.ip, port: config.metrics.exporterPort }),
            after: [interconnect, ...(firewall ? [firewall] : [])],
        });
    }
    return check;
}

/** Ray (ray executor), the model sync, and the engine's servers; the head's server and the dashboard, when there are. */
function servingLayers(plan: PlanBuilder, nodeValues: readonly NodeValues[]): { headServer?: string; dashboard?: string } {
    const { config } = plan;
    const executor = config.executor;
    const valuesOf = (name: string) => nodeValues[config.nodes.findIndex((n) => n.name === name)];
    const ready = (name: string) => plan.hostReady.get(name) as string[];
    // With Ray, the engine depends on every node's Ray: it starts after all of them, and destroy stops
    // it before any Ray it has actors on. Without, each server waits for its node's host layers.
    let servingAfter = (node: string): string[] => ready(node);
    const rayLayout = executor.ray;
    let rayToken: Ref | undefined;
    let dashboard: string | undefined;
    if (rayLayout) {
        // The Ray token: rayAuthToken, or derived from the root secret.
        rayToken = config.rayAuthToken ? "secret:rayAuthToken" : plan.derived(SECRET_PURPOSES.rayAuthToken);
        const rayNode = (name: string, role: "head" | "worker", after: readonly string[]) => {
            const node = config.nodes.find((n) => n.name === name) as NodeConfig;
            const spec = rayStartSpec(config, node, role);
            const component = `${name}-ray-${role}`;
            const rayOf = role === "head" ? rayPlan(spec, node.runtime, config.watchdog) : rayPlan(spec, node.runtime);
            const unit = plan.value(`${component}.unit`, [valueOf(`${name}.envHash`), valuesOf(name).imageId], (envHash: string, imageId?: string) =>
                rayOf.unit(envHash, imageId),
            );
            plan.component(
                role === "head" ? "RayHead" : "RayWorker",
                component,
                { unit: output(unit), ...(role === "head" ? { address: rayLayout.address, dashboard: rayLayout.dashboard.access } : {}) },
                { ...nodeChild(name), after },
            );
            const auth = plan.step({
                name: `${component}-auth`,
                node: name,
                parent: component,
                spec: { ...rayOf.auth, stdin: derive([rayToken as Ref], (token: string) => rayOf.authFile(token)), logging: "none" },
                after: [],
            });
            const started = plan.step({
                name: `${component}-unit`,
                node: name,
                parent: component,
                spec: {
                    create: derive([unit], (u: string) => rayOf.unitStep.create(u)),
                    delete: rayOf.unitStep.delete,
                    read: derive([unit], (u: string) => rayOf.unitStep.read(u)),
                },
                after: [auth],
                timeouts: { create: "10m", update: "10m" },
            });
            return { component, started, unit, rayOf };
        };
        const head = rayNode(rayLayout.head, "head", ready(rayLayout.head));
        readiness(plan, {
            name: head.component,
            node: rayLayout.head,
            unit: head.unit,
            script: head.rayOf.ready(rayLayout.address, rayLayout.expectedNodes, rayLayout.expectedGpus, rayLayout.members),
            timeout: "10m",
            after: [head.started],
        });
        const workers = rayLayout.workers.map((name) => {
            return rayNode(name, "worker", [...ready(name), head.started]).component;
        });
        servingAfter = () => [head.component, ...workers];
        dashboard = rayLayout.dashboard.access;
    }

    // The model on every node before any engine starts (downloaded once on the head, pulled over
    // the interconnect; a local path is checked). Runs beside Ray.
    const modelSync = modelSyncSteps(plan);

    // The workers' servers first: the head's engine restarts after them when one of them restarts.
    if (config.model.paused === true) {
        // Paused: no server at all, so the next up removes the engine's layer (each step's delete) and leaves every other layer as it is.
        plan.warn([
            "model.paused is true: vLLM is stopped and removed on every node (network, PFC, NCCL, firewall, Ray and the model cache stay); " +
                "set it to false and run up to serve again.",
        ]);
        return { ...(dashboard !== undefined ? { dashboard } : {}) };
    }
    const engine = engineStrategy(config.engine);
    const peers = executor.servers
        .slice(1)
        .map((placement) => server(plan, engine.plan(serverSpec(plan, placement, rayLayout?.address)), placement, [], valuesOf, servingAfter, modelSync));
    const head = server(
        plan,
        engine.plan(serverSpec(plan, executor.servers[0], rayLayout?.address)),
        executor.servers[0],
        peers,
        valuesOf,
        servingAfter,
        modelSync,
        rayLayout && rayToken ? { members: rayLayout.members, token: rayToken } : undefined,
    );
    return { headServer: head, ...(dashboard !== undefined ? { dashboard } : {}) };
}

/** `ray start`'s settings for `node` as the head or a worker. */
export function rayStartSpec(config: Config, node: NodeConfig, role: "head" | "worker"): RayStartSpec {
    return {
        role,
        nodeIp: node.ip,
        headIp: config.head.ip,
        port: config.ray.port,
        gpus: node.gpus,
        numCpus: config.ray.numCpus,
        objectStoreMemoryMb: config.ray.objectStoreMemoryMb,
        dashboardHost: config.ray.dashboardHost,
        dashboardPort: config.ray.dashboardPort,
        ports: config.ray,
    };
}

/** What the engine renders for one server. */
function serverSpec(plan: PlanBuilder, placement: ServerPlacement, rayAddress: string | undefined) {
    const node = plan.config.nodes.find((n) => n.name === placement.node) as NodeConfig;
    return {
        model: plan.config.model,
        placement,
        runtime: node.runtime,
        unifiedMemory: node.unifiedMemory,
        rayAddress,
        watchdog: plan.config.watchdog,
    };
}

/** The model sync (its component and steps, from modelSyncPlan); its component's name. */
function modelSyncSteps(plan: PlanBuilder): string {
    const { cluster, config } = plan;
    const name = `${cluster}-model`;
    const specOf = (node: NodeConfig) => ({ node: node.name, ip: node.ip, ips: node.interconnect.map((i) => i.ip), runtime: node.runtime });
    const workers = config.nodes.filter((n) => n !== config.head);
    const steps = modelSyncPlan({
        source: config.model.source,
        localModel: config.localModel,
        removeCacheOnDestroy: config.model.removeCacheOnDestroy === true,
        syncStreams: config.model.syncStreams,
        withToken: config.hfToken !== undefined,
        head: specOf(config.head),
        workers: workers.map(specOf),
    });
    plan.component("ModelSync", name, {});
    // A keyed step is replaced (not updated) when the repository changes, the old step's delete
    // first: with model.removeCacheOnDestroy the old repository goes before the new one arrives,
    // and a replaced serve step cannot remove the marks its successor just relied on.
    for (const step of steps) {
        const node = config.nodes.find((n) => n.name === step.node) as NodeConfig;
        const stdin =
            step.stdin === "hfToken"
                ? "secret:hfToken"
                : step.stdin === "syncSecret"
                  ? plan.derived(SECRET_PURPOSES.modelSync(config.model.source))
                  : undefined;
        plan.step({
            name: `${name}-${step.name}`,
            node: step.node,
            parent: name,
            spec: {
                create: step.create,
                ...(step.delete === undefined ? {} : { delete: step.delete }),
                ...(stdin === undefined ? {} : { stdin: derive([stdin], (s: string) => s) }),
                ...(step.keyed ? { triggers: [config.model.source] } : {}),
            },
            after: [...step.after.map((before) => `${name}-${before}`), ...(plan.hostReady.get(step.node) as string[])],
            ...(step.keyed ? { deleteBeforeReplace: true as const } : {}),
            ...(step.timeout === undefined ? {} : { timeouts: { create: step.timeout, update: step.timeout } }),
            ...(node.retired ? { retired: true as const } : {}),
        });
    }
    // Per node, for the modelSync output: what the last sync did there.
    for (const node of config.nodes) {
        const what = config.localModel
            ? derive([], () => "a local path: checked on the node, nothing copied")
            : node === config.head
              ? derive([], () => "the head: downloads the model and serves it to the other nodes")
              : derive([stdoutOf(`${name}-pull-${node.name}`)], (out: string | undefined) => pullSummary(out));
        plan.values[`${node.name}.modelSync`] = what;
    }
    return name;
}

/**
 * One server of the engine: its secrets step, its unit step, a headless rank's follower, and on
 * rank 0 the readiness check (VllmServer, its type token kept whatever the engine). `peers`: the
 * other ranks' servers (rank 0 of a multi-node engine), whose units' hash its own unit carries.
 */
function server(
    plan: PlanBuilder,
    enginePlan: EnginePlan,
    placement: ServerPlacement,
    peers: readonly string[],
    valuesOf: (node: string) => NodeValues,
    servingAfter: (node: string) => string[],
    modelSync: string,
    ray?: { members: readonly string[]; token: Ref },
): string {
    const { config } = plan;
    const n = placement.node;
    const name = `${n}-vllm`;
    plan.component(
        "VllmServer",
        name,
        { baseUrl: apiBaseUrl(config.head.ssh.host, enginePlan.api.port), servedModel: enginePlan.api.servedModel },
        { ...nodeChild(n), after: [...servingAfter(n), modelSync, ...peers] },
    );
    const secretsFile = plan.value(`${name}.secretsFile`, ["secret:apiKey"], (key: string) => enginePlan.secretsFile(key));
    // Another engine than vLLM: first the other engine's leftovers go (see EnginePlan.switchCleanup).
    const cleanup =
        enginePlan.switchCleanup !== undefined
            ? plan.step({ name: `${name}-engine-switch`, node: n, parent: name, spec: enginePlan.switchCleanup, after: [] })
            : undefined;
    const secrets = plan.step({
        name: `${name}-secrets`,
        node: n,
        parent: name,
        // A changed secret changes stdin: an update, which rewrites the file.
        spec: { ...enginePlan.secrets, stdin: derive([secretsFile], (file: string) => file), logging: "none" },
        after: cleanup ? [cleanup] : [],
    });
    const unit = plan.value(
        `${name}.unit`,
        [valueOf(`${n}.envHash`), valuesOf(n).imageId, ...peers.map((p) => valueOf(`${p}.unit`))],
        (envHash: string, imageId: string | undefined, ...units: string[]) => enginePlan.unit(envHash, units, imageId),
    );
    const unitStep = plan.step({
        name: `${name}-unit`,
        node: n,
        parent: name,
        spec: {
            create: derive([unit], (u: string) => enginePlan.unitStep.create(u)),
            delete: enginePlan.unitStep.delete,
            read: derive([unit], (u: string) => enginePlan.unitStep.read(u)),
        },
        after: [secrets],
        timeouts: { create: "10m", update: "10m" },
    });
    // A headless rank follows its head: its follower unit restarts it when the head's engine ends.
    if (enginePlan.follow !== undefined) {
        plan.step({ name: `${name}-follow`, node: n, parent: name, spec: enginePlan.follow, after: [unitStep] });
    }
    // Changes whenever this node's engine restarts because of us (its unit or its secrets file changed); a secret.
    plan.values[`${name}.generation`] = deriveSecret([unit, secretsFile], (u: string, file: string) => contentHash(`${u}\n${file}`));
    if (enginePlan.ready !== undefined) {
        // A new API key (the engine restarted by the secrets step), a restarted peer or a change of the Ray
        // cluster's nodes or token re-runs the probe too.
        const uses: Ref[] = [valueOf(`${name}.generation`), ...peers.map((p) => valueOf(`${p}.generation`)), ...(ray ? [ray.token] : [])];
        readiness(plan, {
            name,
            node: n,
            unit,
            script: enginePlan.ready,
            timeout: enginePlan.readyTimeout,
            after: [unitStep],
            triggers: [deriveSecret(uses, (...all: string[]) => contentHash([...all, ...(ray?.members ?? [])].join("\n")))],
        });
    }
    return name;
}

/** The "done only when it really works" step after a unit: a bounded probe, re-run whenever the unit (or a trigger) changes. */
function readiness(
    plan: PlanBuilder,
    args: { name: string; node: string; unit: Ref; script: string; timeout: string; after: string[]; triggers?: Val<string>[] },
): void {
    plan.step({
        name: `${args.name}-ready`,
        node: args.node,
        parent: args.name,
        spec: {
            header: derive([args.unit], (unit: string) => `# unit ${contentHash(unit)}\n`),
            create: args.script,
            ...(args.triggers ? { triggers: args.triggers } : {}),
        },
        after: args.after,
        timeouts: { create: args.timeout, update: args.timeout },
    });
}

/** Open WebUI (frontend.openWebui) and Prometheus (metrics.enabled) on the head, after its server. */
function frontends(plan: PlanBuilder, headServer: string | undefined): void {
    const { config } = plan;
    const ui = config.openWebui;
    if (ui !== undefined) {
        const { adminPassword: _adminPassword, ...spec } = ui;
        const uiPlan = openWebuiPlan({ ...spec, servedModel: config.model.servedName }, config.watchdog);
        const name = `${ui.node}-open-webui`;
        const secretKey = plan.derived(SECRET_PURPOSES.openWebuiSessionKey);
        plan.component(
            "OpenWebui",
            name,
            { unit: uiPlan.unit },
            { ...nodeChild(ui.node), after: headServer ? [headServer] : (plan.hostReady.get(ui.node) as string[]) },
        );
        const at = { node: ui.node, parent: name };
        const install = plan.step({ name: `${name}-install`, ...at, spec: uiPlan.install, after: [], timeouts: { create: "60m", update: "60m" } });
        const data = plan.step({ name: `${name}-data`, ...at, spec: uiPlan.data, after: [] });
        const envFile = plan.value(
            `${name}.envFile`,
            ["secret:apiKey", "secret:openWebuiAdminPassword", secretKey],
            (apiKey: string, adminPassword: string, sessionKey: string) => uiPlan.envFile({ apiKey, adminPassword, secretKey: sessionKey }),
        );
        // A changed secret changes stdin: an update, which rewrites the file and restarts Open WebUI.
        const env = plan.step({ name: `${name}-env`, ...at, spec: { ...uiPlan.env, stdin: derive([envFile], (f: string) => f), logging: "none" }, after: [] });
        const unit = plan.step({
            name: `${name}-unit`,
            ...at,
            spec: { create: uiPlan.unitStep.create, delete: uiPlan.unitStep.delete, read: uiPlan.unitStep.read },
            after: [install, data, env],
            timeouts: { create: "10m", update: "10m" },
        });
        // New secrets restart it (the env step): the probe runs again.
        plan.values[`${name}.unitText`] = derive([], () => uiPlan.unit);
        readiness(plan, {
            name,
            node: ui.node,
            unit: valueOf(`${name}.unitText`),
            script: uiPlan.ready,
            timeout: "20m",
            after: [unit],
            triggers: [deriveSecret([envFile], (file: string) => contentHash(file))],
        });
    }
    const metrics = config.metrics;
    if (metrics !== undefined) {
        // Prometheus on the head's loopback, after every exporter and the head's server.
        const head = config.head.name;
        const scraped = config.nodes.filter((n) => !n.retired);
        plan.step({
            name: `${head}-prometheus`,
            node: head,
            ...nodeChild(head),
            spec: prometheusStep({
                node: head,
                metrics,
                exporters: scraped.map((n) => ({ node: n.name, address: n.ip, port: metrics.exporterPort })),
                ...(headServer !== undefined
                    ? { engine: { target: `${addressOnNode(config.model.apiHost)}:${config.model.apiPort}`, name: config.engine.kind } }
                    : {}),
            }),
            after: [...scraped.map((n) => `${n.name}-node-exporter`), ...(headServer ? [headServer] : (plan.hostReady.get(head) as string[]))],
        });
    }
}

/** The cluster's outputs: where the endpoint is, and per node what the last up found. */
function clusterOutputs(plan: PlanBuilder, probed: Map<string, { values: NodeValues }>, dashboard: string | undefined): Record<string, Val<unknown>> {
    const { cluster, config } = plan;
    const nodes = config.nodes;
    const perNode = (key: (node: NodeConfig) => Ref): Derived<Record<string, unknown>> =>
        derive(nodes.map(key), (...values: unknown[]) => Object.fromEntries(nodes.map((node, i) => [node.name, values[i]])));
    const everyNode = (text: string): Record<string, string> => Object.fromEntries(nodes.map((node) => [node.name, text]));
    const executor = config.executor;
    return {
        // Where the endpoint is (or will be again, when paused): the head's address and the API port.
        endpoint: apiBaseUrl(config.head.ssh.host, config.model.apiPort),
        servedModel: config.model.servedName,
        transport: config.transport,
        roce: perNode((n) => valueOf(`${n.name}.roce`)),
        links: perNode((n) => valueOf(`${n.name}.links`)),
        ncclCheck: config.check.enabled ? perNode((n) => valueOf(`${n.name}.checkResult`)) : derive([], () => everyNode("not run: check.enabled is false")),
        hostKeys: derive(
            nodes.map((n) => `step:${n.name}-ssh:hostKey` as Ref),
            (...keys: string[]) =>
                Object.fromEntries(nodes.map((n, i) => [n.name, keys[i] ? `${hostKeyFingerprint(keys[i])} (${keys[i].split(" ")[0]})` : "not recorded yet"])),
        ),
        firewall: perNode((n) => valueOf(`${n.name}.firewallStatus`)),
        ray: executor.ray
            ? derive(
                  nodes.map((n) => probed.get(n.name)?.values.rayVersion as Ref),
                  (...versions: (string | undefined)[]) => Object.fromEntries(nodes.map((n, i) => [n.name, rayAuthStatus(versions[i])])),
              )
            : derive([], () => everyNode(executor.rayUnused)),
        vllm: output(valueOf(`${cluster}.engineVersions`)),
        modelSync: perNode((n) => valueOf(`${n.name}.modelSync`)),
        ...(dashboard !== undefined ? { dashboard } : {}),
        ...(config.openWebui !== undefined ? { openWebui: config.openWebui.access } : {}),
        ...(config.metrics !== undefined ? { metrics: config.metrics.access } : {}),
    };
}

/** The check's `node: <engine> …` lines, per node (a retired node: not checked). */
function engineVersionsOf(stdout: string, nodes: readonly NodeConfig[]): Record<string, string> {
    const lines = stdout.split("\n");
    return Object.fromEntries(
        nodes.map((n) => {
            const line = lines.find((l) => l.startsWith(`${n.name}: `));
            return [n.name, line ? line.slice(n.name.length + 2) : n.retired ? "not checked: the node is retired" : "not checked yet"];
        }),
    );
}

/** A warning with the status a step printed, unless it is `enabled…` (PFC, firewall). */
function statusWarning(plan: PlanBuilder, step: string, component: string): void {
    plan.warn(
        derive([stdoutOf(step)], (out: string) => {
            const status = statusLine(out);
            return status.startsWith("enabled") ? [] : [`${component}: ${status}`];
        }),
        component,
    );
}
