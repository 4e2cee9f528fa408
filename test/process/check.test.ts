/**
 * The cluster checks: the NCCL check (components/render/check: nccl_check.py and its renderer)
 * and the serving benchmark (components/render/bench.ts, scripts/bench-serve.sh and the lab's
 * `vllm bench serve` stand-in, lab/vllm_standin/vllm_standin/bench.py).
 *
 * - nccl_check.py runs for real: two ranks on loopback with torch's gloo backend on CPU tensors
 *   (what a node without a GPU does). torch comes from scripts/torch-python.sh: python3's own
 *   torch, else a venv cached under ~/.cache/spark-cluster (PyPI, a few GB, ~2 min the first
 *   time). If torch cannot be had, these tests FAIL with the reason: never skipped.
 * - The NCCL log parser reads NCCL's own INFO lines (NET/IB on a RoCE pair, NET/Socket, and the
 *   P2P lines an H200 pair printed).
 * - The benchmark stand-in loads a tiny loopback HTTP server (SSE like vLLM's /v1/completions),
 *   directly and through the rendered remote script with stubbed `docker` / venv `vllm`.
 * - Renderer snapshots (test/process/__snapshots__/check.*.snap) and `bash -n` on every script.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { DockerRuntimeSchema, Runtime } from "../../config";
import type { ClusterSummary } from "../../components/clusterSummary";
import { BENCH_DEFAULTS, BenchServeSpec, benchServeArgv, benchServeCommand, benchServeScript, benchTargetFromCluster } from "../../components/render/bench";
import {
    NCCL_CHECK_PATH,
    NcclCheckSpec,
    ncclCheckArgs,
    ncclCheckCommand,
    ncclCheckScript,
    ncclCheckSource,
    parseNcclCheckResult,
} from "../../components/render/check";
import { renderEnvFile } from "../../components/render/host/envFile";
import { remoteCommand } from "../../components/render/host/shell";
import { RUNTIME_ENV_PATH, VLLM_SECRETS_PATH } from "../../config/hostPaths";
import { renderVllmSecrets } from "../../components/render/vllm";
import { matchSnapshot, unusedSnapshots } from "../support/snapshot";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const CHECK_DIR = path.join(ROOT, "components", "render", "check");
const CHECK_PY = path.join(CHECK_DIR, "nccl_check.py");
const STANDIN = path.join(ROOT, "lab", "vllm_standin");
/** Importing nccl_check.py from the source tree must not leave __pycache__ there. */
const NO_PYCACHE: NodeJS.ProcessEnv = { ...process.env, PYTHONDONTWRITEBYTECODE: "1" };
/** Runs the stand-in's `vllm` console script (cli.main) with the arguments that follow. */
const STANDIN_VLLM = `import sys; sys.path.insert(0, ${JSON.stringify(STANDIN)}); from vllm_standin.cli import main; sys.exit(main())`;

interface Ran {
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
}

/** Runs a program without blocking the event loop (the loopback server answers meanwhile), bounded by `timeoutMs`. */
function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<Ran> {
    return new Promise((resolve, reject) => {
        const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
        child.on("error", (err) => {
            clearTimeout(timer);
            reject(err);
        });
        child.on("close", (code, signal) => {
            clearTimeout(timer);
            resolve({ code, signal, stdout, stderr });
        });
    });
}

function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const server = net.createServer();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () => {
            const { port } = server.address() as net.AddressInfo;
            server.close(() => resolve(port));
        });
    });
}

function bashN(script: string): { status: number | null; stderr: string } {
    const result = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
    return { status: result.status, stderr: result.stderr };
}

const dockerRuntime: Runtime = DockerRuntimeSchema.parse({ kind: "docker" });
const venvRuntime: Runtime = { kind: "venv", path: "/opt/vllm-venv" };

