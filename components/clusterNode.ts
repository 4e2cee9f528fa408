import * as pulumi from "@pulumi/pulumi";
import type { Config, NodeConfig } from "../config";
import { ClusterCheck } from "./clusterCheck";
import { Firewall } from "./firewall";
import { NcclConfig } from "./ncclConfig";
import { NetplanInterconnect } from "./netplanInterconnect";
import { SSH_LOGIN_SCRIPT, SSH_READY_SCRIPT, hostKeyToPin, noHostKeyMessage } from "./hostKey";
import { Connection, NodeHost, nodeConnection } from "./nodeConnection";
import type { Step } from "./sparkRemote";
import { hcasFor, resolveInterfaceNames } from "./nodeFacts";
import { typeToken } from "./package";
import { fabricNcclSelection, fabricNetplanSpec, forwardingPlan } from "./render/fabric";
import { cablingCheckScript, lldpProbe } from "./render/lldp";
import { type EngineProbeResult, engineProbeReadScript, hardwareProbe, rayProbe } from "./render/probe";
import { FirstContactFacts, firstContactReadScript, firstContactScript, parseFirstContact } from "./render/firstContact";
import { takeOverPlan } from "./render/takeOver";
import { exporterStep } from "./render/metrics";
import { contactProbeFor } from "./render/nodeCheck";
import { FACT_SECTION_PREFIX } from "./render/facts";
import { engineStrategy } from "./render/engine";
import { rdmaBandwidthProbe } from "./render/rdmaBandwidth";
import { RoceChain, roceChainPlan } from "./render/roceChain";
import { RocePfc } from "./rocePfc";

const TYPE = typeToken("ClusterNode");

export interface ClusterNodeArgs {
    /** This node, resolved (config/resolve.ts). */
    node: NodeConfig;
    /** The whole cluster: transport, MTU, NCCL and RoCE settings. */
    cluster: Config;
    /**
     * The cluster's vLLM check (every node's vLLM against what we render, and the nodes against
     * each other; components/sparkCluster.ts). It needs every node's vLLM probe, so it comes after
     * the nodes are built: every host layer here waits for it.
     */
    vllmCheck: Promise<pulumi.Resource>;
    /**
     * A mesh or ring: every node's forwarding step (the cluster's, known once every node is
     * built). Whatever crosses the fabric waits for them: a path to a non-neighbour needs the
     * middle node forwarding. Undefined for a pair or a switch.
     */
    fabricReady?: Promise<pulumi.Resource[]>;
}

/**
 * One machine of the cluster and its host layers, in order: SSH (we can act as root) → probe
 * (`ibdev2netdev`: interface and RDMA device names) → interconnect → PFC (RoCE nodes) → NCCL.
 * The node's serving layers (Ray, vLLM) are its children too; SparkCluster creates them because
 * they depend on the other nodes.
 *
 * Before this component existed every step was a child of SparkCluster: each child keeps
 * `aliases: [{ parent: <the cluster> }]` (see {@link ClusterNode.childOptions}), so a stack
 * deployed before sees no change.
 */
