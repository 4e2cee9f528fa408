/**
 * SGLang (model.engine sglang, issue 21): the generated flag table (config/sglangFlags/0.5.23.json,
 * lab/sglang_standin/gen_flags.sh) spot-checked against SGLang 0.5.23's source, the argv the plan
 * renders for each rank checked flag by flag against that table and parsed by the table's own
 * argparse parser (the lab stand-in's, lab/sglang_standin/sglang_standin/flags.py), the secrets
 * file, and the config refusals.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { ConfigError, parseConfig } from "../../config";
import { SGLANG_FLAG_TABLE, SGLANG_VERSION, findSglangFlag } from "../../config/sglangFlags";
import { type SglangServeSpec, renderSglangSecrets, renderSglangUnit, sglangPlan, sglangServeArgv } from "../../components/render/sglang";
import { DOCKER_DEFAULT, VENV, sparkPair } from "../support/fixtures";
import { REPO_ROOT } from "../support/repoRoot";

const KEY = "sglang-unit-test-key-0123456789";

const BASE: SglangServeSpec = {
    source: "Qwen/Qwen2.5-7B-Instruct",
    servedName: "qwen",
    tensorParallel: 2,
    pipelineParallel: 1,
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.85,
    maxModelLen: 32768,
    maxNumSeqs: 64,
    quantization: "fp8",
    kvCacheDtype: "fp8_e4m3",
    enforceEager: true,
    attentionBackend: "triton",
    trustRemoteCode: true,
    extraArgs: ["--chunked-prefill-size=4096"],
    env: {},
    readyTimeoutSeconds: 600,
};
const rank = (r: number): SglangServeSpec => ({ ...BASE, multiNode: { nnodes: 2, rank: r, masterAddr: "192.168.100.11", masterPort: 29501 } });

/** Every `--flag` of an argv with the value that follows it (undefined for a flag without one), by the table. */
function flagsOf(argv: readonly string[]): { flag: string; value?: string }[] {
    const out: { flag: string; value?: string }[] = [];
    for (let i = 3; i < argv.length; i++) {
        const [flag, inline] = argv[i].split(/=(.*)/s);
        const arg = findSglangFlag(flag);
        assert.ok(arg, `${flag} is a flag of SGLang ${SGLANG_VERSION}`);
        assert.ok(arg.options.includes(flag), `${flag} is spelled out, not abbreviated`);
        if (arg.takes_value && inline === undefined) out.push({ flag, value: argv[++i] });
        else out.push({ flag, value: inline });
    }
    return out;
}

describe("SGLang's flag table (generated from sglang 0.5.23 on PyPI)", () => {
    it("names its wheel, SGLang's prog, and the source line of each flag we render", () => {
        assert.equal(SGLANG_FLAG_TABLE.version, "0.5.23");
        assert.match(SGLANG_FLAG_TABLE.wheel, /^sglang-0\.5\.23-/);
        assert.match(SGLANG_FLAG_TABLE.sha256, /^[0-9a-f]{64}$/);
        assert.equal(SGLANG_FLAG_TABLE.prog, "sglang serve");
        const at = (flag: string) => findSglangFlag(flag)?.source;
        assert.equal(at("--model-path"), "sglang/srt/arg_groups/fields/model.py:51");
        assert.equal(at("--tp-size"), "sglang/srt/arg_groups/fields/parallel.py:45");
        assert.equal(at("--pp-size"), "sglang/srt/arg_groups/fields/parallel.py:59");
        assert.equal(at("--nnodes"), "sglang/srt/arg_groups/fields/parallel.py:43");
        assert.equal(at("--node-rank"), "sglang/srt/arg_groups/fields/parallel.py:44");
        assert.equal(at("--dist-init-addr"), "sglang/srt/arg_groups/fields/parallel.py:32");
        assert.equal(at("--host"), "sglang/srt/arg_groups/fields/serving.py:65");
        assert.equal(at("--port"), "sglang/srt/arg_groups/fields/serving.py:66");
        assert.equal(at("--api-key"), "sglang/srt/arg_groups/fields/serving.py:160");
        assert.equal(at("--served-model-name"), "sglang/srt/arg_groups/fields/serving.py:168");
        assert.equal(at("--mem-fraction-static"), "sglang/srt/arg_groups/fields/schedule.py:27");
        assert.equal(at("--config"), "sglang/srt/server_args.py:401");
    });

    it("has SGLang's defaults: --host 127.0.0.1, --port 30000, --model-path required (alias --model), --tp-size 1", () => {
        assert.equal(findSglangFlag("--host")?.default, "127.0.0.1");
        assert.equal(findSglangFlag("--port")?.default, 30000);
        assert.equal(findSglangFlag("--model-path")?.required, true);
        assert.deepEqual(findSglangFlag("--model-path")?.options, ["--model-path", "--model"]);
        assert.deepEqual(findSglangFlag("--tp-size")?.options, ["--tp-size", "--tensor-parallel-size"]);
        assert.deepEqual(findSglangFlag("--dist-init-addr")?.options, ["--dist-init-addr", "--nccl-init-addr"]);
    });

    it("has no --tp of its own: the guides' --tp is argparse's abbreviation of --tp-size, the only flag it prefixes", () => {
        assert.equal(
            SGLANG_FLAG_TABLE.args.some((a) => a.options.includes("--tp")),
            false,
        );
        assert.equal(findSglangFlag("--tp")?.dest, "tp_size");
        assert.equal(findSglangFlag("--no-such-flag"), undefined);
        assert.equal(findSglangFlag("--dist"), undefined, "ambiguous: --dist-init-addr, --dist-timeout");
    });
});

