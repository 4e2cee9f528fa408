/**
 * Lab self-test, default topology (spark-pair): the lab comes up, every node answers SSH, Ray
 * started BY HAND sees 2 GPUs, the vLLM stand-in serves TP=2 across both nodes with the Ray executor
 * (plain and streamed chat), rejects TP=3 and unknown flags like vLLM, a second `up` changes nothing, and
 * `down` leaves nothing behind. Needs root; takes ~5 min on a cold cache, ~1 min warm.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";

import { lab, labLeftovers, labSh, nodeIdentity, run, ssh, sshRun, waitFor, withExclusiveLab } from "./lab-harness";

const nodes = ["spark-a", "spark-b"];
const venv = "/opt/lab-venv/bin";
const apiKey = "lab-selftest-key";

function curl(args: string[], timeoutMs = 30_000): { status: number; body: string } {
    const r = run("curl", ["-sS", "-m", String(Math.ceil(timeoutMs / 1000)), "-w", "\n%{http_code}", ...args], timeoutMs + 5_000);
    assert.equal(r.status, 0, `curl ${args.join(" ")} failed: ${r.stderr}`);
    const cut = r.stdout.lastIndexOf("\n");
    return { status: Number(r.stdout.slice(cut + 1)), body: r.stdout.slice(0, cut) };
}

describe("lab spark-pair", { timeout: 60 * 60_000 }, () => {
    let vllmPid = "";

    withExclusiveLab();

    test("lab up (default topology) brings both Sparks up and status says so", () => {
        const t0 = Date.now();
        lab(["up"]);
        console.log(`# lab up took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        const status = lab(["status"], 60_000);
        for (const n of nodes) {
            assert.match(status, new RegExp(`^${n}\\s+spark\\s+10\\.77\\.0\\.1\\d\\s+ssh ok$`, "m"));
        }
    });

    test("each node answers SSH from the host with its name, addresses and links", () => {
        for (const n of nodes) {
            const out = ssh(
                n,
                [
                    "hostname",
                    "systemctl is-system-running --wait",
                    "ip -o -4 addr show dev enP7s7 | awk '{print $4}'",
                    'for i in enp1s0f1np1 enP2p1s0f1np1; do echo "$i mtu=$(cat /sys/class/net/$i/mtu) v4=$(ip -o -4 addr show dev $i | wc -l)"; done',
                    "python3 --version; command -v sudo ping ip netplan",
                ].join("; "),
            );
            const lines = out.trim().split("\n");
            assert.equal(lines[0], n);
            assert.equal(lines[1], "running", `systemd state on ${n}`);
            assert.equal(lines[2], `${n === "spark-a" ? "10.77.0.11" : "10.77.0.12"}/24`);
            assert.match(out, /^enp1s0f1np1 mtu=1500 v4=0$/m);
            assert.match(out, /^enP2p1s0f1np1 mtu=1500 v4=0$/m);
            assert.match(out, /^Python 3\.11\./m);
        }
    });

    test("simulated hardware: nvidia-smi, ibdev2netdev, mlnx_qos, nvidia-peermem", () => {
        const smi = ssh("spark-a", "nvidia-smi --query-gpu=name,memory.total --format=csv,noheader").trim();
        assert.equal(smi, "NVIDIA GB10, 131072 MiB");
        const ib = ssh("spark-a", "ibdev2netdev");
        assert.match(ib, /^rocep1s0f1 port 1 ==> enp1s0f1np1 \(Up\)$/m);
        assert.match(ib, /^roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 \(Up\)$/m);
        const qos = ssh("spark-a", "mlnx_qos -i enp1s0f1np1 --pfc 0,0,0,1,0,0,0,0 --trust dscp >/dev/null; mlnx_qos -i enp1s0f1np1");
        assert.match(qos, /Priority trust state: dscp/);
        assert.match(qos, /enabled\s+0\s+0\s+0\s+1\s+0\s+0\s+0\s+0/);
        assert.match(ssh("spark-a", "cat /var/lib/lab-sim/mlnx_qos/enp1s0f1np1.json"), /"pfc": \[0, 0, 0, 1, 0, 0, 0, 0\]/);
        // GB10 has no GPUDirect RDMA: the module fails to load, as the real one does there.
        const peermem = sshRun("spark-a", "modprobe nvidia-peermem");
        assert.notEqual(peermem.status, 0);
        assert.match(peermem.stderr, /could not insert 'nvidia_peermem': Invalid argument/);
    });

    test("netplan apply works in a node and the interconnect passes MTU 9000", () => {
        for (const [i, n] of nodes.entries()) {
            ssh(
                n,
                [
                    "umask 077",
                    `printf 'network:\\n  version: 2\\n  renderer: networkd\\n  ethernets:\\n    enp1s0f1np1:\\n      addresses: [192.168.100.${11 + i}/24]\\n      mtu: 9000\\n    enP2p1s0f1np1:\\n      addresses: [192.168.101.${11 + i}/24]\\n      mtu: 9000\\n' >/etc/netplan/40-cx7.yaml`,
                    "netplan apply",
                ].join(" && "),
            );
        }
        ssh("spark-a", "ping -c 2 -W 3 -M do -s 8972 192.168.100.12 && ping -c 2 -W 3 -M do -s 8972 192.168.101.12");
        for (const n of nodes) ssh(n, "rm -f /etc/netplan/40-cx7.yaml && netplan apply");
    });

    test("Ray started by hand on spark-a (head) and spark-b (worker) shows 2 GPUs", async () => {
        ssh(
            "spark-a",
            `${venv}/ray start --head --node-ip-address=10.77.0.11 --port=6379 --dashboard-host=127.0.0.1 ` +
                "--num-cpus=1 --num-gpus=1 --object-store-memory=100000000 --disable-usage-stats",
            180_000,
        );
        ssh(
            "spark-b",
            `${venv}/ray start --address=10.77.0.11:6379 --node-ip-address=10.77.0.12 ` +
                "--num-cpus=1 --num-gpus=1 --object-store-memory=100000000 --disable-usage-stats",
            180_000,
        );
        const status = await waitFor(
            "ray status to show 2 GPUs",
            90_000,
            () => {
                const out = ssh("spark-a", `${venv}/ray status`);
                return /\b0\.0\/2\.0 GPU\b/.test(out) ? out : undefined;
            },
            2000,
        );
        assert.match(status, /0\.0\/2\.0 GPU/);
    });

    test("vLLM stand-in with TP=2 answers chat (plain and streamed) from both nodes", async () => {
        vllmPid = ssh(
            "spark-a",
            `nohup ${venv}/vllm serve lab/tiny-chat --tensor-parallel-size 2 ` +
                `--distributed-executor-backend ray --host 0.0.0.0 --port 8000 --served-model-name tiny-chat ` +
                `--api-key ${apiKey} --enforce-eager --gpu-memory-utilization 0.8 --max-model-len 4096 ` +
                `>/var/log/vllm-selftest.log 2>&1 </dev/null & echo $!`,
        ).trim();
        assert.match(vllmPid, /^\d+$/);
        await waitFor(
            "vllm /health on spark-a",
            120_000,
            () => {
                const r = run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3", "http://10.77.0.11:8000/health"], 10_000);
                if (r.stdout === "200") return true;
                const alive = sshRun("spark-a", `kill -0 ${vllmPid}`);
                if (alive.status !== 0) throw new Error(`vllm exited: ${ssh("spark-a", "tail -n 30 /var/log/vllm-selftest.log")}`);
                return undefined;
            },
            1000,
        );

        const auth = ["-H", `Authorization: Bearer ${apiKey}`, "-H", "Content-Type: application/json"];
        assert.equal(curl(["http://10.77.0.11:8000/v1/models"]).status, 401, "API key must be enforced");
        const models = curl([...auth, "http://10.77.0.11:8000/v1/models"]);
        assert.equal(models.status, 200);
        assert.equal(JSON.parse(models.body).data[0].id, "tiny-chat");

        const body = JSON.stringify({ model: "tiny-chat", messages: [{ role: "user", content: "hello lab" }] });
        const chat = curl([...auth, "-d", body, "http://10.77.0.11:8000/v1/chat/completions"]);
        assert.equal(chat.status, 200, chat.body);
        const text: string = JSON.parse(chat.body).choices[0].message.content;
        assert.match(text, /served by spark-a,spark-b \(tp=2 pp=1/);

        const streamBody = JSON.stringify({ model: "tiny-chat", stream: true, messages: [{ role: "user", content: "stream" }] });
        const stream = curl(["-N", ...auth, "-d", streamBody, "http://10.77.0.11:8000/v1/chat/completions"]);
        assert.equal(stream.status, 200);
        const events = stream.body
            .split("\n")
            .filter((l) => l.startsWith("data: "))
            .map((l) => l.slice(6));
        assert.equal(events[events.length - 1], "[DONE]");
        const streamed = events
            .slice(0, -1)
            .map((e) => JSON.parse(e).choices[0]?.delta?.content ?? "")
            .join("");
        assert.match(streamed, /served by spark-a,spark-b/);

        const metrics = curl(["http://10.77.0.11:8000/metrics"]);
        assert.match(metrics.body, /^vllm:request_success_total\{.*\} 2\.0$/m);
    });

    test("TP=3 on two GPUs fails like vLLM", () => {
        const r = sshRun(
            "spark-a",
            `LAB_VLLM_PG_WAIT_S=3 ${venv}/vllm serve lab/tiny-chat --tensor-parallel-size 3 ` + "--distributed-executor-backend ray --port 8001",
            120_000,
        );
        assert.equal(r.status, 1);
        assert.match(r.stderr, /The number of required GPUs exceeds the total number of available GPUs in the placement group/);
        assert.match(r.stderr, /Cannot provide a placement group requiring 3 GPUs \(placement_group_specs=.*\) within 3 seconds/);
    });

    test("an unknown flag fails like vLLM's argparse", () => {
        const r = sshRun("spark-a", `${venv}/vllm serve lab/tiny-chat --tensor-parallel-size 2 --foo`);
        assert.equal(r.status, 2);
        assert.match(r.stderr, /^vllm: error: unrecognized arguments: --foo$/m);
    });

    test("stop vLLM and Ray", async () => {
        assert.ok(vllmPid, "vllm was not started");
        ssh("spark-a", `kill ${vllmPid}`);
        await waitFor("vllm to exit", 30_000, () => (sshRun("spark-a", `kill -0 ${vllmPid}`).status !== 0 ? true : undefined));
        for (const n of ["spark-b", "spark-a"]) ssh(n, `${venv}/ray stop --force`, 120_000);
        for (const n of nodes) {
            assert.notEqual(sshRun(n, "pgrep -x raylet").status, 0, `raylet still runs on ${n}`);
        }
    });

    test("docker runtime on the Sparks: Ray + vLLM stand-in in containers serve TP=2 across both nodes", async () => {
        const image = "nvcr.io/nvidia/vllm:25.09-py3";
        const common = `--gpus all --network host --ipc host --shm-size 1g --ulimit stack=67108864 ${image}`;
        const rayArgs = "--num-cpus=1 --num-gpus=1 --object-store-memory=100000000 --disable-usage-stats --block";
        ssh(
            "spark-a",
            `docker run -d --rm --name lab-ray-head ${common} ray start --head --node-ip-address=10.77.0.11 ` +
                `--port=6379 --dashboard-host=127.0.0.1 ${rayArgs}`,
        );
        ssh("spark-b", `docker run -d --rm --name lab-ray-worker ${common} ray start --address=10.77.0.11:6379 ` + `--node-ip-address=10.77.0.12 ${rayArgs}`);
        try {
            await waitFor(
                "ray status (in docker) to show 2 GPUs",
                120_000,
                () => (/0\.0\/2\.0 GPU/.test(sshRun("spark-a", "docker exec lab-ray-head ray status").stdout) ? true : undefined),
                2000,
            );
            ssh(
                "spark-a",
                "docker exec -d lab-ray-head sh -c 'vllm serve lab/tiny-chat --tensor-parallel-size 2 " +
                    "--distributed-executor-backend ray --port 8000 >/tmp/vllm.log 2>&1'",
            );
            await waitFor(
                "vllm (in docker) /health",
                120_000,
                () => (sshRun("spark-a", "curl -sf -m 3 http://127.0.0.1:8000/health").status === 0 ? true : undefined),
                1000,
            );
            const chat = curl([
                "-H",
                "Content-Type: application/json",
                "-d",
                JSON.stringify({ model: "lab/tiny-chat", messages: [{ role: "user", content: "docker" }] }),
                "http://10.77.0.11:8000/v1/chat/completions",
            ]);
            assert.equal(chat.status, 200, chat.body);
            assert.match(JSON.parse(chat.body).choices[0].message.content, /served by spark-a,spark-b \(tp=2 pp=1/);
            // This VM cannot grant what real Sparks want for RDMA (see lab/README.md).
            assert.notEqual(sshRun("spark-a", `docker run --rm --privileged ${image} true`).status, 0);
        } finally {
            sshRun("spark-a", "docker rm -f lab-ray-head");
            sshRun("spark-b", "docker rm -f lab-ray-worker");
        }
    });

    test("a second lab up changes nothing", () => {
        const before = nodes.map(nodeIdentity);
        lab(["up"], 10 * 60_000);
        const afterIds = nodes.map(nodeIdentity);
        assert.deepEqual(afterIds, before);
    });

    test("lab down leaves no netns, bridge, veth, mount or nspawn process behind", () => {
        lab(["down"], 5 * 60_000);
        assert.deepEqual(labLeftovers(), []);
        const status = run(labSh, ["status"], 30_000);
        assert.notEqual(status.status, 0, "status must fail when the lab is down");
    });

    test("lab down cleans up after an up killed half-way (node booting)", async () => {
        const child = spawn(labSh, ["up"], { stdio: ["ignore", "ignore", "pipe"] });
        let stderr = "";
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
        try {
            await waitFor("lab up to start booting spark-a", 300_000, () => (/booting spark-a/.test(stderr) ? true : undefined), 100);
        } finally {
            child.kill("SIGKILL");
            await exited;
        }
        lab(["down"], 5 * 60_000);
        assert.deepEqual(labLeftovers(), []);
    });
});
