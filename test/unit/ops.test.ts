// `npm run status` and `npm run logs`, their pure parts: what each node must run (from the config),
// the node's report read back, the rules that make a node unhealthy (and the exit status), the
// rendered row and JSON, the scripts (bash -n, no secret), and the command line.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { ConfigError, parseConfig } from "../../config";
import { UNITS } from "../../config/hostPaths";
import { engineStrategy } from "../../components/render/engine";
import { nodeLogsScript } from "../../ops/logs";
import { parseArgs, rawConfigFromCli } from "../../ops/cli";
import { sparkPair } from "../support/fixtures";
import {
    NodeExpectation,
    STATUS_UNITS,
    judgeNode,
    nodeStatusScript,
    parseNodeReport,
    renderStatus,
    statusExitCode,
    statusExpectations,
    statusJson,
    statusRow,
} from "../../ops/status";

const API_KEY = "ops-test-api-key-0123456789abcdef";
const SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nops-test-key\n-----END OPENSSH PRIVATE KEY-----";

function pair(model: Record<string, unknown>, nodes: Record<string, unknown>[] = sparkPair()) {
    return parseConfig({
        values: {
            nodes,
            interconnect: { topology: "pair", mtu: 9000 },
            model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", ...model },
            sshPrivateKey: SSH_KEY,
            apiKey: API_KEY,
        },
        secretKeys: new Set(["sshPrivateKey", "apiKey"]),
    });
}

const mp = statusExpectations(pair({ executor: "mp" }));
const ray = statusExpectations(pair({ executor: "ray" }));
const paused = statusExpectations(pair({ executor: "mp", paused: true }));
/** SGLang (model.engine sglang) on a venv pair: its own multi-node mode. */
const sglangConfig = pair(
    { executor: "mp", engine: "sglang" },
    sparkPair().map((n) => ({ ...n, runtime: { kind: "venv", path: "/opt/sglang-venv" } })),
);
const sglang = statusExpectations(sglangConfig);

/** A healthy report for `expect`, as the node's script prints it. */
function healthyOutput(expect: NodeExpectation): string {
    const lines: string[] = [];
    for (const unit of STATUS_UNITS) {
        const running = expect.mustRun.includes(unit as (typeof expect.mustRun)[number]);
        const present = running || unit === UNITS.pfc || unit === UNITS.firewall;
        lines.push(
            `unit ${unit} LoadState=${present ? "loaded" : "not-found"}`,
            `unit ${unit} ActiveState=${running || present ? "active" : "inactive"}`,
            `unit ${unit} SubState=${running ? "running" : present ? "exited" : "dead"}`,
            `unit ${unit} NRestarts=0`,
            `unit ${unit} Result=success`,
        );
    }
    lines.push("mem MemTotal: 124000000", "mem MemAvailable: 62000000", "gpu 1024,122880");
    const names = ["enp1s0f1np1", "enP2p1s0f1np1"];
    expect.links.forEach((l, i) => lines.push(`link ${l.address} ${names[i]} up 9000 200000`));
    if (expect.api) lines.push("api health 200", `api models 200 ${JSON.stringify([expect.api.servedName])}`);
    if (expect.ray) lines.push(`ray 0 ray: ${expect.ray.nodes} node(s), ${expect.ray.gpus} GPU(s) after 0.4 s`);
    return lines.join("\n") + "\n";
}

