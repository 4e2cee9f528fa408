import * as pulumi from "@pulumi/pulumi";
import type { Config } from "../config";
import { ClusterNode } from "./clusterNode";
import { hostKeyFingerprint } from "./hostKey";
import { ModelSync } from "./modelSync";
import { OpenWebui } from "./openWebui";
import { retiredCommand } from "./nodeConnection";
import { rayAuthStatus } from "./nodeFacts";
import { typeToken } from "./package";
import { RayHead } from "./rayHead";
import { RayNodeArgs } from "./rayNode";
import { RayWorker } from "./rayWorker";
import { VllmServer, apiBaseUrl } from "./vllmServer";
import { engineStrategy } from "./render/engine";
import { openWebuiPlan } from "./render/openWebui";
import { prometheusStep } from "./render/metrics";
import { addressOnNode, isLoopback } from "../config/ipv4";
import type { FirstContactFacts } from "./render/firstContact";
import { nodeCheckScript } from "./render/firstContactFindings";
import { clusterFindings } from "./render/nodeCheck";
import type { RoceChain } from "./render/roceChain";
import { ClusterSecrets, SECRET_PURPOSES } from "./clusterSecrets";

const TYPE = typeToken("SparkCluster");

export interface SparkClusterArgs {
    /** The validated, resolved stack configuration (config/). */
    config: Config;
}

/**
 * The whole cluster: one {@link ClusterNode} per node (its host layers: SSH → probe → firewall,
 * interconnect → PFC → NCCL → the NCCL check, nodes in parallel), then Ray head and workers (Ray
 * executor) beside the model sync
 * ({@link ModelSync}: the model on every node), then vLLM, each a child of its node. Exports the endpoint.
 *
 * A retired node (`nodes[].retired`) stays in the plan, so nothing about the other nodes changes,
 * but every command on it (its ClusterNode's, and the model sync's steps that wait for its host
 * layers) goes through {@link retiredCommand}: nothing runs there, and its resources leave the
 * stack without their delete.
 */
