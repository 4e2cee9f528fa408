/**
 * Every bounded wait in a rendered script is `sc_wait` (components/render/host/lib.ts) or an
 * explicit exception (test/support/waitLoops.ts WAIT_EXCEPTIONS, each naming the deployed step its
 * conversion would update). The scripts here are every layer's plan for the nodes of a few
 * configs (both executors, both runtimes, a hub model and a local one), the probes and the checks,
 * named as the program names their steps.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Config, parseConfig } from "../../config";
import { resolveRdmaRails } from "../../config/resolve";
import { SSH_READY_SCRIPT } from "../../components/hostKey";
import { rayStartSpec } from "../../components/plan/clusterPlan";
import { ncclCheckPlan } from "../../components/render/check";
import { engineStrategy } from "../../components/render/engine";
import { firewallPlan } from "../../components/render/firewall";
import { HOST_LIB } from "../../components/render/host/lib";
import { READ_LIB } from "../../components/render/host/read";
import { modelSyncPlan } from "../../components/render/modelSync";
import { ncclPlan } from "../../components/render/nccl";
import { netplanPlan } from "../../components/render/netplan";
import { openWebuiPlan } from "../../components/render/openWebui";
import { pfcPlan } from "../../components/render/pfc";
import { hardwareProbe, rayProbe, vllmProbe } from "../../components/render/probe";
import { rayPlan } from "../../components/render/ray";
import { rdmaBandwidthProbe } from "../../components/render/rdmaBandwidth";
import { SHIPPED_FLAG_TABLES, vllmCheckScript, vllmVerdict } from "../../components/render/vllmCompat";
import { WAIT_EXCEPTIONS, loopsIn, waitException } from "../support/waitLoops";

const SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nwaitstestkey\n-----END OPENSSH PRIVATE KEY-----";

function pair(runtime: Record<string, unknown> | undefined): Record<string, unknown>[] {
    return ["a", "b"].map((x, i) => ({
        name: `spark-${x}`,
        kind: "spark",
        ...(i === 0 ? { head: true } : {}),
        ssh: { host: `10.0.0.${11 + i}` },
        ...(runtime ? { runtime } : {}),
        interconnect: [
            { name: "enp1s0f1np1", address: `192.168.100.${11 + i}/24` },
            { name: "enP2p1s0f1np1", address: `192.168.101.${11 + i}/24` },
        ],
    }));
}

/** Configs that between them reach every branch of the plans that renders a script. */
const CONFIGS: Record<string, Record<string, unknown>> = {
    "ray, docker, hub model with token, check on": {
        nodes: pair(undefined),
        model: { source: "Qwen/Qwen2.5-7B-Instruct", executor: "ray" },
        check: { enabled: true },
        hfToken: "hf_waitsTestToken",
        frontend: { openWebui: { enabled: true, adminEmail: "admin@example.com" } },
        openWebuiAdminPassword: "waits-test-admin-password",
    },
    "mp, venv, hub model": {
        nodes: pair({ kind: "venv", path: "/opt/vllm-venv" }),
        model: { source: "Qwen/Qwen2.5-7B-Instruct", executor: "mp" },
        check: { enabled: true },
        frontend: { openWebui: { enabled: true, adminEmail: "admin@example.com", runtime: { kind: "venv", wheelhouse: "/srv/wheels" } } },
        openWebuiAdminPassword: "waits-test-admin-password",
    },
    "mp, docker, local model": {
        nodes: pair(undefined),
        model: { source: "/models/qwen2.5-7b", executor: "mp" },
    },
};

function configOf(values: Record<string, unknown>): Config {
    return parseConfig({
        values: { interconnect: { topology: "pair" }, sshPrivateKey: SSH_KEY, apiKey: "waits-test-api-key-0123456789", ...values },
        secretKeys: new Set(["sshPrivateKey", "apiKey", "hfToken", "openWebuiAdminPassword"]),
    });
}