describe("what each node must run", () => {
    it("mp: vLLM on every rank, the follower on rank 1, no Ray; the API on the head", () => {
        assert.deepEqual(
            mp.map((e) => [e.node, e.role, e.mustRun, e.api?.servedName, e.ray]),
            [
                ["spark-a", "head", [UNITS.vllm], "qwen", undefined],
                ["spark-b", "rank 1", [UNITS.vllm, UNITS.vllmFollow], undefined, undefined],
            ],
        );
        assert.deepEqual(mp[0].links, [
            { address: "192.168.100.11", mtu: 9000 },
            { address: "192.168.101.11", mtu: 9000 },
        ]);
    });

    it("ray: vLLM on the head only, Ray everywhere, the head checks every node and GPU", () => {
        assert.deepEqual(
            ray.map((e) => [e.node, e.role, e.mustRun]),
            [
                ["spark-a", "head", [UNITS.vllm, UNITS.ray]],
                ["spark-b", "ray worker", [UNITS.ray]],
            ],
        );
        assert.deepEqual(ray[0].ray, { address: "192.168.100.11:6379", nodes: 2, gpus: 2 });
    });

    it("paused: no vLLM unit and no API is expected anywhere", () => {
        assert.deepEqual(
            paused.map((e) => [e.mustRun, e.api]),
            [
                [[], undefined],
                [[], undefined],
            ],
        );
    });
});

describe("the rules: healthy or not, and the exit status", () => {
    it("a healthy pair: no problem, exit 0", () => {
        for (const cluster of [mp, ray, paused, sglang]) {
            const statuses = cluster.map((e) => judgeNode(e, parseNodeReport(healthyOutput(e))));
            assert.deepEqual(
                statuses.flatMap((s) => s.problems),
                [],
            );
            assert.equal(statusExitCode(statuses), 0);
        }
    });

    const cases: { name: string; cluster: NodeExpectation[]; node: number; edit: (out: string) => string; problem: RegExp }[] = [
        {
            name: "the vLLM unit stopped on rank 1",
            cluster: mp,
            node: 1,
            edit: (o) => o.replace(`unit ${UNITS.vllm} ActiveState=active`, `unit ${UNITS.vllm} ActiveState=inactive`),
            problem: /^spark-b: spark-cluster-vllm\.service is inactive/,
        },
        {
            name: "the follower missing",
            cluster: mp,
            node: 1,
            edit: (o) => o.replace(`unit ${UNITS.vllmFollow} LoadState=loaded`, `unit ${UNITS.vllmFollow} LoadState=not-found`),
            problem: /^spark-b: spark-cluster-vllm-follow\.service is not installed/,
        },
        {
            name: "the firewall unit failed (not one that must run)",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace(`unit ${UNITS.firewall} ActiveState=active`, `unit ${UNITS.firewall} ActiveState=failed`),
            problem: /^spark-a: spark-cluster-firewall\.service failed/,
        },
        {
            name: "/health not answering",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace("api health 200", "api health none"),
            problem: /^spark-a: vLLM \/health on port 8000 answered none/,
        },
        {
            name: "/v1/models refusing the key",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace(/api models 200 .*/, "api models 401 []"),
            problem: /^spark-a: vLLM \/v1\/models answered 401/,
        },
        {
            name: "/v1/models serving another name",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace(/api models 200 .*/, 'api models 200 ["other"]'),
            problem: /^spark-a: vLLM \/v1\/models lists \["other"\], not "qwen"/,
        },
        {
            name: "SGLang's unit stopped on rank 1 (the engine's own unit, not vLLM's)",
            cluster: sglang,
            node: 1,
            edit: (o) => o.replace(`unit ${UNITS.sglang} ActiveState=active`, `unit ${UNITS.sglang} ActiveState=inactive`),
            problem: /^spark-b: spark-cluster-sglang\.service is inactive/,
        },
        {
            name: "SGLang's /health not answering",
            cluster: sglang,
            node: 0,
            edit: (o) => o.replace("api health 200", "api health 503"),
            problem: /^spark-a: SGLang \/health on port 8000 answered 503/,
        },
        {
            name: "Ray short of a node",
            cluster: ray,
            node: 0,
            edit: (o) => o.replace(/^ray 0 .*/m, "ray 1 [spark-cluster] gave up after 0 s waiting for Ray; last seen: 1 node(s), 1 GPU(s)"),
            problem: /^spark-a: Ray does not show 2 nodes and 2 GPUs: .*last seen: 1 node\(s\)/,
        },
        {
            name: "a link down",
            cluster: mp,
            node: 1,
            edit: (o) => o.replace("enP2p1s0f1np1 up", "enP2p1s0f1np1 down"),
            problem: /^spark-b: enP2p1s0f1np1 \(192\.168\.101\.12\) is down/,
        },
        {
            name: "a link with the wrong MTU",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace("enp1s0f1np1 up 9000", "enp1s0f1np1 up 1500"),
            problem: /^spark-a: enp1s0f1np1 has MTU 1500, not 9000/,
        },
        {
            name: "an address on no interface",
            cluster: mp,
            node: 0,
            edit: (o) => o.replace(/^link 192\.168\.100\.11 .*/m, "link 192.168.100.11 none down 0 unknown"),
            problem: /^spark-a: no interface has the interconnect address 192\.168\.100\.11/,
        },
    ];
    for (const c of cases) {
        it(`${c.name}: unhealthy, naming the node (and unit), exit 1`, () => {
            const statuses = c.cluster.map((e, i) => judgeNode(e, parseNodeReport(i === c.node ? c.edit(healthyOutput(e)) : healthyOutput(e))));
            const problems = statuses.flatMap((s) => s.problems);
            assert.equal(problems.length, 1, problems.join("\n"));
            assert.match(problems[0], c.problem);
            assert.equal(statusExitCode(statuses), 1);
            assert.equal(statusRow(statuses[c.node]).at(-1), "UNHEALTHY");
        });
    }

    it("a node that cannot be asked is unhealthy, with why", () => {
        const statuses = [
            judgeNode(mp[0], parseNodeReport(healthyOutput(mp[0]))),
            judgeNode(mp[1], undefined, "ssh: connect to host 10.0.0.12 port 22: No route to host"),
        ];
        assert.deepEqual(statuses[1].problems, ["spark-b: cannot ask the node: ssh: connect to host 10.0.0.12 port 22: No route to host"]);
        assert.equal(statusExitCode(statuses), 1);
        assert.match(statusRow(statuses[1])[2], /^unreachable: ssh: connect/);
    });

    it("memory and link speed are shown, never judged", () => {
        const out = healthyOutput(mp[0])
            .replace("mem MemAvailable: 62000000", "mem MemAvailable: 1000")
            .replace(/ 200000$/gm, " 10000");
        assert.deepEqual(judgeNode(mp[0], parseNodeReport(out)).problems, []);
    });
});