export class ClusterNode extends pulumi.ComponentResource {
    public readonly node: NodeConfig;
    /**
     * The SSH host key every command of this node checks (configured, or the one the node presented
     * on first contact: {@link hostKeyToPin}); empty when none is known, and then those commands fail.
     */
    public readonly hostKey: pulumi.Output<string>;
    /** The node's connection (host key pinned) and SSH user, bound once. */
    public readonly host: NodeHost;
    public readonly interconnect: NetplanInterconnect;
    public readonly nccl: NcclConfig;
    public readonly pfc?: RocePfc;
    public readonly firewall?: Firewall;
    /** IPv4 forwarding and Docker's transit rules (a mesh or ring node in the middle of some path). */
    public readonly forwarding?: pulumi.Resource;
    /** The NCCL check's rank on this node (check.enabled). */
    public readonly check?: ClusterCheck;
    /** The RDMA bandwidth test of this node's rails (interconnect.linkCheck.rdmaBandwidth.enabled). */
    public readonly rdmaBandwidth?: pulumi.Resource;
    /** What the link checks found at the last apply (the interconnect's, then the RDMA bandwidth test's). */
    public readonly links: pulumi.Output<string[]>;
    /** What the firewall lets in (`enabled: …`), or why it is off. */
    public readonly firewallStatus: pulumi.Output<string>;
    /** The Ray version the Ray probe found in the node's runtime (ray executor only; that probe fails without Ray). */
    public readonly rayVersion: pulumi.Output<string | undefined>;
    /** What the vLLM probe found in the node's runtime: its vLLM version and, for docker, the image's ID. */
    public readonly vllm: pulumi.Output<EngineProbeResult>;
    /**
     * The ID of the image its engine probe found at the last up (docker; undefined for a venv): the
     * serving units (the engine, Ray) start the image by it, not by its tag (RuntimeStrategy.pinned).
     */
    public readonly imageId: pulumi.Output<string | undefined>;
    /** The node's read-only probes (hardware, vLLM, Ray, first contact): the cluster's checks wait for them. */
    public readonly probes: pulumi.Resource[];
    /** What the first-contact probe found: memory, GPUs, other tools' netplan files, NetworkManager, addresses, Docker, disk. */
    public readonly firstContact: pulumi.Output<FirstContactFacts>;
    /** Whether that probe has run on the node (a retired node never probed has no output). */
    public readonly firstContactProbed: pulumi.Output<boolean>;
    /** The interconnect's interface names, as configured or detected (ibdev2netdev). */
    public readonly interfaceNames: pulumi.Output<string[]>;
    /** node_exporter on the node (metrics.enabled), which Prometheus on the head scrapes. */
    public readonly exporter?: pulumi.Resource;
    /** The take-over of other tools' claims on the interconnect's ports (interconnect.takeOver). */
    public readonly takeOver?: pulumi.Resource;
    /** PFC result (`enabled: …` / `lossy: …` / `skipped: …`). */
    public readonly roceStatus: pulumi.Output<string>;
    /** The RoCE chain on this node: PFC status, priority, trust, DSCP and NCCL's traffic class. */
    public readonly roce: pulumi.Output<RoceChain>;
    readonly #cluster: pulumi.Resource;
    /** Every node's forwarding step (a mesh or ring), from {@link ClusterNode.waitForFabric}. */
    #fabricSteps: pulumi.Resource[] = [];