/** Every script the program would register for `config`, keyed by its step's name (as the program names it). */
function renderedScripts(config: Config): Map<string, string> {
    const scripts = new Map<string, string>();
    const add = (step: string, ...texts: (string | undefined)[]) => {
        texts.forEach((text, i) => {
            if (text !== undefined) scripts.set(`${step}#${i}`, text);
        });
    };
    const engine = engineStrategy(config.engine);
    const ray = config.executor.ray;
    for (const node of config.nodes) {
        const names = node.interconnect.map((iface) => iface.name ?? "eth0");
        add(`${node.name}-ssh`, SSH_READY_SCRIPT);
        add(`${node.name}-probe`, hardwareProbe.script());
        add(`${node.name}-vllm-probe`, vllmProbe.script({ node: node.name, runtime: node.runtime }));
        add(`${node.name}-ray-probe`, rayProbe.script({ node: node.name, runtime: node.runtime }));
        const netplan = netplanPlan({
            node: node.name,
            mtu: config.interconnect.mtu,
            interfaces: node.interconnect.map((iface, i) => ({ name: names[i], address: iface.address })),
            peers: node.peers.map((p) => ({ node: p.node, ip: p.ip, via: names[p.via] })),
            linkCheck: node.linkCheck,
        });
        add(`${node.name}-interconnect-apply`, netplan.step.create, netplan.step.delete, netplan.step.read);
        for (const [suffix, interfaces] of [
            ["", names],
            ["-none", []],
        ] as const) {
            const pfc = pfcPlan([...interfaces], {
                priority: config.roce.priority,
                trustDscp: config.roce.trustDscp,
                dscp: config.roce.dscp,
                peermem: node.roce.enabled && node.roce.peermem.load,
            });
            add(`${node.name}-roce-apply${suffix}`, pfc.step.create, pfc.step.delete, pfc.step.read);
        }
        const nccl = ncclPlan(node.runtime, node.ip);
        const files = nccl.files({
            transport: config.transport,
            socketIfname: names[0],
            interfaceName: names[0],
            ibHca: ["rocep1s0f1"],
            heterogeneous: config.hasThor,
            debug: config.nccl.debug,
            overrides: config.nccl.overrides,
        });
        add(`${node.name}-nccl-files`, files.create, nccl.delete, files.read);
        const firewall = firewallPlan(node.firewall);
        add(`${node.name}-firewall-apply`, firewall.step.create, firewall.step.delete, firewall.step.read);
        const check = ncclCheckPlan({
            node: node.name,
            runtime: node.runtime,
            rank: config.rankOrder.indexOf(node.name),
            worldSize: config.nodes.length,
            masterAddr: config.head.ip,
            passMarkGBps: config.check.passMarkGBps,
            requireTransport: config.check.requireTransport,
        });
        add(`${node.name}-check-nccl`, check.create("0123456789abcdef"));
        // The RDMA bandwidth test, whether or not the config turns it on: its scripts' waits are checked either way.
        const rails = resolveRdmaRails(
            config.nodes.map((n) => ({ ...n, rdma: true })),
            18515,
        ).get(node.name);
        add(
            `${node.name}-rdma-bandwidth`,
            rdmaBandwidthProbe.script({
                node: node.name,
                rails: (rails ?? []).map((r) => ({ role: r.role, iface: names[r.via], device: "rocep1s0f1", peer: r.peer, peerIp: r.peerIp, port: r.port })),
                durationSeconds: 5,
                waitSeconds: 120,
                minGbps: 80,
                lowBandwidth: node.linkCheck.lowSpeed,
            }),
        );
        if (ray) {
            const isHead = node.name === ray.head;
            const plan = rayPlan(rayStartSpec(config, node, isHead ? "head" : "worker"), node.runtime, config.watchdog);
            const step = `${node.name}-ray-${isHead ? "head" : "worker"}`;
            const unit = plan.unit("0123456789abcdef");
            add(`${step}-auth`, plan.auth.create, plan.auth.delete, plan.auth.read, plan.authFile("token"));
            add(`${step}-unit`, plan.unitStep.create(unit), plan.unitStep.delete, plan.unitStep.read(unit));
            if (isHead) add(`${step}-ready`, plan.ready(ray.address, ray.expectedNodes, ray.expectedGpus, ray.members));
        }
    }
    for (const placement of config.executor.servers) {
        const node = config.nodes.find((n) => n.name === placement.node);
        assert.ok(node);
        const plan = engine.plan({
            model: config.model,
            placement,
            runtime: node.runtime,
            unifiedMemory: node.unifiedMemory,
            rayAddress: ray?.address,
            watchdog: config.watchdog,
        });
        const unit = plan.unit("0123456789abcdef", ["peer unit"]);
        add(`${node.name}-vllm-secrets`, plan.secrets.create, plan.secrets.delete, plan.secrets.read, plan.secretsFile("key"));
        add(`${node.name}-vllm-unit`, plan.unitStep.create(unit), plan.unitStep.delete, plan.unitStep.read(unit));
        add(`${node.name}-vllm-ready`, plan.ready);
        add(`${node.name}-vllm-follow`, plan.follow?.create, plan.follow?.delete, plan.follow?.read);
    }
    const verdict = vllmVerdict(
        config.nodes.map((n) => ({
            node: n.name,
            runtime: n.runtime,
            probe: { version: "0.31.0" },
            argv: engine.serveArgv(config.model, config.executor.servers.find((s) => s.node === n.name) ?? config.executor.servers[0]),
        })),
        SHIPPED_FLAG_TABLES,
    );
    add("dev-vllm-check", vllmCheckScript(verdict));
    const syncNode = (n: Config["nodes"][number]) => ({ node: n.name, ip: n.ip, ips: n.interconnect.map((i) => i.ip), runtime: n.runtime });
    for (const step of modelSyncPlan({
        source: config.model.source,
        localModel: config.localModel,
        removeCacheOnDestroy: false,
        syncStreams: 4,
        withToken: config.hfToken !== undefined,
        head: syncNode(config.head),
        workers: config.workers.map(syncNode),
    })) {
        add(`dev-model-${step.name}`, step.create, step.delete);
    }
    if (config.openWebui) {
        const { adminPassword: _password, ...spec } = config.openWebui;
        const plan = openWebuiPlan({ ...spec, servedModel: config.model.servedName });
        const node = config.openWebui.node;
        add(`${node}-open-webui-install`, plan.install.create, plan.install.delete);
        add(`${node}-open-webui-data`, plan.data.create, plan.data.delete);
        add(
            `${node}-open-webui-env`,
            plan.env.create,
            plan.env.delete,
            plan.env.read,
            plan.envFile({ apiKey: "key", adminPassword: "password", secretKey: "k" }),
        );
        add(`${node}-open-webui-unit`, plan.unitStep.create, plan.unitStep.delete, plan.unitStep.read);
        add(`${node}-open-webui-ready`, plan.ready);
    }
    return scripts;
}