describe("the image: the units start it by the ID up found; the tag naming another is drift", () => {
    const deployed = `sha256:${"a1".repeat(32)}`;
    const other = `sha256:${"b2".repeat(32)}`;
    /** spark-b's report with the image lines: the tag's ID now, and the vLLM and Ray units' (ray executor). */
    const withImage = (expect: NodeExpectation, tagId: string, present = "present") =>
        healthyOutput(expect) +
        `image tag ${tagId}\nimage unit ${UNITS.ray} ${deployed} ${present}\n` +
        (expect.api ? `image unit ${UNITS.vllm} ${deployed} ${present}\n` : "");

    it("reads the tag's ID and each unit's", () => {
        assert.deepEqual(parseNodeReport(withImage(ray[1], other)).image, { tagId: other, units: [{ unit: UNITS.ray, id: deployed, present: true }] });
        assert.deepEqual(parseNodeReport("image tag \n").image, { units: [] }, "no such image: no ID");
    });

    it("the tag on the deployed image: healthy, no drift", () => {
        const statuses = ray.map((e) => judgeNode(e, parseNodeReport(withImage(e, deployed))));
        assert.deepEqual(
            statuses.map((s) => [s.problems, s.drift]),
            [
                [[], undefined],
                [[], undefined],
            ],
        );
    });

    it("the tag re-pointed on spark-b: drift naming the node, the tag, both IDs and the units; still healthy (exit 0), shown below the table", () => {
        const statuses = ray.map((e, i) => judgeNode(e, parseNodeReport(withImage(e, i === 1 ? other : deployed))));
        assert.deepEqual(statuses[0].drift, undefined);
        assert.deepEqual(statuses[1].drift, [
            `spark-b: the tag nvcr.io/nvidia/vllm:26.10-py3 names ${other} now; spark-cluster-ray.service starts ${deployed}, the image up deployed ` +
                "(pulumi preview --refresh shows it; pulumi up --refresh refuses while the nodes' IDs differ, and otherwise restarts onto the new one)",
        ]);
        assert.equal(statusExitCode(statuses), 0);
        const text = renderStatus(statuses, false);
        assert.match(text, /\ndrift \(1\), the units still run what up deployed:\n {2}spark-b: the tag /);
        assert.equal(text.split("\n").at(-1), "healthy");
        const doc = JSON.parse(statusJson("dev", statuses, false)) as { nodes: { drift?: string[] }[] };
        assert.equal(doc.nodes[1].drift?.length, 1);
    });

    it("the head's two units on one ID are one line; no image under the tag says so", () => {
        const status = judgeNode(ray[0], parseNodeReport(withImage(ray[0], "")));
        assert.deepEqual(status.drift?.length, 1);
        assert.match(
            status.drift?.[0] ?? "",
            /^spark-a: the tag \S+ names no image now; spark-cluster-ray\.service and spark-cluster-vllm\.service start sha256:a1/,
        );
    });

    it("the deployed image gone from the node: unhealthy (the next start fails), exit 1", () => {
        const statuses = ray.map((e, i) => judgeNode(e, parseNodeReport(withImage(e, deployed, i === 1 ? "absent" : "present"))));
        assert.deepEqual(statuses[1].problems, [
            `spark-b: spark-cluster-ray.service starts the image ${deployed}, which is no longer on the node: its next start fails. ` +
                "Fix: docker pull nvcr.io/nvidia/vllm:26.10-py3, then pulumi up --refresh",
        ]);
        assert.equal(statusExitCode(statuses), 1);
    });

    it("the node's script asks docker for the tag's ID and reads each unit's ExecStart (docker runtime only)", () => {
        const script = nodeStatusScript(ray[1]);
        assert.match(script, /echo "image tag \$\(docker image inspect --format '\{\{\.Id\}\}' -- nvcr\.io\/nvidia\/vllm:26\.10-py3\)"/);
        assert.match(script, /for unit in spark-cluster-ray spark-cluster-vllm /);
        const venv = statusExpectations(
            parseConfig({
                values: {
                    nodes: sparkPair().map((n) => ({ ...n, runtime: { kind: "venv", path: "/opt/vllm-venv" } })),
                    interconnect: { topology: "pair", mtu: 9000 },
                    model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor: "mp" },
                    sshPrivateKey: SSH_KEY,
                    apiKey: API_KEY,
                },
                secretKeys: new Set(["sshPrivateKey", "apiKey"]),
            }),
        );
        assert.doesNotMatch(nodeStatusScript(venv[0]), /image tag|docker/);
    });
});