// ---------------------------------------------------------------------------------------------
describe("nccl_check.py: two ranks on loopback with gloo (real torch, CPU tensors)", () => {
    let python = "";
    let setupError: Error | undefined;
    let envFile = "";
    let tmp = "";

    before(
        () => {
            const started = Date.now();
            const result = spawnSync(path.join(ROOT, "scripts", "torch-python.sh"), [], { encoding: "utf8", timeout: 40 * 60_000 });
            if (result.status !== 0) {
                // Recorded, not thrown: a failing hook would leave the tests "cancelled"; each test fails with it instead.
                setupError = new Error(
                    `torch is needed for the NCCL check's gloo test and could not be installed (scripts/torch-python.sh exited ${result.status}` +
                        `${result.signal ? `, ${result.signal}` : ""}). It installs torch from PyPI into ~/.cache/spark-cluster; its output:\n${result.stderr}`,
                );
                return;
            }
            python = result.stdout.trim().split("\n").at(-1) ?? "";
            assert.ok(python, "scripts/torch-python.sh printed no interpreter path");
            tmp = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-check-"));
            // runtime.env as a venv node has it (systemd quoting): the script loads it with --env-file.
            envFile = path.join(tmp, "runtime.env");
            fs.writeFileSync(envFile, renderEnvFile("test", [["GLOO_SOCKET_IFNAME", "lo"]], "systemd"));
            console.log(`torch python ${python} ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
        },
        { timeout: 45 * 60_000 },
    );
    after(() => {
        if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    async function ranks(extra: Partial<NcclCheckSpec>, which: number[] = [0, 1]): Promise<Ran[]> {
        if (setupError) throw setupError;
        const masterPort = await freePort();
        return Promise.all(
            which.map((rank) => {
                const spec: NcclCheckSpec = {
                    node: `rank${rank}`,
                    runtime: venvRuntime,
                    rank,
                    worldSize: 2,
                    masterAddr: "127.0.0.1",
                    masterPort,
                    sizes: ["1M", "4M", "16M"],
                    initTimeoutSeconds: 60,
                    timeoutSeconds: 120,
                    ...extra,
                };
                const args = [CHECK_PY, "--env-file", envFile, "--env-format", "systemd", ...ncclCheckArgs(spec)];
                return run(python, args, { timeoutMs: 180_000 });
            }),
        );
    }

    test("measures bus bandwidth, says gloo/TCP, passes a pass mark below it (exit 0)", { timeout: 240_000 }, async () => {
        const results = await ranks({ passMarkGBps: 0.001 });
        for (const [rank, r] of results.entries()) {
            assert.equal(r.code, 0, `rank ${rank} exit ${r.code}:\n${r.stdout}\n${r.stderr}`);
            const result = parseNcclCheckResult(r.stdout);
            assert.ok(result, `no result line:\n${r.stdout}`);
            assert.equal(result.result, "pass");
            assert.equal(result.transport, "gloo/TCP");
            assert.equal(result.fields["backend"], "gloo");
            assert.equal(result.fields["iface"], "lo");
            assert.equal(result.fields["rank"], String(rank));
            assert.equal(result.fields["world"], "2");
            assert.equal(result.passMarkGBps, 0.001);
            assert.ok(result.busbwGBps !== undefined && result.busbwGBps > 0.001, `busbw ${result.busbwGBps}`);
            // Two ranks: busbw = algbw x 2(n-1)/n = algbw.
            assert.equal(result.busbwGBps, result.algbwGBps);
            assert.match(r.stdout, /loaded 1 variables from .*runtime\.env \(GLOO_SOCKET_IFNAME\)/);
            assert.match(r.stdout, /process group ready in/);
        }
        assert.match(results[0].stdout, /nccl-check: +size +count +iters +time\(us\) +algbw\(GB\/s\) +busbw\(GB\/s\)/);
        assert.match(results[0].stdout, /nccl-check: +16MiB +4194304 /);
        const last = results[0].stdout.trim().split("\n").at(-1) ?? "";
        assert.match(last, /^nccl-check: busbw=[0-9.]+ GB\/s algbw=[0-9.]+ GB\/s transport=gloo\/TCP pass_mark=0\.001 GB\/s result=pass /);
        console.log(`local gloo on loopback (2 ranks, 2 cores):\n${results[0].stdout.trim().split("\n").slice(-5).join("\n")}`);
    });

    test("a pass mark above the measured bandwidth fails with exit 1 (result=fail, below-pass-mark)", { timeout: 240_000 }, async () => {
        const results = await ranks({ passMarkGBps: 1_000_000 });
        for (const [rank, r] of results.entries()) {
            assert.equal(r.code, 1, `rank ${rank} exit ${r.code}:\n${r.stdout}\n${r.stderr}`);
            const result = parseNcclCheckResult(r.stdout);
            assert.ok(result);
            assert.equal(result.result, "fail");
            assert.equal(result.fields["reason"], "below-pass-mark");
            assert.ok(result.busbwGBps !== undefined && result.busbwGBps < 1_000_000);
        }
    });

    test("a rank that no peer joins gives up within its init timeout (exit 2, init-failed)", { timeout: 60_000 }, async () => {
        const started = Date.now();
        const [r] = await ranks({ initTimeoutSeconds: 3, timeoutSeconds: 30 }, [0]);
        assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
        assert.equal(parseNcclCheckResult(r.stdout)?.fields["reason"], "init-failed");
        assert.ok(Date.now() - started < 30_000, `took ${Date.now() - started} ms`);
    });

    test("the overall timeout ends a rank that waits forever (exit 124, timeout)", { timeout: 60_000 }, async () => {
        const [r] = await ranks({ initTimeoutSeconds: 100, timeoutSeconds: 4 }, [1]);
        assert.equal(r.code, 124, `${r.stdout}\n${r.stderr}`);
        assert.equal(parseNcclCheckResult(r.stdout)?.result, "error");
        assert.equal(parseNcclCheckResult(r.stdout)?.fields["reason"], "timeout-4s");
    });
});

// ---------------------------------------------------------------------------------------------
describe("nccl_check.py: what NCCL says it used (NCCL_DEBUG=INFO lines)", () => {
    function parse(log: string): { transport: string | null; vias: string[]; network: string | null } {
        const code = `import json, sys; sys.path.insert(0, ${JSON.stringify(CHECK_DIR)}); import nccl_check; print(json.dumps(nccl_check.parse_nccl_log(sys.stdin.read())))`;
        const result = spawnSync("python3", ["-c", code], { input: log, encoding: "utf8", env: NO_PYCACHE });
        assert.equal(result.status, 0, result.stderr);
        return JSON.parse(result.stdout);
    }

    test("RoCE between two Sparks: NET/IB", () => {
        const info = parse(
            [
                "spark-a:2211:2230 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.11<0>",
                "spark-a:2211:2230 [0] NCCL INFO Using network IB",
                "spark-a:2211:2241 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
                "spark-a:2211:2241 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA",
            ].join("\n"),
        );
        assert.equal(info.transport, "NET/IB");
        assert.deepEqual(info.vias, ["NET/IB/0/GDRDMA", "NET/IB/1/GDRDMA"]);
        assert.equal(info.network, "IB");
    });

    test("sockets (what an H200 pair printed with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): NET/Socket", () => {
        const info = parse(
            [
                "vm:512:530 [0] NCCL INFO NET/IB : No device found.",
                "vm:512:530 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>",
                "vm:512:530 [0] NCCL INFO Using network Socket",
                "vm:512:544 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0",
                "vm:512:544 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
            ].join("\n"),
        );
        assert.equal(info.transport, "NET/Socket");
        assert.equal(info.network, "Socket");
    });

    test("one host: P2P (NVLink) or SHM, and unknown without channel lines", () => {
        assert.equal(parse("vm:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM").transport, "P2P");
        assert.equal(parse("vm:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct").transport, "SHM");
        assert.equal(parse("vm:1:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0").transport, null);
    });

    test("the rendered arguments are the script's own (its argparse accepts them)", () => {
        const spec: NcclCheckSpec = {
            node: "spark-b",
            runtime: venvRuntime,
            rank: 1,
            worldSize: 2,
            masterAddr: "192.168.100.11",
            requireTransport: "NET/IB",
            sizes: ["1M", "256M"],
            environment: { NCCL_P2P_DISABLE: "1" },
        };
        const code = `import json, sys; sys.path.insert(0, ${JSON.stringify(CHECK_DIR)}); import nccl_check; print(json.dumps(vars(nccl_check.build_parser().parse_args(sys.argv[1:]))))`;
        const result = spawnSync("python3", ["-c", code, "--env", "NCCL_P2P_DISABLE=1", ...ncclCheckArgs(spec)], { encoding: "utf8", env: NO_PYCACHE });
        assert.equal(result.status, 0, result.stderr);
        const parsed = JSON.parse(result.stdout);
        assert.equal(parsed.rank, 1);
        assert.equal(parsed.world_size, 2);
        assert.equal(parsed.master_addr, "192.168.100.11");
        assert.equal(parsed.master_port, 29500);
        assert.equal(parsed.pass_mark, 21.875);
        assert.equal(parsed.require_transport, "NET/IB");
        assert.equal(parsed.sizes, "1M,256M");
        assert.deepEqual(parsed.env, ["NCCL_P2P_DISABLE=1"]);
    });
});

// ---------------------------------------------------------------------------------------------
describe("NCCL check renderer", () => {
    const base: NcclCheckSpec = { node: "spark-b", runtime: dockerRuntime, rank: 1, worldSize: 2, masterAddr: "192.168.100.11", source: "# nccl_check.py\n" };

    test("docker runtime: a throwaway container of the image with the unit's flags and runtime.env, the script on stdin", () => {
        const script = ncclCheckScript({ ...base, requireTransport: "NET/IB" });
        matchSnapshot("check.nccl-check.docker.sh", script);
        const command = ncclCheckCommand(base);
        assert.match(command, /^\/usr\/bin\/docker run -i --rm --name spark-cluster-check --network host --ipc host --pid host --gpus all /);
        assert.match(command, / --privileged --ulimit memlock=-1 -v \/dev\/infiniband:\/dev\/infiniband /);
        assert.ok(command.includes(`--env-file ${RUNTIME_ENV_PATH} --entrypoint python3 -- nvcr.io/nvidia/vllm:26.10-py3 - --rank 1 `), command);
        assert.ok(command.endsWith(`< ${NCCL_CHECK_PATH}`), command);
    });

    test("venv runtime: the venv's python loads runtime.env as systemd reads it; overrides after it", () => {
        const spec = { ...base, runtime: venvRuntime, environment: { NCCL_P2P_DISABLE: "1", NCCL_SHM_DISABLE: "1" }, passMarkGBps: 20 };
        matchSnapshot("check.nccl-check.venv.sh", ncclCheckScript(spec));
        assert.equal(
            ncclCheckCommand(spec),
            `/opt/vllm-venv/bin/python ${NCCL_CHECK_PATH} --env-file ${RUNTIME_ENV_PATH} --env-format systemd --env NCCL_P2P_DISABLE=1 --env NCCL_SHM_DISABLE=1 ` +
                "--rank 1 --world-size 2 --master-addr 192.168.100.11 --master-port 29500 --pass-mark 20 --init-timeout 120 --timeout 300",
        );
    });

    test("the default script embeds nccl_check.py verbatim and passes bash -n (also as a remote command)", () => {
        const source = fs.readFileSync(CHECK_PY, "utf8");
        assert.equal(ncclCheckSource(), source);
        for (const runtime of [dockerRuntime, venvRuntime]) {
            const script = ncclCheckScript({ ...base, runtime, source: undefined });
            assert.ok(script.includes(source), "the script's text is not embedded verbatim");
            const { status, stderr } = bashN(script);
            assert.equal(status, 0, stderr);
            assert.equal(stderr, "");
            assert.equal(bashN(remoteCommand(script, "ubuntu")).status, 0);
        }
    });

    test("refuses what cannot run: rank outside the world, an address with a prefix, bad names", () => {
        assert.throws(() => ncclCheckArgs({ ...base, rank: 2 }), /rank must be an integer in \[0, 2\)/);
        assert.throws(() => ncclCheckArgs({ ...base, worldSize: 1, rank: 0 }), /worldSize must be an integer >= 2/);
        assert.throws(() => ncclCheckArgs({ ...base, masterAddr: "192.168.100.11/24" }), /masterAddr must be an address/);
        assert.throws(() => ncclCheckArgs({ ...base, masterPort: 70000 }), /masterPort must be in 1\.\.65535/);
        assert.throws(() => ncclCheckArgs({ ...base, sizes: ["lots"] }), /not a size like 64M/);
        assert.throws(() => ncclCheckArgs({ ...base, environment: { "NCCL-X": "1" } }), /not a variable name/);
        assert.throws(() => ncclCheckArgs({ ...base, environment: { NCCL_X: "a\nb" } }), /line breaks/);
        assert.throws(() => ncclCheckArgs({ ...base, passMarkGBps: -1 }), /passMarkGBps must be a number >= 0/);
        assert.doesNotThrow(() => ncclCheckArgs({ ...base, passMarkGBps: 0 }), "0: report only");
    });

    test("parseNcclCheckResult reads the last result line", () => {
        const output = [
            "nccl-check: process group ready in 2.1s",
            "nccl-check: busbw=297.914 GB/s algbw=297.914 GB/s transport=P2P pass_mark=21.875 GB/s result=pass rank=0 world=2 backend=nccl transports=P2P/CUMEM nccl=2.28.9+cuda13.0 network=Socket size=256MiB avg_busbw=207.823 GB/s seconds=2.8",
            "[spark-cluster] done",
        ].join("\n");
        const result = parseNcclCheckResult(output);
        assert.ok(result);
        assert.equal(result.result, "pass");
        assert.equal(result.busbwGBps, 297.914);
        assert.equal(result.passMarkGBps, 21.875);
        assert.equal(result.transport, "P2P");
        assert.equal(result.fields["nccl"], "2.28.9+cuda13.0");
        assert.equal(parseNcclCheckResult("nothing here"), undefined);
    });
});

// ---------------------------------------------------------------------------------------------
describe("benchmark renderer and scripts/bench-serve.sh", () => {
    const spec: BenchServeSpec = { ...BENCH_DEFAULTS, runtime: dockerRuntime, port: 8000, model: "Qwen/Qwen2.5-72B-Instruct", servedName: "qwen72b" };
    const cluster: Pick<ClusterSummary, "head" | "nodes" | "model"> = {
        head: "spark-a",
        nodes: [
            {
                name: "spark-b",
                kind: "spark",
                head: false,
                ssh: { user: "root", host: "10.77.0.12", port: 22 },
                gpus: 1,
                runtime: { ...dockerRuntime, image: "nvcr.io/nvidia/vllm:25.09-py3" },
                interconnect: [],
            },
            {
                name: "spark-a",
                kind: "spark",
                head: true,
                ssh: { user: "ubuntu", host: "10.77.0.11", port: 2222 },
                gpus: 1,
                runtime: { kind: "venv", path: "/opt/vllm-venv" },
                interconnect: [],
            },
        ],
        model: { source: "lab/tiny-chat", servedName: "tiny-chat", executor: "ray", tensorParallel: 2, pipelineParallel: 1, apiPort: 8001 },
    };

    test("argv: the seeds' flags with the seeds' defaults (random 1024 in / 128 out, 100 prompts, rate inf)", () => {
        assert.deepEqual(benchServeArgv(spec), [
            "vllm",
            "bench",
            "serve",
            "--backend",
            "openai",
            "--host",
            "127.0.0.1",
            "--port",
            "8000",
            "--endpoint",
            "/v1/completions",
            "--model",
            "Qwen/Qwen2.5-72B-Instruct",
            "--served-model-name",
            "qwen72b",
            "--dataset-name",
            "random",
            "--random-input-len",
            "1024",
            "--random-output-len",
            "128",
            "--num-prompts",
            "100",
            "--request-rate",
            "inf",
            "--seed",
            "0",
        ]);
        assert.deepEqual(benchServeArgv({ ...spec, maxConcurrency: 8, requestRate: "2", extraArgs: ["--ignore-eos"] }).slice(-7), [
            "--request-rate",
            "2",
            "--max-concurrency",
            "8",
            "--seed",
            "0",
            "--ignore-eos",
        ]);
        assert.throws(() => benchServeArgv({ ...spec, requestRate: "fast" }), /requestRate must be a positive number or inf/);
        assert.throws(() => benchServeArgv({ ...spec, numPrompts: 0 }), /numPrompts must be a positive integer/);
        assert.throws(() => benchServeArgv({ ...spec, endpoint: "v1" }), /endpoint must be a path/);
    });

    test("remote scripts: key read on the node, passed by name; snapshots and bash -n", () => {
        const docker = benchServeScript(spec);
        const venv = benchServeScript({ ...spec, runtime: venvRuntime });
        matchSnapshot("check.bench-serve.docker.sh", docker);
        matchSnapshot("check.bench-serve.venv.sh", venv);
        assert.match(benchServeCommand(spec), /^docker exec -e OPENAI_API_KEY spark-cluster-vllm vllm bench serve /);
        assert.match(benchServeCommand({ ...spec, runtime: venvRuntime }), /^\/opt\/vllm-venv\/bin\/vllm bench serve /);
        // The docker file is verbatim, the venv file systemd-quoted: the reader differs.
        assert.ok(!docker.includes("value[1:-1]"));
        assert.ok(venv.includes("value[1:-1]"));
        for (const script of [docker, venv]) {
            assert.ok(script.includes(VLLM_SECRETS_PATH));
            const { status, stderr } = bashN(script);
            assert.equal(status, 0, stderr);
            assert.equal(stderr, "");
        }
    });

    test("the head, its runtime and the model come from the cluster output", () => {
        const target = benchTargetFromCluster(cluster, { numPrompts: 20, maxConcurrency: undefined });
        assert.equal(target.node, "spark-a");
        assert.deepEqual(target.ssh, { user: "ubuntu", host: "10.77.0.11", port: 2222 });
        assert.deepEqual(target.spec.runtime, { kind: "venv", path: "/opt/vllm-venv" });
        assert.equal(target.spec.port, 8001);
        assert.equal(target.spec.model, "lab/tiny-chat");
        assert.equal(target.spec.servedName, "tiny-chat");
        assert.equal(target.spec.numPrompts, 20);
        assert.equal(target.spec.randomInputLen, 1024);
        const withHead = (change: object) => ({ ...cluster, nodes: cluster.nodes.map((n) => (n.head ? { ...n, ...change } : n)) });
        assert.throws(() => benchTargetFromCluster(withHead({ runtime: { kind: "podman", image: "x" } })), /runtime of spark-a is not a runtime/);
        assert.throws(() => benchTargetFromCluster(withHead({ ssh: "root@10.0.0.1:22" })), /ssh of spark-a is not \{ user, host, port \}/);
        assert.throws(() => benchTargetFromCluster({ ...cluster, head: "nope", nodes: cluster.nodes.map((n) => ({ ...n, head: false })) }), /no such node/);
    });

    test("scripts pass bash -n; bench-serve.sh --dry-run renders the head's script from a cluster output", { timeout: 120_000 }, async () => {
        for (const file of ["bench-serve.sh", "torch-python.sh"]) {
            const { status, stderr } = bashN(fs.readFileSync(path.join(ROOT, "scripts", file), "utf8"));
            assert.equal(status, 0, `${file}: ${stderr}`);
        }
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-bench-"));
        try {
            const json = path.join(tmp, "cluster.json");
            fs.writeFileSync(json, JSON.stringify(cluster));
            const r = await run(
                path.join(ROOT, "scripts", "bench-serve.sh"),
                ["--cluster-json", json, "--dry-run", "--num-prompts", "7", "--", "--ignore-eos"],
                {
                    timeoutMs: 110_000,
                },
            );
            assert.equal(r.code, 0, r.stderr);
            assert.match(r.stdout, /^== head spark-a: ssh -p 2222 ubuntu@10\.77\.0\.11, remote script:$/m);
            assert.match(r.stdout, /^\/opt\/vllm-venv\/bin\/vllm bench serve .* --port 8001 .* --num-prompts 7 .* --ignore-eos <\/dev\/null/m);
            const bad = await run(path.join(ROOT, "scripts", "bench-serve.sh"), ["--cluster-json", json, "--dry-run", "--request-rate", "fast"], {
                timeoutMs: 110_000,
            });
            assert.equal(bad.code, 2);
            assert.match(bad.stderr, /requestRate must be a positive number or inf/);
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
    });
});

// ---------------------------------------------------------------------------------------------
describe("vllm bench serve stand-in against a loopback server", () => {
    const KEY = `k"e$y\`\\1 with spaces`;
    let server: http.Server;
    let port = 0;
    const seen = {
        requests: 0,
        inFlight: 0,
        maxInFlight: 0,
        models: new Set<string>(),
        ids: new Set<string>(),
        promptWords: new Set<number>(),
        unauthorized: 0,
    };
    let tmp = "";

    before(async () => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-standin-bench-"));
        server = http.createServer((req, res) => {
            if (req.headers.authorization !== `Bearer ${KEY}`) {
                seen.unauthorized++;
                res.writeHead(401, { "Content-Type": "application/json" }).end('{"error": "Unauthorized"}');
                return;
            }
            if (req.method === "GET" && req.url === "/v1/models") {
                res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ data: [{ id: "tiny-chat", root: "lab/tiny-chat" }] }));
                return;
            }
            let body = "";
            req.on("data", (d: Buffer) => (body += d.toString()));
            req.on("end", () => {
                const payload = JSON.parse(body);
                seen.requests++;
                seen.inFlight++;
                seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
                seen.models.add(payload.model);
                seen.ids.add(String(req.headers["x-request-id"]));
                seen.promptWords.add(String(payload.prompt).split(" ").length);
                res.writeHead(200, { "Content-Type": "text/event-stream", Connection: "close" });
                const tokens: number = payload.max_tokens;
                let sent = 0;
                const tick = () => {
                    if (sent < tokens) {
                        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, text: " tok" }] })}\n\n`);
                        sent++;
                        setTimeout(tick, 1);
                        return;
                    }
                    res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 16, completion_tokens: tokens } })}\n\n`);
                    res.end("data: [DONE]\n\n");
                    seen.inFlight--;
                };
                setTimeout(tick, 5);
            });
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        port = (server.address() as net.AddressInfo).port;
    });
    after(async () => {
        await new Promise<void>((resolve) => server.close(() => resolve()));
        if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    const benchSpec = (runtime: Runtime): BenchServeSpec => ({
        ...BENCH_DEFAULTS,
        runtime,
        port,
        model: "lab/tiny-chat",
        servedName: "tiny-chat",
        randomInputLen: 16,
        randomOutputLen: 8,
        numPrompts: 12,
        maxConcurrency: 3,
        seed: 7,
    });

    const ROWS = [
        /^=+ Serving Benchmark Result \(LAB STAND-IN\) =+$/m,
        /^Successful requests: +12 *$/m,
        /^Failed requests: +0 *$/m,
        /^Maximum request concurrency: +3 *$/m,
        /^Benchmark duration \(s\): +[0-9.]+ *$/m,
        /^Total input tokens: +192 *$/m,
        /^Total generated tokens: +96 *$/m,
        /^Request throughput \(req\/s\): +[0-9.]+ *$/m,
        /^Output token throughput \(tok\/s\): +[0-9.]+ *$/m,
        /^Total token throughput \(tok\/s\): +[0-9.]+ *$/m,
        /^Mean TTFT \(ms\): +[0-9.]+ *$/m,
        /^Median TTFT \(ms\): +[0-9.]+ *$/m,
        /^P99 TTFT \(ms\): +[0-9.]+ *$/m,
        /^Mean TPOT \(ms\): +[0-9.]+ *$/m,
        /^Median TPOT \(ms\): +[0-9.]+ *$/m,
        /^P99 TPOT \(ms\): +[0-9.]+ *$/m,
        /^Mean ITL \(ms\): +[0-9.]+ *$/m,
        /^Median ITL \(ms\): +[0-9.]+ *$/m,
        /^P99 ITL \(ms\): +[0-9.]+ *$/m,
        /^LAB STAND-IN: no tokenizer/m,
    ];

    test("`vllm bench serve` with the rendered flags: real requests, concurrency bound, vLLM's table", { timeout: 120_000 }, async () => {
        Object.assign(seen, { requests: 0, maxInFlight: 0, unauthorized: 0 });
        seen.models.clear();
        seen.ids.clear();
        seen.promptWords.clear();
        const args = benchServeArgv(benchSpec(venvRuntime)).slice(1); // without "vllm"
        const r = await run("python3", ["-c", STANDIN_VLLM, ...args], { env: { ...process.env, OPENAI_API_KEY: KEY }, timeoutMs: 110_000 });
        assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
        for (const row of ROWS) assert.match(r.stdout, row);
        assert.match(r.stdout, /^Traffic request rate: inf$/m);
        assert.equal(seen.requests, 12);
        assert.ok(seen.maxInFlight <= 3, `max in flight ${seen.maxInFlight}`);
        assert.deepEqual([...seen.models], ["tiny-chat"]);
        assert.equal(seen.ids.size, 12);
        assert.deepEqual([...seen.promptWords], [16]);
        assert.equal(seen.unauthorized, 0);
        assert.ok(!r.stdout.includes(KEY) && !r.stderr.includes(KEY), "the key was printed");
    });

    test("a wrong key: every request fails and is counted (exit 0, like vLLM)", { timeout: 120_000 }, async () => {
        const args = benchServeArgv({ ...benchSpec(venvRuntime), requestRate: "50" }).slice(1);
        const r = await run("python3", ["-c", STANDIN_VLLM, ...args], { env: { ...process.env, OPENAI_API_KEY: "wrong" }, timeoutMs: 110_000 });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^Successful requests: +0 *$/m);
        assert.match(r.stdout, /^Failed requests: +12 *$/m);
        assert.match(r.stdout, /^Request rate configured \(RPS\): +50\.00 *$/m);
        assert.match(r.stdout, /^Error 0: 401 Unauthorized$/m);
    });

    test("unknown flags and abbreviations are refused like argparse (exit 2)", { timeout: 60_000 }, async () => {
        const r = await run("python3", ["-c", STANDIN_VLLM, "bench", "serve", "--num-prompt", "3"], { timeoutMs: 50_000 });
        assert.equal(r.code, 2);
        assert.match(r.stderr, /unrecognized arguments: --num-prompt/);
    });

    /** The rendered remote script, run here: the secrets file redirected to a temp file, systemctl/docker stubbed. */
    async function remote(runtime: Runtime, fileKey: string): Promise<Ran> {
        const dir = fs.mkdtempSync(path.join(tmp, "node-"));
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        const secrets = path.join(dir, "vllm.env");
        const reader = runtime.kind === "docker" ? "docker" : "systemd";
        fs.writeFileSync(secrets, renderVllmSecrets(reader, fileKey), { mode: 0o600 });
        fs.writeFileSync(path.join(bin, "systemctl"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
        const standin = `exec python3 -c ${JSON.stringify(STANDIN_VLLM).replace(/\$/g, "\\$")} "$@"`;
        // docker stub: the key must come by name (-e OPENAI_API_KEY) from the environment, never in argv.
        fs.writeFileSync(
            path.join(bin, "docker"),
            [
                "#!/bin/bash",
                'for a in "$@"; do [ "$a" = "$OPENAI_API_KEY" ] && { echo "docker stub: the key is in argv" >&2; exit 99; }; done',
                '[ "$1 $2 $3 $4 $5" = "exec -e OPENAI_API_KEY spark-cluster-vllm vllm" ] || { echo "docker stub: unexpected $*" >&2; exit 98; }',
                "shift 5",
                standin,
                "",
            ].join("\n"),
            { mode: 0o755 },
        );
        let spec = benchSpec(runtime);
        if (runtime.kind === "venv") {
            const venv = path.join(dir, "venv");
            fs.mkdirSync(path.join(venv, "bin"), { recursive: true });
            fs.writeFileSync(path.join(venv, "bin", "vllm"), `#!/bin/bash\n${standin}\n`, { mode: 0o755 });
            spec = { ...spec, runtime: { kind: "venv", path: venv } };
        }
        const script = benchServeScript(spec).split(VLLM_SECRETS_PATH).join(secrets);
        const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env["PATH"]}` };
        delete env["OPENAI_API_KEY"];
        return run("bash", ["-c", script], { env, timeoutMs: 110_000 });
    }

    for (const kind of ["docker", "venv"] as const) {
        test(`the rendered remote script (${kind}): key from the node's env file, the benchmark, its verdict`, { timeout: 240_000 }, async () => {
            const runtime = kind === "docker" ? dockerRuntime : venvRuntime;
            const good = await remote(runtime, KEY);
            assert.equal(good.code, 0, `${good.stdout}\n${good.stderr}`);
            for (const row of ROWS) assert.match(good.stdout, row);
            assert.match(good.stdout, /^bench: vllm bench serve --backend openai --host 127\.0\.0\.1 /m);
            assert.ok(!good.stdout.includes(KEY) && !good.stderr.includes(KEY), "the key was printed");
            // A key the server refuses: vLLM's tool exits 0, the script does not.
            const refused = await remote(runtime, "not-the-key");
            assert.equal(refused.code, 1, `${refused.stdout}\n${refused.stderr}`);
            assert.match(refused.stderr, /bench: 0 successful and 12 failed requests: not a valid measurement/);
        });
    }
});

test("no leftover check.* snapshots", () => {
    assert.deepEqual(unusedSnapshots("check."), []);
});
