/**
 * Lab self-test of today's serving stack on the spark-pair topology (plus the outsider):
 * Ray 2.60.0 everywhere, the three container images and the vLLM each one plays (25.09-py3: 0.10.1.1
 * with Ray, which refuses the multi-node mp flags and picks Ray by itself; 26.05-py3: 0.20.1 and
 * 26.10-py3: 0.31.0, both without Ray), the venv stand-in's flag table (vLLM 0.33: a removed flag
 * is rejected, an added one accepted, the default executor is mp), vLLM's mp executor by hand
 * (head + --headless peer), Ray token auth,
 * what happens when a shard or a peer is lost (the engine dies: /health stops answering 200 and
 * the API server exits non-zero; a headless peer keeps waiting when its head goes away, as real vLLM does), and a node
 * reboot that keeps its disk. Needs root; ~3 min on a warm cache.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";

import { vllmServeArgv, type VllmServeSpec } from "../../components/render/vllm";
import { flagAccepted } from "../../config/vllmFlags";
import {
    lab,
    labImageList,
    labImages,
    labImageVllmVersion,
    labKill,
    labLeftovers,
    labRayVersion,
    labReboot,
    outsiderNode,
    run,
    ssh,
    sshRun,
    standinVllmVersion,
    startUnit,
    unitLog,
    unitState,
    waitFor,
    withExclusiveLab,
} from "./lab-harness";

const sparks = ["spark-a", "spark-b"];
const venv = "/opt/lab-venv/bin";
const rayToken = randomBytes(24).toString("hex");
const rayEnvFile = "/run/lab-selftest/ray.env";
/** Ray's token auth, as the product sets it on every member: mode and token in the environment. */
const withRayEnv = (cmd: string) => `set -a; . ${rayEnvFile}; set +a; ${cmd}`;
const rayArgs = "--num-cpus=1 --num-gpus=1 --object-store-memory=100000000 --disable-usage-stats";

/** A flag vLLM 0.11 had (CacheConfig.swap_space) and vLLM 0.33 no longer has. */
const removedFlag = ["--swap-space", "4"];
/** A flag vLLM 0.33 has and vLLM 0.11 did not (EngineArgs.add_cli_args "--shutdown-timeout"). */
const addedFlag = ["--shutdown-timeout", "5"];

function health(addr: string): string {
    return run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3", `http://${addr}:8000/health`], 10_000).stdout;
}

function chat(addr: string, text: string): string {
    const body = JSON.stringify({ model: "tiny-chat", messages: [{ role: "user", content: text }] });
    const r = run("curl", ["-sS", "-m", "30", "-H", "Content-Type: application/json", "-d", body, `http://${addr}:8000/v1/chat/completions`], 40_000);
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout).choices[0].message.content as string;
}

async function waitHealthy(node: string, addr: string, unit: string): Promise<void> {
    await waitFor(
        `vLLM /health on ${node}`,
        120_000,
        () => {
            if (health(addr) === "200") return true;
            const st = unitState(node, unit);
            if (!st.running) throw new Error(`${unit} on ${node} is ${st.active}/${st.sub} (status ${st.status}):\n${unitLog(node, unit, 40)}`);
            return undefined;
        },
        1000,
    );
}

/** Waits until UNIT's main process on NODE has exited; returns its exit status and how long it took. */
async function waitExit(node: string, unit: string, timeoutMs: number): Promise<{ status: number; seconds: number }> {
    const t0 = Date.now();
    const st = await waitFor(
        `${unit} on ${node} to exit`,
        timeoutMs,
        () => {
            const s = unitState(node, unit);
            return s.running ? undefined : s;
        },
        500,
    );
    return { status: st.status, seconds: (Date.now() - t0) / 1000 };
}

const serve = "--served-model-name tiny-chat --host 0.0.0.0 --port 8000";

/** What the dev stack (Pulumi.dev.yaml: TP=2, Ray executor, config defaults) renders, by the product's own renderer. */
const devStackSpec: VllmServeSpec = {
    source: "lab/tiny-chat",
    servedName: "tiny-chat",
    tensorParallel: 2,
    pipelineParallel: 1,
    executor: "ray",
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.9,
    enforceEager: false,
    trustRemoteCode: false,
    extraArgs: [],
    env: {},
    readyTimeoutSeconds: 600,
};
/** The same stack with the mp executor: rank 0 of two. */
const devStackMpRank0: VllmServeSpec = { ...devStackSpec, executor: "mp", multiNode: { nnodes: 2, rank: 0, masterAddr: "10.77.0.11", masterPort: 29501 } };
/** `vllm serve` argv without the leading `vllm serve`, quoted for sh. */
const serveArgs = (spec: VllmServeSpec) =>
    vllmServeArgv(spec)
        .slice(2)
        .map((a) => `'${a}'`)
        .join(" ");