/** Every script of every config, with the step it belongs to. */
const ALL = Object.entries(CONFIGS).flatMap(([config, values]) =>
    [...renderedScripts(configOf(values))].map(([key, script]) => ({ config, step: key.slice(0, key.lastIndexOf("#")), script })),
);

describe("waits in rendered scripts", () => {
    it("the scanner finds bash and Python loops, tells waits from other loops, and sc_wait's own loop", () => {
        const loops = loopsIn(
            [
                HOST_LIB,
                'for w in a b; do echo "$w done-x"; done',
                "until ready; do",
                "  for x in 1 2; do :; done",
                "  sleep 2",
                "done",
                "x=1; while sleep 2; do echo; done",
                "python3 -c 'import time",
                "while True:",
                "    time.sleep(1)",
                "for line in lines:",
                "    print(line)",
                "'",
            ].join("\n"),
        );
        assert.deepEqual(
            loops.map((l) => [l.language, l.header, l.wait, l.helper]),
            [
                ["bash", 'until "$@"; do', true, true],
                ["bash", "for w in a b; do", false, false],
                ["bash", "until ready; do", true, false],
                ["bash", "for x in 1 2; do", false, false],
                ["bash", "while sleep 2; do", true, false],
                ["python", "while True:", true, false],
                ["python", "for line in lines:", false, false],
            ],
        );
    });

    it("HOST_LIB's only wait is sc_wait's own, and the read-back scripts' library has none", () => {
        assert.deepEqual(
            loopsIn(HOST_LIB).filter((l) => l.wait),
            [{ language: "bash", header: 'until "$@"; do', wait: true, helper: true }],
        );
        assert.deepEqual(
            loopsIn(READ_LIB).filter((l) => l.wait),
            [],
        );
    });

    it("every wait loop in every rendered script is sc_wait or an explicit exception, and every exception is still there", () => {
        const unexplained: string[] = [];
        const used = new Set<(typeof WAIT_EXCEPTIONS)[number]>();
        const inventory = new Map<string, number>();
        let helperCalls = 0;
        for (const { config, step, script } of ALL) {
            helperCalls += [...script.matchAll(/(?<![\w-])sc_wait (?=\S)/g)].length;
            for (const loop of loopsIn(script)) {
                if (!loop.wait || loop.helper) continue;
                const exception = waitException(step, loop);
                if (exception === undefined) {
                    unexplained.push(`${config}: ${step}: ${loop.language} loop \`${loop.header}\``);
                } else {
                    used.add(exception);
                    const key = `${exception.step.source} ${exception.header}`;
                    inventory.set(key, (inventory.get(key) ?? 0) + 1);
                }
            }
        }
        assert.deepEqual(
            unexplained,
            [],
            "a wait that is neither sc_wait nor in WAIT_EXCEPTIONS (use sc_wait, or add it there saying which deployed step it would update)",
        );
        assert.deepEqual(
            WAIT_EXCEPTIONS.filter((e) => !used.has(e)).map((e) => `${e.step.source} ${e.header}`),
            [],
            "an exception that no rendered script has any more: remove it",
        );
        // 8 kept as they are (each would update a deployed step), and 2 that run inside units, not step
        // scripts (HOST_LIB's sc_wait is not there): the watchdog's supervision loop and the restart gate's memory wait.
        assert.equal(WAIT_EXCEPTIONS.length, 10, "the excepted wait loops");
        assert.ok(helperCalls > 0, "the scripts call sc_wait");
    });

    it("the scripts cover every layer's steps: each config yields the steps the program registers", () => {
        const steps = new Set(ALL.map((s) => s.step));
        for (const step of [
            "spark-a-interconnect-apply",
            "spark-a-roce-apply",
            "spark-a-nccl-files",
            "spark-a-firewall-apply",
            "spark-a-check-nccl",
            "spark-a-ray-head-ready",
            "spark-b-ray-worker-unit",
            "spark-a-vllm-ready",
            "spark-b-vllm-follow",
            "dev-model-download",
            "dev-model-serve",
            "dev-model-pull-spark-b",
            "dev-model-check-spark-b",
            "dev-vllm-check",
        ]) {
            assert.ok(steps.has(step), `no script for ${step}`);
        }
    });
});
