/**
 * Each layer's plan hands its component exactly what the layer's renderers make (the renderers'
 * text is pinned by the snapshots in render.test.ts), and the engine strategy gives each server
 * the vLLM plan of its placement.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Config, parseConfig } from "../../config";
import { NcclCheckSpec, ncclCheckPlan, ncclCheckScript } from "../../components/render/check";
import { engineStrategy } from "../../components/render/engine";
import { FirewallSpec, firewallApplyScript, firewallPlan, firewallReadScript, firewallRemoveScript } from "../../components/render/firewall";
import { installFilesScript, removeFilesScript } from "../../components/render/host/files";
import { filesReadScript } from "../../components/render/host/read";
import { contentHash } from "../../components/render/host/shell";
import {
    localModelCheckScript,
    modelCacheRemovalScript,
    modelDownloadScript,
    modelPullScript,
    modelServeRemovalScript,
    modelServeScript,
    modelSyncPlan,
} from "../../components/render/modelSync";
import { NcclSpec, ncclPlan, renderNcclConf, renderRuntimeEnv } from "../../components/render/nccl";
import { NetplanSpec, netplanApplyScript, netplanDeleteScript, netplanPlan, netplanReadScript, renderNetplan } from "../../components/render/netplan";
import { CONFIG_DIR, NCCL_CONF_PATH, RUNTIME_ENV_PATH } from "../../config/hostPaths";
import { pfcApplyScript, pfcPlan, pfcReadScript, pfcRestoreScript, pfcVector, renderPeermemConf, renderPfcUnit } from "../../components/render/pfc";
import { vllmServeArgv } from "../../components/render/vllm";
import { DOCKER_DEFAULT, VENV } from "../support/fixtures";

const NETPLAN: NetplanSpec = {
    node: "spark-a",
    mtu: 9000,
    interfaces: [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }],
    peers: [{ node: "spark-b", ip: "192.168.100.12", via: "enp1s0f1np1" }],
};
const NCCL: NcclSpec = {
    transport: "roce",
    socketIfname: "enp1s0f1np1",
    interfaceName: "enp1s0f1np1",
    ibHca: ["rocep1s0f1"],
    heterogeneous: false,
    debug: "WARN",
    overrides: {},
};
const FIREWALL: FirewallSpec = {
    node: "spark-a",
    members: ["192.168.100.11", "192.168.100.12"],
    openTcp: [22],
    openUdp: [],
    api: { port: 8000, allowFrom: [] },
};

describe("host layers' plans", () => {
    it("netplanPlan: the netplan file and the apply step's create, delete and read-back", () => {
        const plan = netplanPlan(NETPLAN);
        assert.equal(plan.netplan, renderNetplan(NETPLAN));
        assert.deepEqual(plan.step, { create: netplanApplyScript(NETPLAN), delete: netplanDeleteScript(NETPLAN), read: netplanReadScript(NETPLAN) });
    });

    it("pfcPlan: the spec from the interfaces and roce settings, and the apply step", () => {
        const interfaces = ["enp1s0f1np1", "enP2p1s0f1np1"];
        const plan = pfcPlan(interfaces, { priority: 3, trustDscp: true, dscp: 26, peermem: false });
        const spec = {
            interfaces,
            pfcVector: pfcVector(3),
            trustDscp: true,
            priority: 3,
            dscp: 26,
            peermem: false,
            unitContent: renderPfcUnit(interfaces, 3, true, 26),
            peermemConf: renderPeermemConf(),
        };
        assert.deepEqual(plan.spec, spec);
        assert.deepEqual(plan.step, { create: pfcApplyScript(spec), delete: pfcRestoreScript(spec), read: pfcReadScript(spec) });
    });

    it("ncclPlan: both files for the runtime's env-file reader, their hash, and the files step", () => {
        for (const [runtime, reader] of [
            [DOCKER_DEFAULT, "docker"],
            [VENV, "systemd"],
        ] as const) {
            const plan = ncclPlan(runtime, "192.168.100.11");
            const files = plan.files(NCCL);
            const conf = renderNcclConf(NCCL);
            const env = renderRuntimeEnv({ nccl: NCCL, nodeIp: "192.168.100.11", reader });
            const list = [
                { path: NCCL_CONF_PATH, mode: "644" as const, content: conf },
                { path: RUNTIME_ENV_PATH, mode: "644" as const, content: env },
            ];
            assert.deepEqual(files, {
                ncclConf: conf,
                runtimeEnv: env,
                envHash: contentHash(conf + env),
                create: installFilesScript(list),
                read: filesReadScript(list),
            });
            assert.equal(plan.delete, removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], [CONFIG_DIR]));
        }
    });

    it("firewallPlan: the apply step", () => {
        assert.deepEqual(firewallPlan(FIREWALL).step, {
            create: firewallApplyScript(FIREWALL),
            delete: firewallRemoveScript(),
            read: firewallReadScript(FIREWALL),
        });
    });

    it("ncclCheckPlan: the check after a comment naming the env hash; the summary line of its output", () => {
        const spec: NcclCheckSpec = { node: "spark-a", runtime: DOCKER_DEFAULT, rank: 0, worldSize: 2, masterAddr: "192.168.100.11", passMarkGBps: 21.875 };
        const plan = ncclCheckPlan(spec);
        assert.equal(plan.create("abc"), `# runtime.env abc\n${ncclCheckScript(spec)}`);
        assert.equal(
            plan.summary("noise\nnccl-check: busbw=23.1 algbw=11.5 transport=NET/IB pass_mark=21.875 result=pass\n"),
            "pass: busbw 23.1 GB/s over NET/IB (pass mark 21.875 GB/s)",
        );
        assert.equal(plan.summary("no such line"), "no result line");
    });

    it("modelSyncPlan: a hub model is downloaded on the head, served by it and pulled by each worker, keyed on the model", () => {
        const head = { node: "spark-a", ip: "192.168.100.11", ips: ["192.168.100.11", "192.168.101.11"], runtime: DOCKER_DEFAULT };
        const worker = { node: "spark-b", ip: "192.168.100.12", ips: ["192.168.100.12", "192.168.101.12"], runtime: VENV };
        const repoId = "Qwen/Qwen2.5-7B-Instruct";
        const steps = modelSyncPlan({
            source: repoId,
            localModel: false,
            removeCacheOnDestroy: true,
            syncStreams: 4,
            withToken: true,
            head,
            workers: [worker],
        });
        assert.deepEqual(steps, [
            {
                name: "download",
                node: "spark-a",
                create: modelDownloadScript({ repoId, node: "spark-a", runtime: DOCKER_DEFAULT, withToken: true }),
                delete: modelCacheRemovalScript({ repoId, node: "spark-a", remove: true }),
                stdin: "hfToken",
                keyed: true,
                after: [],
                timeout: "25h",
            },
            {
                name: "serve",
                node: "spark-a",
                create: modelServeScript({ repoId, node: "spark-a", headIp: head.ip, workers: [{ node: "spark-b", ips: worker.ips }] }),
                delete: modelServeRemovalScript(repoId),
                stdin: "syncSecret",
                keyed: true,
                after: ["download"],
                timeout: "8h",
            },
            {
                name: "pull-spark-b",
                node: "spark-b",
                create: modelPullScript({ repoId, node: "spark-b", head: "spark-a", headIp: head.ip, streams: 4 }),
                delete: modelCacheRemovalScript({ repoId, node: "spark-b", remove: true }),
                stdin: "syncSecret",
                keyed: true,
                after: ["download"],
                timeout: "8h",
            },
        ]);
        const alone = modelSyncPlan({ source: repoId, localModel: false, removeCacheOnDestroy: false, syncStreams: 4, withToken: false, head, workers: [] });
        assert.deepEqual(
            alone.map((s) => [s.name, s.stdin]),
            [["download", undefined]],
        );
        const local = modelSyncPlan({
            source: "/models/m",
            localModel: true,
            removeCacheOnDestroy: false,
            syncStreams: 4,
            withToken: false,
            head,
            workers: [worker],
        });
        assert.deepEqual(local, [
            { name: "check-spark-a", node: "spark-a", create: localModelCheckScript("/models/m", "spark-a"), keyed: false, after: [] },
            { name: "check-spark-b", node: "spark-b", create: localModelCheckScript("/models/m", "spark-b"), keyed: false, after: [] },
        ]);
    });
});

describe("the engine strategy", () => {
    const SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nplanstestkey\n-----END OPENSSH PRIVATE KEY-----";
    function config(executor: "ray" | "mp"): Config {
        return parseConfig({
            values: {
                nodes: ["a", "b"].map((x, i) => ({
                    name: `spark-${x}`,
                    kind: "spark",
                    ...(i === 0 ? { head: true } : {}),
                    ssh: { host: `10.0.0.${11 + i}` },
                    interconnect: [{ name: "enp1s0f1np1", address: `192.168.100.${11 + i}/24` }],
                })),
                interconnect: { topology: "pair" },
                model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor },
                sshPrivateKey: SSH_KEY,
                apiKey: "plans-test-api-key-0123456789",
            },
            secretKeys: new Set(["sshPrivateKey", "apiKey"]),
        });
    }

    it("the resolved engine is vllm; each server's plan has its rank, the API, readiness on rank 0 and a follower on a headless rank", () => {
        for (const executor of ["ray", "mp"] as const) {
            const c = config(executor);
            assert.deepEqual(c.engine, { kind: "vllm" });
            const engine = engineStrategy(c.engine);
            for (const placement of c.executor.servers) {
                const plan = engine.plan({ model: c.model, placement, runtime: DOCKER_DEFAULT, rayAddress: c.executor.ray?.address });
                assert.equal(plan.rank, placement.rank);
                assert.deepEqual(plan.api, { port: c.model.apiPort, servedModel: "qwen" });
                assert.equal(plan.ready !== undefined, placement.rank === 0, `${executor} rank ${placement.rank}: readiness on rank 0 only`);
                assert.equal(plan.follow !== undefined, placement.rank > 0, `${executor} rank ${placement.rank}: a follower on a headless rank only`);
                assert.equal(plan.unit("h", []).includes("RAY_ADDRESS="), executor === "ray");
                assert.deepEqual(engine.serveArgv(c.model, placement), vllmServeArgv({ ...c.model, multiNode: placement.multiNode }));
            }
        }
    });
});
