// End to end on the lab's Spark pair, with the real Pulumi CLI over real SSH:
// `pulumi up` from bare nodes, a chat completion through the exported
// endpoint, a second `up` with no changes, a model change that touches only
// vLLM, secrets kept out of state and ps, and a `destroy` that leaves the
// nodes as they were.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { shellQuote } from "../../components/render/host/shell";
import { withExclusiveLab } from "../lab/lab-harness";

const root = path.resolve(__dirname, "..", "..", "..");
const key = path.join(root, "lab", ".state", "id_ed25519");
const nodes = { "spark-a": "10.77.0.11", "spark-b": "10.77.0.12" } as const;
type NodeName = keyof typeof nodes;

/** Per-suite scratch: a throwaway backend and a copy of the lab stack's config. */
interface Session {
    backend: string;
    /** A copy of Pulumi.dev.yaml, so the test can change it without touching the real one. */
    configFile: string;
}

// A file of the user's that our NcclConfig replaces; destroy must put it back.
const userNcclConf = "# the user's own nccl.conf, from before spark-cluster\nNCCL_DEBUG=INFO\n";

function run(session: Session | undefined, file: string, args: string[], timeoutSeconds = 900): string {
    try {
        return execFileSync(file, args, {
            cwd: root,
            encoding: "utf8",
            timeout: timeoutSeconds * 1000,
            stdio: ["ignore", "pipe", "pipe"],
            env: {
                ...process.env,
                ...(session ? { PULUMI_BACKEND_URL: `file://${session.backend}` } : {}),
                PULUMI_CONFIG_PASSPHRASE: "",
                PULUMI_CONFIG_PASSPHRASE_FILE: "",
            },
        });
    } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        throw new Error(`${path.basename(file)} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
    }
}

function pulumi(session: Session, ...args: string[]): string {
    return run(session, path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", ...args]);
}

/** Commands that read stack config take the session's copy of it. */
function pulumiWithConfig(session: Session, ...args: string[]): string {
    return pulumi(session, ...args, "--config-file", session.configFile);
}

function ssh(node: NodeName, script: string): string {
    return run(undefined, "ssh", [
        "-i", key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
        "-o", "ConnectTimeout=10", `root@${nodes[node]}`, script,
    ], 120);
}

async function chat(endpoint: string, apiKey: string, model: string): Promise<string> {
    const response = await fetch(`${endpoint}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "Where do you run?" }], max_tokens: 64 }),
        signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    assert.equal(response.status, 200, `chat completion answered ${response.status}: ${text}`);
    const body = JSON.parse(text) as { model: string; choices: { message: { content: string } }[] };
    assert.equal(body.model, model);
    return body.choices[0].message.content;
}

function mainPid(node: NodeName, unit: string): string {
    return ssh(node, `systemctl show -p MainPID --value ${unit}.service`).trim();
}

/**
 * The lab stack as committed runs the container runtime; the same suite runs
 * again with the venv runtime (the stack copy's runtimes swapped), so both
 * ExecStart flavours of the same units are proven on real hosts.
 */
const RUNTIMES = {
    docker: (config: string) => config,
    venv: (config: string) => config.replace(/^(\s*)runtime: \{kind: docker[^}]*\}$/gm, "$1runtime: {kind: venv, path: /opt/lab-venv}"),
} as const;