describe("what status prints", () => {
    const statuses = ray.map((e) => judgeNode(e, parseNodeReport(healthyOutput(e))));

    it("one row per node: units with restarts, vLLM, Ray, memory in use, links with MTU and speed", () => {
        const restarted = healthyOutput(ray[0]).replace(`unit ${UNITS.vllm} NRestarts=0`, `unit ${UNITS.vllm} NRestarts=3`);
        assert.deepEqual(statusRow(judgeNode(ray[0], parseNodeReport(restarted))), [
            "spark-a",
            "head",
            "vllm=active(3 restarts) ray=active pfc=active firewall=active",
            "health 200, models 200 qwen",
            "2 node(s), 2 GPU(s)",
            "59.1/118.3 GiB, GPU 1.0/120.0 GiB",
            "enp1s0f1np1 up mtu 9000 200G; enP2p1s0f1np1 up mtu 9000 200G",
            "ok",
        ]);
    });

    it("a table with a header, each node on one line, and the verdict", () => {
        const text = renderStatus(statuses, false);
        const lines = text.split("\n");
        assert.match(lines[0], /^NODE +ROLE +UNITS +ENGINE API +RAY +MEMORY USED +INTERCONNECT +HEALTH$/);
        assert.match(lines[1], /^spark-a +head +vllm=active ray=active/);
        assert.match(lines[2], /^spark-b +ray worker +ray=active/);
        assert.equal(lines.at(-1), "healthy");
        assert.match(renderStatus(statuses, true), /serving is paused \(model\.paused: true\)/);
    });

    it("an SGLang pair: SGLang's units and API, no vLLM unit expected", () => {
        assert.deepEqual(
            sglang.map((e) => e.mustRun),
            [[UNITS.sglang], [UNITS.sglang, UNITS.sglangFollow]],
        );
        const rows = sglang.map((e) => statusRow(judgeNode(e, parseNodeReport(healthyOutput(e)))));
        assert.equal(rows[0][2], "sglang=active pfc=active firewall=active");
        assert.equal(rows[1][2], "sglang=active follow=active pfc=active firewall=active");
        assert.equal(rows[0][3], "health 200, models 200 qwen");
        assert.equal(rows[0].at(-1), "ok");
    });

    it("--json parses, with the verdict and every node", () => {
        const doc = JSON.parse(statusJson("dev", statuses, false)) as { stack: string; healthy: boolean; nodes: { node: string; problems: string[] }[] };
        assert.equal(doc.stack, "dev");
        assert.equal(doc.healthy, true);
        assert.deepEqual(
            doc.nodes.map((n) => n.node),
            ["spark-a", "spark-b"],
        );
    });
});