export class SparkCluster extends pulumi.ComponentResource {
    /** OpenAI-compatible base URL. */
    public readonly endpoint: string;
    public readonly servedModel: string;
    public readonly transport: string;
    /** How to reach the Ray dashboard (Ray executor only). */
    public readonly dashboard?: string;
    /** PFC result per node (`enabled: …` / `lossy: …` / `skipped: …`). */
    /** Per node: the PFC status and the RoCE chain (priority, trust, DSCP, NCCL's traffic class). */
    public readonly roce: pulumi.Output<Record<string, RoceChain>>;
    /** Per node: each interconnect interface's state and speed, and each rail's MTU end to end, as the last apply found them. */
    public readonly links: pulumi.Output<Record<string, string[]>>;
    /** The NCCL check per node: bus bandwidth, transport, pass mark (or why it did not run). */
    public readonly ncclCheck: pulumi.Output<Record<string, string>>;
    /** The SSH host key fingerprint each node is pinned to (compare with `ssh-keygen -lf` on the node). */
    public readonly hostKeys: pulumi.Output<Record<string, string>>;
    /** Firewall per node: what is open to whom. */
    public readonly firewall: pulumi.Output<Record<string, string>>;
    /** Ray per node: its version and whether token authentication is on (or why Ray is not used). */
    public readonly ray: pulumi.Output<Record<string, string>>;
    /** vLLM per node: the version its runtime has, and the image's ID (docker). */
    public readonly vllm: pulumi.Output<Record<string, string>>;
    /** How to reach Open WebUI (frontend.openWebui), when it is on. */
    public readonly openWebui?: string;
    /** How to reach Prometheus on the head (metrics.enabled), when it is on. */
    public readonly metrics?: string;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const config = args.config;
        // The root of the internal secrets, drawn on first use: a stack that needs none has none.
        let secrets: ClusterSecrets | undefined;
        const derived = (purpose: string) => (secrets ??= new ClusterSecrets(name, config.secretsGeneration, { parent: this })).derived(purpose);
        // Every node's host layers wait for the vLLM check, which needs every node's vLLM probe.
        let vllmCheckCreated!: (check: pulumi.Resource) => void;
        const vllmCheck = new Promise<pulumi.Resource>((resolve) => (vllmCheckCreated = resolve));
        // A mesh or ring: what crosses the fabric waits for every node's forwarding step.
        const switchless = config.nodes.some((node) => node.fabric !== undefined);
        let fabricBuilt!: (steps: pulumi.Resource[]) => void;
        const fabricReady = switchless ? new Promise<pulumi.Resource[]>((resolve) => (fabricBuilt = resolve)) : undefined;
        const nodes = config.nodes.map(
            (node) =>
                new ClusterNode(
                    node.name,
                    { node, cluster: config, vllmCheck, ...(fabricReady !== undefined ? { fabricReady } : {}) },
                    { parent: this, ...(node.retired ? { transformations: [retiredCommand] } : {}) },
                ),
        );
        if (fabricReady !== undefined) {
            const forwarding = nodes.flatMap((n) => (n.forwarding ? [n.forwarding] : []));
            for (const n of nodes) n.waitForFabric(forwarding);
            fabricBuilt(forwarding);
        }
        if (!config.firewall.enabled) {
            pulumi.log.warn(
                "firewall.enabled is false: no firewall of ours guards the nodes, so Ray's ports, the engine's internal ports and NCCL's " +
                    'listen to anyone who reaches a node (docs/operations.md, "Ports"). Set it to true (the default) unless another firewall ' +
                    "keeps them to the cluster's nodes.",
                this,
            );
        }
        // The API beyond loopback with no source ranges: anyone who reaches the head, in plain HTTP.
        if (!isLoopback(config.model.apiHost) && (!config.firewall.enabled || config.firewall.apiAllowFrom.length === 0)) {
            pulumi.log.warn(
                `the API (${apiBaseUrl(config.head.ssh.host, config.model.apiPort)}) answers anyone who reaches ${config.head.name} on port ` +
                    `${config.model.apiPort}, in plain HTTP: the API key crosses the network in clear, and it guards only /v1 and a few other ` +
                    'prefixes (docs/operations.md, "Ports"). Set firewall.apiAllowFrom to the ranges that may use it (e.g. [192.168.1.0/24]), ' +
                    "or model.apiHost: 127.0.0.1 and reach it through an SSH tunnel.",
                this,
            );
        }
        const retired = nodes.filter((n) => n.node.retired);
        for (const n of retired) {
            pulumi.log.warn(
                `${n.node.name} is retired (nodes[${config.nodes.indexOf(n.node)}].retired): nothing runs on it, and its resources leave the stack ` +
                    "without their delete (nothing on the node is cleaned up). After an up with it retired, remove it from nodes and run up " +
                    "to plan the cluster without it; or tear the stack down with pulumi destroy --run-program.",
                n,
            );
        }
        // The model sync's steps on a retired node: each step on a node waits for that node's host layers.
        const retiredHostLayers = new Set<pulumi.Resource>(retired.flatMap((n) => n.hostReady));
        const onRetiredNode = (step: pulumi.ResourceTransformationArgs) => {
            const deps = step.opts.dependsOn;
            return (Array.isArray(deps) ? deps : [deps]).some((dep) => pulumi.Resource.isInstance(dep) && retiredHostLayers.has(dep));
        };
        const head = nodes[config.nodes.indexOf(config.head)];
        const workers = nodes.filter((n) => n !== head);
        const executor = config.executor;
        const nodeNamed = (name: string): ClusterNode => {
            const found = nodes.find((n) => n.node.name === name);
            if (found === undefined) throw new pulumi.ResourceError(`internal: the executor names ${name}, which is not a node`, this);
            return found;
        };
        // The engine's servers where the executor runs them, rank 0 the head; a node without its own
        // server runs the same engine as rank 0 (the ray executor's workers, inside Ray).
        const engine = engineStrategy(config.engine);
        const serverOf = (n: ClusterNode) => executor.servers.find((server) => server.node === n.node.name) ?? executor.servers[0];

        // Can every node's vLLM run what we render for it, and do the nodes agree? Checked on a
        // node that is not retired, from the probes' output, before anything changes anywhere.
        // (With the ray executor only the head serves; the workers run the same vLLM in its workers.)
        // A retired node keeps the probe output it had (its commands ignore every change), so retiring
        // a node changes nothing here; one that was never probed is left out.
        const checkOn = nodes.find((n) => !n.node.retired) ?? head;
        // First contact: each node as its owner left it (other tools' netplan files, NetworkManager,
        // addresses, GPUs, Docker, disk) and the fit on the memory it reports. A finding that blocks
        // stops every node before anything changes: the vLLM check, which every host layer waits
        // for, waits for this one.
        const reports = pulumi
            .all(nodes.map((n) => pulumi.all([n.firstContact, n.interfaceNames, n.firstContactProbed])))
            .apply((all) => all.map(([facts, interfaces, probed], i) => ({ node: nodes[i].node, facts: facts as FirstContactFacts, interfaces, probed })));
        const nodeCheck = checkOn.host.command(
            `${name}-node-check`,
            { create: reports.apply((all) => nodeCheckScript(clusterFindings(config, all))) },
            { parent: this, dependsOn: nodes.flatMap((n) => n.probes), ...(checkOn.node.retired ? { transformations: [retiredCommand] } : {}) },
        );
        const checked = nodes.map((n) =>
            n.vllm.apply((probe) => ({ node: n.node.name, runtime: n.node.runtime, probe, argv: engine.serveArgv(config.model, serverOf(n)) })),
        );
        const vllmCheckStep = checkOn.host.command(
            `${name}-vllm-check`,
            {
                create: pulumi.all(checked).apply((all) => engine.checkScript(all.filter((c, i) => !(nodes[i].node.retired && c.probe.version === "none")))),
            },
            { parent: this, dependsOn: [...nodes.flatMap((n) => n.probes), nodeCheck], ...(checkOn.node.retired ? { transformations: [retiredCommand] } : {}) },
        );
        vllmCheckCreated(vllmCheckStep);