for (const [runtime, adaptConfig] of Object.entries(RUNTIMES)) {
    describe(`pulumi up / destroy on the lab's Spark pair (${runtime} runtime)`, { timeout: 3_600_000 }, () => {
        const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-it-"));
        const session: Session = { backend: path.join(work, "backend"), configFile: path.join(work, "Pulumi.dev.yaml") };
        let apiKey = "";
        const originalMtu: Partial<Record<NodeName, string>> = {};

        withExclusiveLab({ setUp, tearDown });

        function setUp(): void {
            run(undefined, path.join(root, "lab", "lab.sh"), ["up"], 1800);
            fs.mkdirSync(session.backend, { recursive: true });
            const config = adaptConfig(fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8"));
            assert.match(config, new RegExp(`runtime: \\{kind: ${runtime}`), `the stack copy runs the ${runtime} runtime`);
            fs.writeFileSync(session.configFile, config);
            ssh("spark-b", `printf '%s' ${shellQuote(userNcclConf)} > /etc/nccl.conf`);
            for (const node of Object.keys(nodes) as NodeName[]) {
                originalMtu[node] = ssh(node, "cat /sys/class/net/enp1s0f1np1/mtu /sys/class/net/enP2p1s0f1np1/mtu");
            }
            apiKey = pulumiWithConfig(session, "config", "get", "spark-cluster:apiKey").trim();
            assert.ok(apiKey.length >= 16, "the lab stack has an API key");
        }

        function tearDown(): void {
            try {
                pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
            } catch {
                // Already destroyed by the test: the lab goes down next either way.
            }
            fs.rmSync(work, { recursive: true, force: true });
        }

        it("converges bare nodes and answers a chat completion placed on both nodes", async () => {
            for (const node of Object.keys(nodes) as NodeName[]) {
                assert.equal(ssh(node, "ls /etc/netplan/ | grep -c spark-cluster || true").trim(), "0", `${node} starts bare`);
            }
            pulumiWithConfig(session, "up", "--yes", "--skip-preview");
            const endpoint = pulumi(session, "stack", "output", "endpoint").trim();
            assert.equal(endpoint, "http://10.77.0.11:8000/v1");
            const text = await chat(endpoint, apiKey, "tiny-chat");
            assert.match(text, /spark-a/);
            assert.match(text, /spark-b/);
        });

        it("left the nodes as rendered: addresses, MTU 9000, PFC, nccl.conf, units", () => {
            const expected: Record<NodeName, string[]> = {
                "spark-a": ["192.168.100.11/24", "192.168.101.11/24"],
                "spark-b": ["192.168.100.12/24", "192.168.101.12/24"],
            };
            for (const node of Object.keys(nodes) as NodeName[]) {
                const [first, twin] = expected[node];
                assert.match(ssh(node, "ip -o -4 addr show dev enp1s0f1np1"), new RegExp(`inet ${first.replace(/\./g, "\\.")} `));
                assert.match(ssh(node, "ip -o -4 addr show dev enP2p1s0f1np1"), new RegExp(`inet ${twin.replace(/\./g, "\\.")} `));
                assert.equal(ssh(node, "cat /sys/class/net/enp1s0f1np1/mtu /sys/class/net/enP2p1s0f1np1/mtu").trim(), "9000\n9000");
                assert.equal(ssh(node, "stat -c %a /etc/netplan/60-spark-cluster-interconnect.yaml").trim(), "600");
                for (const iface of ["enp1s0f1np1", "enP2p1s0f1np1"]) {
                    const qos = JSON.parse(ssh(node, `cat /var/lib/lab-sim/mlnx_qos/${iface}.json`));
                    assert.deepEqual(qos.pfc, [0, 0, 0, 1, 0, 0, 0, 0], `${node} ${iface} PFC on priority 3`);
                    assert.equal(qos.trust, "dscp");
                }
                assert.match(ssh(node, "systemctl is-enabled spark-cluster-pfc.service"), /enabled/);
                const nccl = ssh(node, "cat /etc/nccl.conf");
                assert.match(nccl, /^NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1$/m);
                assert.match(nccl, /^NCCL_SOCKET_IFNAME=enp1s0f1np1$/m);
                assert.doesNotMatch(nccl, /GID_INDEX/);
                assert.equal(ssh(node, "systemctl is-active spark-cluster-ray.service").trim(), "active");
            const execStart = ssh(node, "grep ^ExecStart= /etc/systemd/system/spark-cluster-ray.service");
            if (runtime === "docker") {
                assert.match(execStart, /^ExecStart=\/usr\/bin\/docker run --rm --name spark-cluster-ray /);
                assert.equal(ssh(node, "docker inspect -f '{{.State.Running}}' spark-cluster-ray").trim(), "true");
            } else {
                assert.match(execStart, /^ExecStart=\/opt\/lab-venv\/bin\/ray start --block /);
            }
                assert.equal(ssh(node, "cat /etc/modules-load.d/nvidia-peermem.conf | tail -n 1").trim(), "nvidia-peermem");
            }
            assert.equal(ssh("spark-a", "systemctl is-active spark-cluster-vllm.service").trim(), "active");
            assert.equal(ssh("spark-a", "stat -c %a /etc/spark-cluster/vllm.env").trim(), "600");
            assert.match(ssh("spark-a", "cat /etc/systemd/system/spark-cluster-ray.service"), /--node-ip-address=192\.168\.100\.11 .*--head/);
            assert.match(ssh("spark-a", "cat /etc/systemd/system/spark-cluster-ray.service"), /--dashboard-host=127\.0\.0\.1/);
        });

        it("a second pulumi up reports no changes", () => {
            const out = pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--expect-no-changes");
            assert.match(out, /Resources:\s*\n\s*\d+ unchanged/);
            assert.doesNotMatch(out, /to create|to update|to replace|to delete|created|updated|replaced|deleted/);
        });

        it("changing the served model changes only the vLLM resources and keeps Ray running", async () => {
            const rayPid = mainPid("spark-a", "spark-cluster-ray");
            pulumiWithConfig(session, "config", "set", "--path", "spark-cluster:model.source", "Qwen/Qwen2.5-0.5B-Instruct");
            pulumiWithConfig(session, "config", "set", "--path", "spark-cluster:model.servedName", "qwen-small");
            const preview = JSON.parse(pulumiWithConfig(session, "preview", "--diff", "--json")) as { steps: { op: string; urn: string }[] };
            const changed = preview.steps.filter((s) => s.op !== "same").map((s) => s.urn.split("::").pop() as string);
            assert.ok(changed.length > 0, "the model change shows up in the preview");
            for (const name of changed) {
                assert.match(name, /^spark-a-vllm-(unit|ready)$/, `only vLLM resources change, not ${name}`);
            }
            pulumiWithConfig(session, "up", "--yes", "--skip-preview");
            assert.equal(mainPid("spark-a", "spark-cluster-ray"), rayPid, "Ray's head process keeps its PID");
            const text = await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "qwen-small");
            assert.match(text, /spark-a/);
        });

        it("keeps the API key and SSH key out of state, command outputs and ps", () => {
            const state = pulumi(session, "stack", "export");
            const sshKey = fs.readFileSync(key, "utf8");
            const keyBody = sshKey.split("\n").filter((l) => l && !l.startsWith("-----"));
            assert.ok(!state.includes(apiKey), "API key in stack export");
            for (const line of keyBody) {
                assert.ok(!state.includes(line), "SSH private key material in stack export");
            }
            assert.doesNotMatch(state, /BEGIN OPENSSH PRIVATE KEY/);
            for (const node of Object.keys(nodes) as NodeName[]) {
                assert.ok(!ssh(node, "ps -eo args").includes(apiKey), `API key in ps on ${node}`);
            }
        });

        it("pulumi destroy leaves nothing of ours and restores the file we replaced", () => {
            pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
            for (const node of Object.keys(nodes) as NodeName[]) {
                const leftovers = ssh(
                    node,
                    "ls /etc/netplan/60-spark-cluster-interconnect.yaml /etc/spark-cluster /var/lib/spark-cluster " +
                        "/etc/systemd/system/spark-cluster-ray.service /etc/systemd/system/spark-cluster-vllm.service " +
                        "/etc/systemd/system/spark-cluster-pfc.service /etc/modules-load.d/nvidia-peermem.conf 2>/dev/null || true",
                );
                assert.equal(leftovers.trim(), "", `${node} still has: ${leftovers}`);
                assert.doesNotMatch(ssh(node, "ip -o -4 addr"), /192\.168\.10[01]\./, `${node} keeps an interconnect address`);
                assert.doesNotMatch(ssh(node, "systemctl list-units --all --no-legend 'spark-cluster*'"), /spark-cluster/);
                for (const iface of ["enp1s0f1np1", "enP2p1s0f1np1"]) {
                    const qos = JSON.parse(ssh(node, `cat /var/lib/lab-sim/mlnx_qos/${iface}.json`));
                    assert.deepEqual(qos.pfc, [0, 0, 0, 0, 0, 0, 0, 0], `${node} ${iface} PFC restored`);
                    assert.equal(qos.trust, "pcp");
                }
                assert.equal(
                    ssh(node, "cat /sys/class/net/enp1s0f1np1/mtu /sys/class/net/enP2p1s0f1np1/mtu"),
                    originalMtu[node],
                    `${node} interconnect MTU restored`,
                );
                assert.doesNotMatch(ssh(node, "lsmod"), /^nvidia_peermem\s/m, `${node} nvidia-peermem unloaded`);
            }
            assert.equal(ssh("spark-b", "cat /etc/nccl.conf"), userNcclConf, "the user's nccl.conf is back as it was");
            assert.equal(ssh("spark-a", "ls /etc/nccl.conf 2>/dev/null || true").trim(), "", "no nccl.conf of ours left on spark-a");
        });
    });
}