describe("the scripts a node runs", () => {
    const bashN = (script: string) => spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });

    it("status: valid bash, no secret, the API key read on the node and sent only to 127.0.0.1", () => {
        for (const expect of [...mp, ...ray, ...paused, ...sglang]) {
            const script = nodeStatusScript(expect);
            const check = bashN(script);
            assert.equal(check.status, 0, check.stderr);
            assert.ok(!script.includes(API_KEY), "no API key in the script");
            assert.equal(script.includes("/v1/models"), expect.api !== undefined, `${expect.node}: asks vLLM only where rank 0 serves`);
            assert.equal(/GcsClient/.test(script), expect.ray !== undefined, `${expect.node}: asks Ray only on its head`);
        }
        assert.match(nodeStatusScript(mp[0]), /read_env_value\("\/etc\/spark-cluster\/vllm\.env", "VLLM_API_KEY"\)/);
        assert.match(nodeStatusScript(mp[0]), /http:\/\/127\.0\.0\.1:8000/);
        // SGLang's key is in its --config file (YAML), not vllm.env (which only the gate's scrubber names).
        assert.match(nodeStatusScript(sglang[0]), /open\("\/etc\/spark-cluster\/sglang\.yaml", encoding="utf-8"\)/);
        assert.doesNotMatch(nodeStatusScript(sglang[0]), /read_env_value\("\/etc\/spark-cluster\/vllm\.env"/);
    });

    it("logs: valid bash; our units' journals; --follow stops its reader when the session ends", () => {
        const vllmOps = engineStrategy(pair({ executor: "mp" }).engine).ops;
        const once = nodeLogsScript({ lines: 50, follow: false }, vllmOps);
        assert.equal(bashN(once).status, 0);
        assert.match(
            once,
            /^journalctl --no-pager -o short-iso -u spark-cluster-vllm\.service -u spark-cluster-vllm-follow\.service -u spark-cluster-vllm-watchdog\.service -u spark-cluster-ray\.service -u spark-cluster-ray-watchdog\.service -u spark-cluster-open-webui\.service -u spark-cluster-open-webui-watchdog\.service -u spark-cluster-node-exporter\.service -u spark-cluster-prometheus\.service -n 50 \| python3 -c /m,
        );
        const follow = nodeLogsScript({ lines: 10, follow: true, since: "10 min ago" }, vllmOps);
        assert.equal(bashN(follow).status, 0);
        assert.match(follow, / -n 10 --since '10 min ago' -f > >\(python3 -u -c '[\s\S]*'\) &$/m);
        assert.match(follow, /^kill "\$reader"/m);
        assert.throws(() => nodeLogsScript({ lines: 10, follow: false, since: "'; rm -rf /" }, vllmOps), /--since must be a journalctl time/);
        assert.throws(() => nodeLogsScript({ lines: 0, follow: false }, vllmOps), /--lines must be a whole number/);
        // An SGLang stack: SGLang's unit and follower.
        assert.match(
            nodeLogsScript({ lines: 50, follow: false }, engineStrategy(sglangConfig.engine).ops),
            /^journalctl --no-pager -o short-iso -u spark-cluster-sglang\.service -u spark-cluster-sglang-follow\.service -u spark-cluster-sglang-watchdog\.service -u spark-cluster-ray\.service -u spark-cluster-ray-watchdog\.service -u spark-cluster-open-webui\.service -u spark-cluster-open-webui-watchdog\.service -u spark-cluster-node-exporter\.service -u spark-cluster-prometheus\.service -n 50 \| python3 -c /m,
        );
    });
});