        // With Ray, vLLM depends on every node's Ray: it starts after all of them, and destroy stops
        // it before any Ray it has actors on. Without, each server waits for its node's host layers.
        let servingAfter = (n: ClusterNode): pulumi.Resource[] => n.hostReady;
        const rayLayout = executor.ray;
        // The Ray token (ray executor): rayAuthToken, or derived from the root secret.
        const rayAuthToken = rayLayout
            ? config.rayAuthToken
                ? pulumi.secret(config.rayAuthToken.reveal())
                : derived(SECRET_PURPOSES.rayAuthToken)
            : undefined;
        if (rayLayout && rayAuthToken) {
            const rayArgs = (n: ClusterNode): RayNodeArgs => ({
                host: n.host,
                runtime: n.node.runtime,
                envHash: n.nccl.envHash,
                authToken: rayAuthToken,
                imageId: n.imageId,
                watchdog: config.watchdog,
                ray: {
                    nodeIp: n.node.ip,
                    headIp: config.head.ip,
                    port: config.ray.port,
                    gpus: n.node.gpus,
                    numCpus: config.ray.numCpus,
                    objectStoreMemoryMb: config.ray.objectStoreMemoryMb,
                    dashboardHost: config.ray.dashboardHost,
                    dashboardPort: config.ray.dashboardPort,
                    ports: config.ray,
                },
            });
            const rayHeadNode = nodeNamed(rayLayout.head);
            const rayHead = new RayHead(
                `${rayHeadNode.node.name}-ray-head`,
                {
                    ...rayArgs(rayHeadNode),
                    address: rayLayout.address,
                    dashboard: rayLayout.dashboard.access,
                    expectedNodes: rayLayout.expectedNodes,
                    expectedGpus: rayLayout.expectedGpus,
                    members: rayLayout.members,
                },
                rayHeadNode.childOptions({ dependsOn: rayHeadNode.hostReady }),
            );
            const rayWorkers = rayLayout.workers
                .map(nodeNamed)
                .map(
                    (worker) =>
                        new RayWorker(
                            `${worker.node.name}-ray-worker`,
                            rayArgs(worker),
                            worker.childOptions({ dependsOn: [...worker.hostReady, rayHead.started] }),
                        ),
                );
            servingAfter = () => [rayHead, ...rayWorkers];
            this.dashboard = rayHead.dashboard;
        }

        // The model on every node before any vLLM starts (downloaded once on the head, pulled over
        // the interconnect; a local path is checked). Runs beside Ray.
        const modelSync = new ModelSync(
            `${name}-model`,
            {
                model: config.model,
                head,
                workers,
                localModel: config.localModel,
                syncSecret: () => derived(SECRET_PURPOSES.modelSync(config.model.source)),
                hfToken: config.hfToken ? pulumi.secret(config.hfToken.reveal()) : undefined,
            },
            {
                parent: this,
                transformations: [(step) => (onRetiredNode(step) ? retiredCommand(step) : undefined)],
            },
        );