describe("the SGLang argv per rank", () => {
    it("rank 0: every flag is one of the table's, spelled out, with a value of its type and choices", () => {
        for (const { flag, value } of flagsOf(sglangServeArgv(rank(0)))) {
            const arg = findSglangFlag(flag);
            if (!arg?.takes_value) continue;
            assert.ok(value !== undefined, `${flag} has a value`);
            if (arg.type === "int") assert.match(value, /^-?\d+$/, flag);
            if (arg.type === "float") assert.ok(Number.isFinite(Number(value)), flag);
            if (arg.choices) assert.ok(arg.choices.includes(value), `${flag} ${value} in ${arg.choices.join(",")}`);
        }
    });

    it("rank 0 serves the API on model.apiHost/apiPort with the --config file; rank 1 joins the head's dist-init port and binds its health server to loopback", () => {
        const r0 = sglangServeArgv(rank(0));
        const r1 = sglangServeArgv(rank(1));
        assert.deepEqual(r0.slice(0, 3), ["python3", "-m", "sglang.launch_server"]);
        const value = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];
        for (const argv of [r0, r1]) {
            assert.equal(value(argv, "--dist-init-addr"), "192.168.100.11:29501");
            assert.equal(value(argv, "--nnodes"), "2");
            assert.equal(value(argv, "--tp-size"), "2");
        }
        assert.equal(value(r0, "--node-rank"), "0");
        assert.equal(value(r1, "--node-rank"), "1");
        assert.equal(value(r0, "--host"), "0.0.0.0");
        assert.equal(value(r1, "--host"), "127.0.0.1");
        assert.equal(value(r0, "--config"), "/etc/spark-cluster/sglang.yaml");
        assert.equal(r1.includes("--config"), false);
        for (const argv of [r0, r1]) assert.equal(argv.includes("--api-key"), false, "the key is never in argv");
        assert.deepEqual(r0.slice(-1), ["--chunked-prefill-size=4096"], "model.extraArgs last");
    });

    it("parses with the table's argparse parser (the stand-in's), to the values we meant", () => {
        const code = [
            "import json, sys",
            "sys.path.insert(0, sys.argv[1])",
            "from sglang_standin.flags import build_parser, load_table",
            "p = build_parser(load_table(sys.argv[2]))",
            "out = []",
            "for argv in json.loads(sys.stdin.read()):",
            "    a = p.parse_args(argv)",
            "    out.append([a.model_path, a.tp_size, a.nnodes, a.node_rank, a.dist_init_addr, a.host, a.port, a.mem_fraction_static, a.config, a.api_key])",
            "print(json.dumps(out))",
        ].join("\n");
        const argvs = [0, 1].map((r) => sglangServeArgv(rank(r)).slice(3));
        const run = spawnSync("python3", ["-c", code, path.join(REPO_ROOT, "lab", "sglang_standin"), SGLANG_VERSION], {
            input: JSON.stringify(argvs),
            encoding: "utf8",
            timeout: 30_000,
        });
        assert.equal(run.status, 0, run.stderr);
        assert.deepEqual(JSON.parse(run.stdout), [
            ["Qwen/Qwen2.5-7B-Instruct", 2, 2, 0, "192.168.100.11:29501", "0.0.0.0", 8000, 0.85, "/etc/spark-cluster/sglang.yaml", null],
            ["Qwen/Qwen2.5-7B-Instruct", 2, 2, 1, "192.168.100.11:29501", "127.0.0.1", 8000, 0.85, null, null],
        ]);
    });

    it("the unit runs the venv's python3, offline, and has no key; the docker unit mounts the --config file read-only", () => {
        const venvUnit = renderSglangUnit(rank(0), VENV, "envhash");
        assert.match(venvUnit, /ExecStart=\/opt\/vllm-venv\/bin\/python3 -m sglang\.launch_server /);
        assert.match(venvUnit, /HF_HUB_OFFLINE=1/);
        assert.doesNotMatch(venvUnit, /api-key|API_KEY/);
        const docker = { ...DOCKER_DEFAULT, image: "lmsysorg/sglang:v0.5.23" };
        assert.match(renderSglangUnit(rank(0), docker, "envhash"), /-v \/etc\/spark-cluster\/sglang\.yaml:\/etc\/spark-cluster\/sglang\.yaml:ro /);
        // As the component renders it: the image by the ID the node's probe found, not the tag.
        const id = `sha256:${"7d".repeat(32)}`;
        const pinned = sglangPlan(rank(1), docker).unit("envhash", [], id);
        assert.match(pinned, new RegExp(`^ExecStart=/usr/bin/docker run .* -- ${id} python3 -m sglang\\.launch_server `, "m"));
        assert.doesNotMatch(pinned, /lmsysorg/);
    });

    it("the secrets file is YAML SGLang's --config reads, the key one double-quoted scalar the readiness probe reads as JSON", () => {
        const key = 'k3y with "quotes" and \\ backslash # and: colon';
        const file = renderSglangSecrets(key);
        assert.match(file, /^# Managed by spark-cluster/);
        const line = file.split("\n").find((l) => l.startsWith("api-key: "));
        assert.ok(line);
        assert.equal(JSON.parse(line.slice("api-key: ".length)), key);
        const plan = sglangPlan(rank(0), VENV);
        assert.equal(plan.secretsFile(KEY), renderSglangSecrets(KEY));
        assert.match(plan.ready ?? "", /sglang\.yaml/);
        assert.equal(sglangPlan(rank(1), VENV).ready, undefined, "only rank 0 is probed");
        assert.ok(sglangPlan(rank(1), VENV).follow, "a rank 1+ has a follower");
    });
});