describe("the command line", () => {
    it("status and logs with their options", () => {
        assert.deepEqual(parseArgs(["status", "--stack", "dev", "--json"]), {
            command: "status",
            stack: "dev",
            json: true,
            logs: { lines: 200, follow: false },
        });
        assert.deepEqual(parseArgs(["logs", "--stack", "dev", "spark-a", "--follow", "--lines", "20"]), {
            command: "logs",
            stack: "dev",
            json: false,
            node: "spark-a",
            logs: { lines: 20, follow: true },
        });
    });

    it("refuses what it does not know, and a missing stack", () => {
        assert.throws(() => parseArgs(["status"]), /--stack NAME is required/);
        assert.throws(() => parseArgs(["status", "--stack", "dev", "--follow"]), /unknown argument "--follow"/);
        assert.throws(() => parseArgs(["restart", "--stack", "dev"]), /unknown command "restart"/);
        assert.throws(() => parseArgs(["logs", "--stack", "dev", "--lines", "x"]), /--lines must be a whole number/);
    });

    it("reads `pulumi config --json` as the program reads its config: structured values decoded, secrets marked", () => {
        const raw = rawConfigFromCli(
            JSON.stringify({
                "spark-cluster:model": { value: '{"source":"lab/tiny-chat"}', objectValue: { source: "lab/tiny-chat" }, secret: false },
                "spark-cluster:apiKey": { value: API_KEY, secret: true },
                "aws:region": { value: "us-east-1", secret: false },
            }),
        );
        assert.deepEqual(raw.values, { model: { source: "lab/tiny-chat" }, apiKey: API_KEY });
        assert.deepEqual([...raw.secretKeys], ["apiKey"]);
    });

    it("a top-level key spark-cluster:__proto__ stays a key (not the values' prototype), and the parser refuses it by name", () => {
        const raw = rawConfigFromCli(
            JSON.stringify({
                "spark-cluster:__proto__": { value: '{"model":{"source":"lab/tiny-chat"}}', secret: false },
                "spark-cluster:apiKey": { value: API_KEY, secret: true },
            }),
        );
        assert.equal(Object.getPrototypeOf(raw.values), Object.prototype, "the prototype is untouched");
        assert.deepEqual(Object.keys(raw.values), ["__proto__", "apiKey"]);
        assert.throws(
            () => parseConfig(raw),
            (err: unknown) =>
                err instanceof ConfigError && err.issues.length === 1 && err.issues[0]?.path === "__proto__" && /reserves for the prototype/.test(err.message),
        );
    });
});