    constructor(name: string, args: ClusterNodeArgs, opts: pulumi.ComponentResourceOptions & { parent: pulumi.Resource }) {
        super(TYPE, name, {}, opts);
        const { node, cluster } = args;
        this.node = node;
        this.#cluster = opts.parent;
        // The SSH step checks the configured host key, if any; without one the provider pins the key the
        // node presents on first contact, and checks it on the step's later runs (a changed host, port or
        // user included). Every later command checks the configured key, or the one the SSH step recorded.
        // (The SSH step's connection has no key but a configured one: a stack deployed before sees its
        // inputs unchanged, so it does not run again.)
        const connection = nodeConnection(node);
        const sudoPassword = node.ssh.sudoPassword !== undefined;
        const sshStep = new NodeHost(
            node.ssh.hostKey !== undefined ? pinHostKey(connection, node.ssh.hostKey, node.name, this) : connection,
            node.ssh.user,
            sudoPassword,
        );
        // A root login's step is the root check it always was; another user's proves it can become root, and says how.
        const ssh = sshStep.command(
            `${node.name}-ssh`,
            node.ssh.user === "root" ? { create: SSH_READY_SCRIPT } : { create: SSH_LOGIN_SCRIPT, asLoginUser: true },
            this.childOptions(),
        );
        // A configured key is known at once (in a preview too), without waiting for the SSH step's outputs.
        const configured = hostKeyToPin({ configured: node.ssh.hostKey });
        this.hostKey =
            configured !== undefined
                ? pulumi.output(configured)
                : pulumi.all([recordedPresentedKey(ssh), ssh.stdout]).apply(([presented, sshOutput]) => hostKeyToPin({ presented, sshOutput }) ?? "");
        this.host = new NodeHost(pinHostKey(connection, this.hostKey, node.name, this), node.ssh.user, sudoPassword);
        const hardware = this.host.command(`${node.name}-probe`, { create: hardwareProbe.script() }, this.childOptions({ dependsOn: [ssh] }));
        const rayStep =
            cluster.executor.ray !== undefined
                ? this.host.command(
                      `${node.name}-ray-probe`,
                      { create: rayProbe.script({ node: node.name, runtime: node.runtime }) },
                      this.childOptions({ dependsOn: [ssh] }),
                  )
                : undefined;
        this.rayVersion = rayStep ? rayStep.stdout.apply((out) => rayProbe.parse(out)) : pulumi.output(undefined);
        // The serving engine's probe (its resource name stays `-vllm-probe` whatever the engine: URNs of deployed stacks).
        const engine = engineStrategy(cluster.engine);
        // Its read-back (docker): the tag against the image ID it found, which the serving units start.
        const probeRead = engineProbeReadScript({ node: node.name, runtime: node.runtime });
        const vllmProbe = this.host.command(
            `${node.name}-vllm-probe`,
            { create: engine.probe.script({ node: node.name, runtime: node.runtime }), ...(probeRead !== undefined ? { read: probeRead } : {}) },
            this.childOptions({ dependsOn: [ssh] }),
        );
        this.vllm = vllmProbe.stdout.apply((out) => engine.probe.parse(out));
        this.imageId = this.vllm.apply((probe) => probe.imageId);
        const devices = hardware.stdout.apply((out) => hardwareProbe.parse(out));
        // First contact: the node as its owner left it, read before anything changes (the node check judges it).
        const contact = contactProbeFor(cluster, node);
        const facts = this.host.command(
            `${node.name}-facts`,
            {
                create: firstContactScript(contact),
                read: firstContactReadScript(
                    contact,
                    node.interconnect.map((i) => i.address),
                ),
            },
            this.childOptions({ dependsOn: [ssh] }),
        );
        this.firstContact = facts.stdout.apply((out) => parseFirstContact(contact, out ?? ""));
        this.firstContactProbed = facts.stdout.apply((out) => (out ?? "").includes(FACT_SECTION_PREFIX));
        // A mesh or ring: its cables against LLDP where lldpd runs; a mismatch stops the cluster
        // before anything changes anywhere (the cluster's vLLM check waits for every probe).
        let cabling: pulumi.Resource | undefined;
        if (node.fabric !== undefined) {
            const fabric = node.fabric;
            const lldp = this.host.command(`${node.name}-lldp-probe`, { create: lldpProbe.script() }, this.childOptions({ dependsOn: [ssh] }));
            const names = cluster.nodes.map((n) => n.name);
            cabling = this.host.command(
                `${node.name}-cabling-check`,
                { create: lldp.stdout.apply((out) => cablingCheckScript(node.name, fabric.links, lldpProbe.parse(out ?? ""), names)) },
                this.childOptions({ dependsOn: [lldp] }),
            );
        }
        this.probes = [hardware, vllmProbe, ...(rayStep ? [rayStep] : []), ...(cabling ? [cabling] : []), facts];
        // The host layers start after the probes of this node and the cluster's vLLM check, which
        // waits for every node's probes: a runtime that cannot run what we render, on any node,
        // stops the cluster before anything changes anywhere.
        const probe: pulumi.Input<pulumi.Resource>[] = [...this.probes, args.vllmCheck];
        const names = devices.apply((d) =>
            resolveInterfaceNames(
                node.name,
                node.interconnect.map((i) => i.name),
                d,
            ),
        );
        this.interfaceNames = names;
        // interconnect.takeOver: other tools' netplan files and NetworkManager off our ports, with a backup destroy puts back.
        if (cluster.interconnect.takeOver) {
            const plan = names.apply((n) =>
                takeOverPlan({ node: node.name, interfaces: node.interconnect.map((iface, i) => ({ name: n[i], address: iface.address })) }),
            );
            this.takeOver = this.host.command(
                `${node.name}-takeover`,
                { create: plan.apply((p) => p.create), delete: plan.apply((p) => p.delete), read: plan.apply((p) => p.read) },
                this.childOptions({ dependsOn: probe, customTimeouts: { create: "5m", update: "5m", delete: "5m" } }),
            );
        }

        if (cluster.firewall.enabled) {
            this.firewall = new Firewall(`${node.name}-firewall`, { host: this.host, spec: node.firewall }, this.childOptions({ dependsOn: probe }));
            this.firewallStatus = this.firewall.status;
        } else {
            this.firewallStatus = pulumi.output("off: firewall.enabled is false (the internal ports listen to anyone who reaches them)");
        }
        this.interconnect = new NetplanInterconnect(
            `${node.name}-interconnect`,
            {
                host: this.host,
                spec: names.apply((n) => {
                    const linkCheck = {
                        ...(node.linkCheck.minSpeedMbps !== undefined ? { minSpeedMbps: node.linkCheck.minSpeedMbps } : {}),
                        lowSpeed: node.linkCheck.lowSpeed,
                    };
                    // A mesh or ring names its ports in config (checkCabling): its cables, routes and MTU.
                    if (node.fabric !== undefined) return fabricNetplanSpec(node.fabric, cluster.interconnect.mtu, linkCheck);
                    return {
                        node: node.name,
                        mtu: cluster.interconnect.mtu,
                        interfaces: node.interconnect.map((iface, i) => ({ name: n[i], address: iface.address })),
                        peers: node.peers.map((p) => ({ node: p.node, ip: p.ip, via: n[p.via] })),
                        linkCheck,
                    };
                }),
            },
            this.childOptions({ dependsOn: this.takeOver ? [...probe, this.takeOver] : probe }),
        );
        if (node.fabric !== undefined && node.fabric.forwardingOn.length > 0) {
            // After the interconnect (its interfaces carry the flags); the transit rules need the firewall's forward chain too.
            this.forwarding = this.host.command(
                `${node.name}-forwarding`,
                forwardingPlan(node.fabric, node.firewall.members),
                this.childOptions({ dependsOn: [this.interconnect, ...(this.firewall ? [this.firewall] : [])] }),
            );
        }
        if (node.roce.enabled) {
            this.pfc = new RocePfc(
                `${node.name}-roce`,
                {
                    host: this.host,
                    interfaces: pulumi.all([names, devices]).apply(([n, d]) => n.filter((name) => d.some((dev) => dev.netdev === name))),
                    ...roceChainPlan(cluster).pfc,
                    peermem: node.roce.peermem.load,
                },
                this.childOptions({ dependsOn: [this.interconnect] }),
            );
            this.roceStatus = this.pfc.status;
        } else {
            this.roceStatus = pulumi.output(node.roce.reason);
        }
        const trafficClass = roceChainPlan(cluster).trafficClass;
        this.roce = this.roceStatus.apply((status): RoceChain => ({
            status,
            ...(node.roce.enabled
                ? {
                      priority: cluster.roce.priority,
                      trust: cluster.roce.trustDscp ? "dscp" : "pcp",
                      dscp: cluster.roce.dscp,
                      peermem: `${node.roce.peermem.load ? "loaded" : "not loaded"}: ${node.roce.peermem.reason}`,
                  }
                : {}),
            ...(trafficClass !== undefined ? { trafficClass } : {}),
        }));
        this.nccl = new NcclConfig(
            `${node.name}-nccl`,
            {
                host: this.host,
                runtime: node.runtime,
                nodeIp: node.ip,
                spec: pulumi.all([names, devices]).apply(([n, d]) => ({
                    transport: cluster.transport,
                    socketIfname: cluster.nccl.socketIfname ?? n[0],
                    interfaceName: n[0],
                    // A mesh or ring: both ports by exact name, and a routable RoCE GID (render/fabric.ts).
                    ...(node.fabric !== undefined ? fabricNcclSelection(n, cluster.nccl.socketIfname) : {}),
                    ibHca: cluster.transport === "roce" ? (cluster.nccl.ibHca ?? hcasFor(n, d)) : [],
                    heterogeneous: cluster.hasThor,
                    ...(trafficClass !== undefined ? { ibTrafficClass: trafficClass } : {}),
                    debug: cluster.nccl.debug,
                    overrides: cluster.nccl.overrides,
                })),
            },
            this.childOptions({ dependsOn: this.pfc ? [this.interconnect, this.pfc] : [this.interconnect] }),
        );
        const rdma = node.linkCheck.rdmaBandwidth;
        if (rdma !== undefined && rdma.rails.length > 0) {
            // Both ends of each rail run this step side by side (each node's own); it waits for the other end, bounded.
            const test = this.host.command(
                `${node.name}-rdma-bandwidth`,
                {
                    create: pulumi.all([names, devices]).apply(([n, d]) =>
                        rdmaBandwidthProbe.script({
                            node: node.name,
                            rails: rdma.rails.map((r) => {
                                const device = d.find((dev) => dev.netdev === n[r.via])?.device;
                                return {
                                    role: r.role,
                                    iface: n[r.via],
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
                this.childOptions({
                    dependsOn: [this.interconnect, ...(this.pfc ? [this.pfc] : []), ...(this.firewall ? [this.firewall] : [])],
                    customTimeouts: { create: "30m", update: "30m" },
                }),
            );
            this.rdmaBandwidth = test;
            const measured = test.stdout.apply((out) => {
                const { links, warnings } = rdmaBandwidthProbe.parse(out ?? "");
                for (const warning of warnings) pulumi.log.warn(`${node.name}-rdma-bandwidth: ${warning}`, this);
                return links;
            });
            this.links = pulumi.all([this.interconnect.links, measured]).apply(([a, b]) => [...a, ...b]);
        } else {
            this.links = this.interconnect.links;
        }
        if (cluster.check.enabled) {
            // Rank 0 on the head, whose address every rank dials; the workers in config order.
            const rank = cluster.rankOrder.indexOf(node.name);
            this.check = new ClusterCheck(
                `${node.name}-check`,
                {
                    host: this.host,
                    envHash: this.nccl.envHash,
                    spec: {
                        node: node.name,
                        runtime: node.runtime,
                        rank,
                        worldSize: cluster.nodes.length,
                        masterAddr: cluster.head.ip,
                        passMarkGBps: cluster.check.passMarkGBps,
                        requireTransport: cluster.check.requireTransport,
                    },
                },
                // After the RDMA bandwidth test, when there is one: the two would share the links. In a
                // mesh or ring, after every node's forwarding too (rank 0 may be behind a neighbour).
                this.childOptions({
                    dependsOn: withFabric(
                        [this.interconnect, this.nccl, ...(this.firewall ? [this.firewall] : []), ...(this.rdmaBandwidth ? [this.rdmaBandwidth] : [])],
                        node.fabric !== undefined ? args.fabricReady : undefined,
                    ),
                }),
            );
        }
        // metrics.enabled: node_exporter on the node's cluster address (the firewall keeps it to the members).
        if (cluster.metrics !== undefined) {
            this.exporter = this.host.command(
                `${node.name}-node-exporter`,
                exporterStep({ node: node.name, address: node.ip, port: cluster.metrics.exporterPort }),
                this.childOptions({ dependsOn: [this.interconnect, ...(this.firewall ? [this.firewall] : [])] }),
            );
        }
        this.registerOutputs({ roce: this.roceStatus });
    }

    /** The host layers every later step of this node waits for. */
    get hostReady(): pulumi.Resource[] {
        return [
            this.interconnect,
            this.nccl,
            ...(this.firewall ? [this.firewall] : []),
            ...(this.check ? [this.check] : []),
            ...(this.rdmaBandwidth ? [this.rdmaBandwidth] : []),
            ...this.#fabricSteps,
        ];
    }

    /** A mesh or ring: every node's forwarding step, which the serving layers of this node wait for too ({@link hostReady}). */
    waitForFabric(steps: readonly pulumi.Resource[]): void {
        this.#fabricSteps = [...steps];
    }

    /**
     * Options for a child of this node: parented here, with the alias that keeps the URN it had as
     * a child of the cluster (before ClusterNode existed).
     */
    childOptions<T extends pulumi.ResourceOptions>(opts?: T): T & { parent: pulumi.Resource; aliases: pulumi.Input<pulumi.Alias>[] } {
        return { ...(opts ?? ({} as T)), parent: this, aliases: [{ parent: this.#cluster }] };
    }
}

/** `deps`, and the fabric's forwarding steps once known (a mesh or ring); `deps` alone otherwise. */
function withFabric(deps: pulumi.Resource[], fabricReady: Promise<pulumi.Resource[]> | undefined): pulumi.Input<pulumi.Input<pulumi.Resource>[]> {
    return fabricReady === undefined ? deps : fabricReady.then((steps) => [...deps, ...steps]);
}

/**
 * The SSH step's `presentedHostKey`, known whenever its stdout is: undefined where its state has
 * none (a step last run before the provider recorded it). In a preview the SDK makes an output that
 * a state lacks unknown, not undefined; read as it is, a stack deployed before would preview every
 * later step with an unknown connection, i.e. changed, though `up` pins them as before. Where the
 * step's stdout is known (it does not run in this preview) and its key is not, the state has no key.
 */
function recordedPresentedKey(ssh: Step): pulumi.Output<string | undefined> {
    return ssh.stdout.apply(() => outputIsKnown(ssh.presentedHostKey)).apply((known) => (known ? ssh.presentedHostKey : pulumi.output(undefined)));
}

/**
 * Whether an output's value is known. The SDK keeps this on every Output (`isKnown`, what `apply`
 * waits on) but has no public accessor; without it, a value is taken as known outside a preview only.
 */
function outputIsKnown(output: pulumi.Output<unknown>): Promise<boolean> {
    const isKnown = (output as unknown as { isKnown?: Promise<boolean> }).isKnown;
    return isKnown ?? Promise.resolve(!pulumi.runtime.isDryRun());
}

/**
 * The connection with `hostKey` pinned. An empty key is not known: the steps on the connection fail,
 * naming the node and the fix, rather than run on a host they cannot check.
 */
function pinHostKey(connection: pulumi.Output<Connection>, hostKey: pulumi.Input<string>, node: string, parent: pulumi.Resource): pulumi.Output<Connection> {
    return pulumi.all([connection, hostKey]).apply(([c, key]) => {
        if (key.trim() === "") {
            throw new pulumi.ResourceError(noHostKeyMessage(node), parent);
        }
        return { ...c, hostKey: key };
    });
}