describe("config refusals for model.engine sglang", () => {
    const venvPair = () => sparkPair().map((n) => ({ ...n, runtime: { kind: "venv", path: "/opt/sglang-venv" } }));
    const values = (model: Record<string, unknown>, nodes: Record<string, unknown>[] = venvPair()) => ({
        nodes,
        model: { source: "Qwen/Qwen2.5-7B-Instruct", engine: "sglang", ...model },
        sshPrivateKeyPath: "/home/u/.ssh/id_ed25519",
        apiKey: KEY,
        check: { enabled: false },
    });
    const problems = (v: Record<string, unknown>): string => {
        try {
            parseConfig({ values: v, secretKeys: new Set(["apiKey"]) });
            return "";
        } catch (err) {
            assert.ok(err instanceof ConfigError, String(err));
            return err.message;
        }
    };

    it("accepts SGLang on venv nodes with the mp executor (the default)", () => {
        const config = parseConfig({ values: values({}), secretKeys: new Set(["apiKey"]) });
        assert.deepEqual(config.engine, { kind: "sglang", version: "0.5.23" });
    });

    it("the default engine is vLLM", () => {
        const v = values({});
        delete (v.model as Record<string, unknown>).engine;
        assert.deepEqual(parseConfig({ values: v, secretKeys: new Set(["apiKey"]) }).engine, { kind: "vllm" });
    });

    for (const [what, model, nodes, pattern] of [
        ["the ray executor", { executor: "ray" }, undefined, /model\.executor.*must be mp with model\.engine sglang/],
        ["kvCacheMemoryBytes (vLLM's)", { kvCacheMemoryBytes: 2 ** 34 }, undefined, /model\.kvCacheMemoryBytes.*vLLM's \(--kv-cache-memory-bytes\)/],
        [
            "a vLLM attention backend name",
            { attentionBackend: "TRITON_ATTN" },
            undefined,
            /model\.attentionBackend.*SGLang 0\.5\.23 accepts for --attention-backend/,
        ],
        ["a vLLM kv-cache dtype name", { kvCacheDtype: "fp8" }, undefined, /model\.kvCacheDtype.*--kv-cache-dtype/],
        [
            "an extra flag SGLang does not have",
            { extraArgs: ["--max-num-batched-tokens=8192"] },
            undefined,
            /model\.extraArgs\[0\].*not a flag of SGLang 0\.5\.23/,
        ],
        ["an extra flag the plan renders", { extraArgs: ["--mem-fraction-static=0.5"] }, undefined, /model\.extraArgs\[0\].*use model\.gpuMemoryUtilization/],
        ["--api-key in extraArgs (abbreviated too)", { extraArgs: ["--api-k=secret-in-argv"] }, undefined, /model\.extraArgs\[0\].*--api-key/],
        ["a node without a runtime", {}, sparkPair(), /nodes\[0\]\.runtime.*default runtime is the NGC vLLM image/],
        [
            "a Thor",
            { tensorParallel: 1, pipelineParallel: 2 },
            [
                { ...venvPair()[0], interconnect: [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }] },
                {
                    name: "thor-1",
                    kind: "thor",
                    ssh: { host: "10.0.0.27" },
                    runtime: { kind: "venv", path: "/opt/v" },
                    interconnect: [{ name: "mgbe0_0", address: "192.168.100.27/24" }],
                },
            ],
            /nodes\[1\]\.kind.*cannot run SGLang here/,
        ],
    ] as const) {
        it(`refuses ${what}, naming the key`, () => {
            assert.match(problems(values(model, nodes as Record<string, unknown>[] | undefined)), pattern);
        });
    }
});