const mpHead = `${venv}/vllm serve lab/tiny-chat -tp 2 --nnodes 2 --node-rank 0 --master-addr 10.77.0.11 --master-port 29501 ${serve}`;
const mpPeer = `${venv}/vllm serve lab/tiny-chat -tp 2 --nnodes 2 --node-rank 1 --master-addr 10.77.0.11 --master-port 29501 --headless`;

describe("lab serving stack (Ray 2.60, vLLM stand-ins 0.33 in the venv, 0.10.1.1 / 0.20.1 / 0.31.0 in the images)", { timeout: 60 * 60_000 }, () => {
    withExclusiveLab({
        tearDown: () => {
            for (const n of sparks) sshRun(n, "systemctl stop 'lab-st-*' 2>/dev/null; systemctl reset-failed 'lab-st-*' 2>/dev/null; true");
        },
    });

    test("lab up boots both Sparks and the outsider", () => {
        const t0 = Date.now();
        lab(["up"]);
        console.log(`# lab up took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        const status = lab(["status"], 60_000);
        assert.match(status, /^outsider\s+outsider\s+10\.77\.0\.99\s+ssh ok$/m);
        for (const n of sparks) assert.match(status, new RegExp(`^${n}\\s+spark\\s+\\S+\\s+ssh ok$`, "m"));
        // The outsider is a plain host: a GPU, the same venv, but no Docker and no RoCE tooling.
        assert.equal(ssh(outsiderNode, "hostname").trim(), outsiderNode);
        assert.notEqual(sshRun(outsiderNode, "command -v docker").status, 0, "no Docker on the outsider");
        assert.notEqual(sshRun(outsiderNode, "command -v mlnx_qos").status, 0, "no mlnx_qos on the outsider");
    });

    test(`Ray ${labRayVersion} on every node and in the Ray image`, () => {
        for (const n of [...sparks, outsiderNode]) {
            assert.equal(ssh(n, `${venv}/ray --version`).trim(), `ray, version ${labRayVersion}`, `ray CLI on ${n}`);
            assert.equal(ssh(n, `${venv}/python -c 'import ray; print(ray.__version__)'`).trim(), labRayVersion, `import ray on ${n}`);
        }
        for (const n of sparks) {
            assert.match(
                ssh(n, `docker run --rm ${labImages.withRay} ray --version 2>/dev/null`),
                new RegExp(`ray, version ${labRayVersion.replace(/\./g, "\\.")}`),
            );
        }
    });

    test("every image plays the vLLM of its NGC tag: vllm --version and importlib.metadata agree", () => {
        assert.deepEqual(
            labImageList().map((i) => i.tag),
            Object.values(labImages),
        );
        for (const n of sparks) {
            for (const { tag, vllm } of labImageList()) {
                const out = ssh(n, `docker run --rm ${tag} sh -c 'vllm --version; python3 -c "import importlib.metadata as m; print(m.version(\\"vllm\\"))"'`);
                assert.deepEqual(out.trim().split("\n"), [`${vllm}+lab.standin`, `${vllm}+lab.standin`], `${tag} on ${n}`);
            }
        }
        assert.equal(labImageVllmVersion(labImages.withRay), "0.10.1.1");
        assert.equal(labImageVllmVersion(labImages.withoutRay), "0.20.1");
        assert.equal(labImageVllmVersion(labImages.newest), "0.31.0");
    });

    for (const image of [labImages.withoutRay, labImages.newest]) {
        test(`${image} has the vLLM stand-in and no Ray, like the NGC image`, () => {
            for (const n of sparks) {
                const imp = sshRun(n, `docker run --rm ${image} python3 -c 'import ray'`);
                assert.notEqual(imp.status, 0, "import ray must fail");
                assert.match(imp.stderr, /ModuleNotFoundError: No module named 'ray'/);
                assert.notEqual(sshRun(n, `docker run --rm ${image} ray --version`).status, 0, "no ray binary");
                assert.notEqual(sshRun(n, `docker run --rm ${image} sh -c 'command -v ray'`).status, 0, "no ray on PATH");
            }
            // Ray is imported only by the Ray executor: asking for it fails like vLLM without Ray.
            const r = sshRun("spark-a", `docker run --rm --gpus all ${image} vllm serve lab/tiny-chat -tp 2 --distributed-executor-backend ray`);
            assert.equal(r.status, 1);
            assert.match(r.stderr, /Failed to import Ray: No module named 'ray'\.Please install Ray with `pip install ray`\./);
            // The mp executor's multi-node flags parse (0.20.1 and 0.31.0 have them): rank 0 then waits for its peer.
            const mp = sshRun(
                "spark-a",
                `timeout 120 docker run --rm --gpus all --network host -e LAB_VLLM_MP_WAIT_S=1 ${image} vllm serve ${serveArgs(devStackMpRank0)}`,
            );
            assert.doesNotMatch(mp.stderr, /unrecognized arguments/);
            assert.match(mp.stderr, /Timed out after \d+s waiting for 1 headless node/);
        });
    }

    test(`${labImages.withRay} plays vLLM 0.10.1.1: no multi-node mp flags, the dev stack's Ray argv parses, TP=2 picks Ray by itself`, () => {
        // The product's own mp rank-0 argv: 0.10.1.1 has no --nnodes/--node-rank/--master-addr/--master-port.
        const mp = sshRun("spark-a", `docker run --rm --gpus all ${labImages.withRay} vllm serve ${serveArgs(devStackMpRank0)}`);
        assert.equal(mp.status, 2, mp.stderr);
        assert.match(mp.stderr, /^vllm: error: unrecognized arguments: --nnodes 2 --node-rank 0 --master-addr 10\.77\.0\.11 --master-port 29501$/m);
        for (const f of ["--nnodes", "--node-rank", "--master-addr", "--master-port"]) assert.equal(flagAccepted("0.10.1.1", f), false, f);
        // The dev stack's argv (Ray executor) parses: with no Ray cluster running, it gets as far as ray.init().
        const ray = sshRun("spark-a", `docker run --rm --gpus all ${labImages.withRay} vllm serve ${serveArgs(devStackSpec)}`);
        assert.doesNotMatch(ray.stderr, /unrecognized arguments|invalid choice/);
        assert.equal(ray.status, 1, ray.stderr);
        assert.match(ray.stderr, /Using the ray distributed executor backend \(world size 2, 1 node\(s\)\)/);
        // vLLM 0.10 picks Ray itself when this node has fewer GPUs than TP x PP (0.33 fails instead: see below).
        const auto = sshRun("spark-a", `docker run --rm --gpus all ${labImages.withRay} vllm serve lab/tiny-chat -tp 2`);
        assert.equal(auto.status, 1, auto.stderr);
        assert.match(auto.stderr, /Using the ray distributed executor backend \(world size 2, 1 node\(s\)\)/);
        // Flags of its time that 0.33 dropped are still there.
        const old = sshRun("spark-a", `docker run --rm --gpus all ${labImages.withRay} vllm serve lab/tiny-chat --swap-space 4 --task generate -tp 3`);
        assert.doesNotMatch(old.stderr, /unrecognized arguments/);
    });

    test(`the stand-in takes vLLM ${standinVllmVersion()}'s flags: rejects ${removedFlag[0]}, accepts ${addedFlag[0]}`, () => {
        assert.equal(ssh("spark-a", `${venv}/vllm --version`).trim(), `${standinVllmVersion()}+lab.standin`);
        const removed = sshRun("spark-a", `${venv}/vllm serve lab/tiny-chat ${removedFlag.join(" ")}`);
        assert.equal(removed.status, 2);
        assert.match(removed.stderr, /^vllm: error: unrecognized arguments: --swap-space 4$/m);
        const task = sshRun("spark-a", `${venv}/vllm serve lab/tiny-chat --task generate`);
        assert.equal(task.status, 2);
        assert.match(task.stderr, /Hint: --task is not a vllm serve option/);
        // Parsing passes (added flag, boolean forms, -O3); then vLLM 0.33's default executor for TP=2
        // without --nnodes is mp, which needs both GPUs on this node: it fails, it does not pick Ray.
        const added = sshRun(
            "spark-a",
            `${venv}/vllm serve lab/tiny-chat -tp 2 ${addedFlag.join(" ")} ` +
                "--enable-custom-all-reduce --no-enable-prefix-caching -O3 --tensor_parallel_size=2",
        );
        assert.doesNotMatch(added.stderr, /unrecognized arguments|invalid choice/);
        assert.equal(added.status, 1, added.stderr);
        assert.match(added.stderr, /World size \(2\) is larger than the number of available GPUs \(1\) in this node/);
    });

    test("mp executor by hand: head on spark-a, --headless peer on spark-b, a chat names both", async () => {
        startUnit("spark-a", "lab-st-vllm-head", mpHead);
        startUnit("spark-b", "lab-st-vllm-peer", mpPeer);
        await waitHealthy("spark-a", "10.77.0.11", "lab-st-vllm-head");
        assert.match(chat("10.77.0.11", "mp"), /served by spark-a,spark-b \(tp=2 pp=1 executor=mp\)/);
    });

    test("a lost --headless peer kills the head's engine: /health stops answering 200, the head exits non-zero", async () => {
        labKill("spark-b", "lab-st-vllm-peer");
        const t0 = Date.now();
        await waitFor("head /health to stop answering 200", 15_000, () => (health("10.77.0.11") !== "200" ? true : undefined), 250);
        const noLongerHealthy = (Date.now() - t0) / 1000;
        const { status, seconds } = await waitExit("spark-a", "lab-st-vllm-head", 30_000);
        console.log(`# peer killed: head unhealthy after ${noLongerHealthy.toFixed(1)} s, exited (status ${status}) ${seconds.toFixed(1)} s after that`);
        assert.equal(status, 1, unitLog("spark-a", "lab-st-vllm-head", 30));
        assert.match(unitLog("spark-a", "lab-st-vllm-head"), /EngineCore encountered an issue: headless node rank 1 \(spark-b\)/);
    });

    // Real vLLM 0.31's headless rank does not notice (test/integration/realVllm.test.ts); the
    // product's follower unit restarts it, by the connection to the master port this test watches.
    test("a --headless peer keeps running when its head goes away, as real vLLM does, without a connection to the master port", async () => {
        startUnit("spark-a", "lab-st-vllm-head", mpHead);
        startUnit("spark-b", "lab-st-vllm-peer", mpPeer, { VLLM_RINGBUFFER_WARNING_INTERVAL: "1" });
        await waitHealthy("spark-a", "10.77.0.11", "lab-st-vllm-head");
        const established = () => ssh("spark-b", "ss -Htn state established dst 10.77.0.11 dport = :29501 | wc -l").trim();
        assert.equal(established(), "1", "while in the head's engine, the peer holds one connection to the master port");
        labKill("spark-a", "lab-st-vllm-head");
        await waitFor("the peer's connection to the master port to end", 15_000, () => (established() === "0" ? true : undefined), 250);
        await waitFor("the peer to log its wait on the head's queue", 15_000, () =>
            /No available shared memory broadcast block found in 1 seconds/.test(unitLog("spark-b", "lab-st-vllm-peer")) ? true : undefined,
        );
        assert.ok(unitState("spark-b", "lab-st-vllm-peer").running, "the peer still runs");
        labKill("spark-b", "lab-st-vllm-peer", "SIGTERM");
        const { status } = await waitExit("spark-b", "lab-st-vllm-peer", 30_000);
        assert.equal(status, 0, "stopped by SIGTERM, it exits 0");
    });

    test("Ray with token auth: the members join, a node without the token cannot", () => {
        for (const n of [...sparks]) {
            ssh(n, `install -d -m 700 /run/lab-selftest && umask 077 && printf 'RAY_AUTH_MODE=token\\nRAY_AUTH_TOKEN=%s\\n' ${rayToken} > ${rayEnvFile}`);
        }
        ssh("spark-a", withRayEnv(`${venv}/ray start --head --node-ip-address=10.77.0.11 --port=6379 --dashboard-host=127.0.0.1 ${rayArgs}`), 180_000);
        ssh("spark-b", withRayEnv(`${venv}/ray start --address=10.77.0.11:6379 --node-ip-address=10.77.0.12 ${rayArgs}`), 180_000);
        // Without RAY_AUTH_MODE=token and the token, Ray 2.60 refuses: the outsider cannot join ...
        const t0 = Date.now();
        const join = sshRun(outsiderNode, `${venv}/ray start --address=10.77.0.11:6379 --node-ip-address=10.77.0.99 ${rayArgs}`, 180_000);
        console.log(`# outsider's ray start without the token failed after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        assert.notEqual(join.status, 0);
        assert.match(join.stdout + join.stderr, /AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect/);
        // ... and even `ray status` on the head needs them.
        assert.notEqual(sshRun("spark-a", `${venv}/ray status`, 120_000).status, 0);
        const status = ssh("spark-a", withRayEnv(`${venv}/ray status`));
        assert.match(status, /\b0\.0\/2\.0 GPU\b/, "two GPUs: the outsider's did not join");
    });

    test("a dead Ray shard kills the engine: /health stops answering 200, vllm serve exits non-zero", async () => {
        startUnit("spark-a", "lab-st-vllm-ray", `${venv}/vllm serve lab/tiny-chat -tp 2 --distributed-executor-backend ray ${serve}`, {
            RAY_AUTH_MODE: "token",
            RAY_AUTH_TOKEN: rayToken,
        });
        await waitHealthy("spark-a", "10.77.0.11", "lab-st-vllm-ray");
        assert.match(chat("10.77.0.11", "ray"), /served by spark-a,spark-b \(tp=2 pp=1 executor=ray\)/);
        const m = /rank 1 -> spark-b \(\S+\) gpu_ids=\S+ pid=(\d+)/.exec(unitLog("spark-a", "lab-st-vllm-ray"));
        assert.ok(m, "the stand-in logs where rank 1 runs");
        ssh("spark-b", `kill -KILL ${m[1]}`);
        const t0 = Date.now();
        await waitFor("/health to stop answering 200", 15_000, () => (health("10.77.0.11") !== "200" ? true : undefined), 250);
        const noLongerHealthy = (Date.now() - t0) / 1000;
        const { status, seconds } = await waitExit("spark-a", "lab-st-vllm-ray", 30_000);
        console.log(`# shard killed: unhealthy after ${noLongerHealthy.toFixed(1)} s, exited (status ${status}) ${seconds.toFixed(1)} s after that`);
        assert.equal(status, 1, unitLog("spark-a", "lab-st-vllm-ray", 30));
        assert.match(unitLog("spark-a", "lab-st-vllm-ray"), /RayWorkerProc rank=1 on spark-b died unexpectedly/);
        for (const n of ["spark-b", "spark-a"]) ssh(n, withRayEnv(`${venv}/ray stop --force`), 120_000);
    });

    test("lab reboot keeps a node's disk, starts its enabled units again and comes back with SSH", () => {
        const node = "spark-b";
        const bootBefore = ssh(
            node,
            [
                "echo kept > /root/lab-reboot-marker",
                "printf '[Unit]\\nDescription=lab self-test boot probe\\n[Service]\\nType=oneshot\\n" +
                    'ExecStart=/bin/sh -c "cat /proc/sys/kernel/random/boot_id >> /var/lib/lab-st-boot-ids"\\n' +
                    "[Install]\\nWantedBy=multi-user.target\\n' > /etc/systemd/system/lab-st-bootprobe.service",
                "systemctl enable --now lab-st-bootprobe.service 2>/dev/null",
                "ip addr add 192.168.100.12/24 dev enp1s0f1np1 && ip link set dev enp1s0f1np1 mtu 9000",
                "cat /proc/sys/kernel/random/boot_id",
            ].join(" && "),
        ).trim();
        const t0 = Date.now();
        labReboot(node);
        console.log(`# lab reboot ${node} took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        assert.match(lab(["status"], 60_000), new RegExp(`^${node}\\s.*ssh ok$`, "m"));
        const bootAfter = ssh(node, "cat /proc/sys/kernel/random/boot_id").trim();
        assert.notEqual(bootAfter, bootBefore, "a new boot");
        assert.equal(ssh(node, "cat /root/lab-reboot-marker").trim(), "kept");
        assert.deepEqual(ssh(node, "cat /var/lib/lab-st-boot-ids").trim().split("\n"), [bootBefore, bootAfter], "the enabled unit ran at boot");
        ssh(node, `docker image inspect ${Object.values(labImages).join(" ")} >/dev/null`);
        // A power cycle resets the NIC: no address, default MTU (netplan/networkd would configure it again).
        assert.equal(ssh(node, "ip -o -4 addr show dev enp1s0f1np1 | wc -l; cat /sys/class/net/enp1s0f1np1/mtu").trim(), "0\n1500");
    });

    test("lab down leaves nothing behind", () => {
        lab(["down"], 5 * 60_000);
        assert.deepEqual(labLeftovers(), []);
    });
});