        // The workers' servers first: the head's vLLM restarts after them when one of them restarts.
        const server = (placement: (typeof executor.servers)[number], peers: VllmServer[]) => {
            const n = nodeNamed(placement.node);
            return new VllmServer(
                `${n.node.name}-vllm`,
                {
                    host: n.host,
                    plan: engine.plan({
                        model: config.model,
                        placement,
                        runtime: n.node.runtime,
                        unifiedMemory: n.node.unifiedMemory,
                        rayAddress: rayLayout?.address,
                        watchdog: config.watchdog,
                    }),
                    apiKey: pulumi.secret(config.apiKey.reveal()),
                    envHash: n.nccl.envHash,
                    imageId: n.imageId,
                    publicHost: config.head.ssh.host,
                    peers,
                    ...(rayLayout && rayAuthToken && placement.rank === 0 ? { ray: { members: rayLayout.members, token: rayAuthToken } } : {}),
                },
                n.childOptions({ dependsOn: [...servingAfter(n), modelSync, ...peers] }),
            );
        };
        // Paused (model.paused): no server at all, so the next up removes the vLLM layer (each
        // step's delete) and leaves every other layer as it is; unpaused, the same servers as before.
        let headServer: VllmServer | undefined;
        if (config.model.paused === true) {
            pulumi.log.warn(
                "model.paused is true: vLLM is stopped and removed on every node (network, PFC, NCCL, firewall, Ray and the model cache stay); " +
                    "set it to false and run up to serve again.",
                this,
            );
        } else {
            const workerServers = executor.servers.slice(1).map((placement) => server(placement, []));
            headServer = server(executor.servers[0], workerServers);
        }
        // Open WebUI on the head (off by default: nothing is registered then), after the head's server.
        const ui = config.openWebui;
        if (ui !== undefined) {
            const uiNode = nodeNamed(ui.node);
            const { adminPassword, ...spec } = ui;
            new OpenWebui(
                `${uiNode.node.name}-open-webui`,
                {
                    host: uiNode.host,
                    plan: openWebuiPlan({ ...spec, servedModel: config.model.servedName }, config.watchdog),
                    apiKey: pulumi.secret(config.apiKey.reveal()),
                    adminPassword: pulumi.secret(adminPassword.reveal()),
                    secretKey: derived(SECRET_PURPOSES.openWebuiSessionKey),
                },
                uiNode.childOptions({ dependsOn: headServer ? [headServer] : uiNode.hostReady }),
            );
            this.openWebui = ui.access;
        }
        // metrics.enabled: Prometheus on the head's loopback, after every exporter and the head's server.
        const metrics = config.metrics;
        if (metrics !== undefined) {
            const scraped = nodes.filter((n) => !n.node.retired);
            head.host.command(
                `${head.node.name}-prometheus`,
                prometheusStep({
                    node: head.node.name,
                    metrics,
                    exporters: scraped.map((n) => ({ node: n.node.name, address: n.node.ip, port: metrics.exporterPort })),
                    ...(headServer !== undefined
                        ? { engine: { target: `${addressOnNode(config.model.apiHost)}:${config.model.apiPort}`, name: config.engine.kind } }
                        : {}),
                }),
                head.childOptions({
                    dependsOn: [...scraped.flatMap((n) => (n.exporter ? [n.exporter] : [])), ...(headServer ? [headServer] : head.hostReady)],
                }),
            );
            this.metrics = metrics.access;
        }
        // Where the endpoint is (or will be again, when paused): the head's address and the API port.
        this.endpoint = apiBaseUrl(config.head.ssh.host, config.model.apiPort);
        this.servedModel = config.model.servedName;
        this.transport = config.transport;
        this.roce = perNode(nodes, (n) => n.roce);
        this.links = perNode(nodes, (n) => n.links);
        this.ncclCheck = perNode(nodes, (n) => n.check?.result ?? "not run: check.enabled is false");
        this.hostKeys = perNode(nodes, (n) => n.hostKey.apply((key) => (key ? `${hostKeyFingerprint(key)} (${key.split(" ")[0]})` : "not recorded yet")));
        this.firewall = perNode(nodes, (n) => n.firewallStatus);
        this.ray = perNode(nodes, (n) => (executor.ray ? n.rayVersion.apply(rayAuthStatus) : executor.rayUnused));
        this.vllm = vllmCheckStep.stdout.apply((out) => vllmVersionsOf(out, nodes));
        this.registerOutputs({
            endpoint: this.endpoint,
            servedModel: this.servedModel,
            transport: this.transport,
            roce: this.roce,
            links: this.links,
            ray: this.ray,
            vllm: this.vllm,
        });
    }
}

/** The check's `node: vLLM …` lines, per node (a retired node: not checked). */
function vllmVersionsOf(stdout: string, nodes: readonly ClusterNode[]): Record<string, string> {
    const lines = stdout.split("\n");
    return Object.fromEntries(
        nodes.map((n) => {
            const line = lines.find((l) => l.startsWith(`${n.node.name}: `));
            return [n.node.name, line ? line.slice(n.node.name.length + 2) : n.node.retired ? "not checked: the node is retired" : "not checked yet"];
        }),
    );
}

/** One value per node, keyed by the node's name: the per-node stack outputs. */
function perNode<T>(nodes: readonly ClusterNode[], value: (n: ClusterNode) => pulumi.Output<T> | T): pulumi.Output<Record<string, T>> {
    return pulumi.all(nodes.map((n) => pulumi.output(value(n)))).apply((values) => Object.fromEntries(nodes.map((n, i) => [n.node.name, values[i] as T])));
}
