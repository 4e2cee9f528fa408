// The vLLM probe and the cluster's vLLM check: what each node's vLLM version accepts (by the
// shipped flag tables), and whether the nodes agree, decided before anything changes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { vllmServeArgv } from "../../components/render/vllm";
import { vllmProbe } from "../../components/render/probe";
import { FlagTables, NodeVllm, SHIPPED_FLAG_TABLES, flagAnswer, renderedFlags, vllmCheckScript, vllmVerdict } from "../../components/render/vllmCompat";
import { DOCKER_DEFAULT, VENV, VLLM_MP_BASE, runProbeInFakeVenv } from "../support/fixtures";

/** Two made-up tables: --old goes away after 1.0, --new arrives in 2.0. */
const FAKE: FlagTables = {
    versions: ["1.0", "2.0"],
    accepts: (version, flag) => (version === "1.0" ? ["--a", "--old"] : ["--a", "--new"]).includes(flag),
    compare: (a, b) => Number(a) - Number(b),
    publicVersion: (v) => (/^\d+(\.\d+)?/.exec(v) ?? [undefined])[0],
};

const mpArgv = (rank: number, nnodes = 2) => vllmServeArgv({ ...VLLM_MP_BASE, multiNode: { nnodes, rank, masterAddr: "192.168.100.11", masterPort: 29501 } });

const node = (name: string, version: string, extra: Partial<NodeVllm> = {}): NodeVllm => ({
    node: name,
    runtime: DOCKER_DEFAULT,
    probe: { version, imageId: "sha256:aaaa" },
    argv: mpArgv(name === "spark-a" ? 0 : 1),
    ...extra,
});

describe("flag answers between and beyond the tables", () => {
    const table: [string, string, string][] = [
        ["1.0", "--old", "accepted"],
        ["2.0", "--old", "refused"],
        ["1.5", "--a", "accepted"], // both neighbours accept
        ["1.5", "--zzz", "refused"], // both refuse
        ["1.5", "--old", "unknown"], // removed somewhere between
        ["1.5", "--new", "unknown"], // added somewhere between
        ["3.0", "--old", "refused"], // newer than all: the newest table answers
        ["3.0", "--new", "accepted"],
        ["0.5", "--new", "refused"], // older than all: came later
        ["0.5", "--a", "unknown"],
        ["not-a-version", "--a", "unknown"],
    ];
    for (const [version, flag, want] of table) {
        it(`${flag} on ${version}: ${want}`, () => assert.equal(flagAnswer(FAKE, version, flag), want));
    }
    it("the shipped tables: 0.10.1.1 has no --nnodes, 0.31.0 has it, the local part is ignored", () => {
        assert.equal(flagAnswer(SHIPPED_FLAG_TABLES, "0.10.1.1", "--nnodes"), "refused");
        assert.equal(flagAnswer(SHIPPED_FLAG_TABLES, "0.31.0+lab.standin", "--nnodes"), "accepted");
        assert.equal(flagAnswer(SHIPPED_FLAG_TABLES, "0.10.1.1", "--served-model-name"), "accepted");
    });
});

describe("the flags of a rendered argv", () => {
    it("are the options once each, values and the model left out", () => {
        assert.deepEqual(renderedFlags(["vllm", "serve", "/m", "--port", "8000", "--x=1", "-tp", "2", "--port", "1", "-", "--"]), ["--port", "--x", "-tp"]);
    });
});

describe("the vLLM check", () => {
    it("passes a pair on one version and one image, and lists what each node runs", () => {
        const v = vllmVerdict([node("spark-a", "0.31.0"), node("spark-b", "0.31.0")], SHIPPED_FLAG_TABLES);
        assert.deepEqual(v.problems, []);
        assert.deepEqual(v.warnings, []);
        assert.equal(new Map(v.versions).get("spark-a"), "vLLM 0.31.0 (the image nvcr.io/nvidia/vllm:26.10-py3, sha256:aaaa)");
    });

    it("refuses the mp executor across nodes on a vLLM without multi-node mp, naming model.executor, the image, the version and the fix", () => {
        const v = vllmVerdict([node("spark-a", "0.10.1.1"), node("spark-b", "0.10.1.1")], SHIPPED_FLAG_TABLES);
        assert.equal(v.problems.length, 2);
        assert.match(
            v.problems[0],
            /^spark-cluster:model\.executor is mp across 2 nodes, but the image nvcr\.io\/nvidia\/vllm:26\.10-py3 on spark-a has vLLM 0\.10\.1\.1, whose vllm serve has no multi-node mp \(--nnodes, --node-rank, --master-addr, --master-port\b.*Fix: /,
        );
        // --headless is older than multi-node mp (data parallel engines): 0.10.1.1 has it.
        assert.match(
            v.problems[1],
            /on spark-b has vLLM 0\.10\.1\.1, whose vllm serve has no multi-node mp \(--nnodes, --node-rank, --master-addr, --master-port; /,
        );
    });

    it("refuses a rendered flag the version does not have, naming the config key it comes from", () => {
        const argv = [...vllmServeArgv({ ...VLLM_MP_BASE }), "--no-such-flag-anywhere"];
        const v = vllmVerdict([node("spark-a", "0.31.0", { argv })], SHIPPED_FLAG_TABLES);
        assert.deepEqual(v.problems, [
            "vLLM 0.31.0 in the image nvcr.io/nvidia/vllm:26.10-py3 on spark-a does not accept --no-such-flag-anywhere (model.extraArgs). " +
                "Fix: leave that setting out, or give spark-a a runtime with a vLLM that has it.",
        ]);
    });

    it("model.kvCacheMemoryBytes (--kv-cache-memory-bytes) is refused on vLLM 0.10.1.1, naming the key, and accepted from 0.10.2 on", () => {
        const argv = vllmServeArgv({ ...VLLM_MP_BASE, kvCacheMemoryBytes: 8 * 2 ** 30 });
        const old = vllmVerdict([node("spark-a", "0.10.1.1", { argv })], SHIPPED_FLAG_TABLES);
        assert.equal(old.problems.length, 1);
        assert.match(old.problems[0], /^vLLM 0\.10\.1\.1 in .* on spark-a does not accept --kv-cache-memory-bytes \(model\.kvCacheMemoryBytes\)\. Fix: /);
        for (const version of ["0.10.2", "0.11.1", "0.17.1", "0.20.1", "0.31.0", "0.32.0", "0.33.0"]) {
            assert.equal(flagAnswer(SHIPPED_FLAG_TABLES, version, "--kv-cache-memory-bytes"), "accepted", version);
        }
    });

    it("refuses nodes whose vLLM versions differ, venv or docker", () => {
        const v = vllmVerdict([node("spark-a", "0.31.0"), node("thor-a", "0.33.0", { runtime: VENV, probe: { version: "0.33.0" } })], SHIPPED_FLAG_TABLES);
        assert.deepEqual(v.problems, [
            "the nodes' vLLM versions differ: 0.31.0 on spark-a (the image nvcr.io/nvidia/vllm:26.10-py3); 0.33.0 on thor-a (the venv /opt/vllm-venv). " +
                "Every rank of one model must run the same vLLM. Fix: give every node the same vLLM version.",
        ]);
        const venvs = vllmVerdict(
            [
                node("thor-a", "0.31.0", { runtime: VENV, probe: { version: "0.31.0" } }),
                node("thor-b", "0.32.0", { runtime: VENV, probe: { version: "0.32.0" } }),
            ],
            SHIPPED_FLAG_TABLES,
        );
        assert.equal(venvs.problems.length, 1);
        assert.match(venvs.problems[0], /^the nodes' vLLM versions differ: 0\.31\.0 on thor-a \(the venv \/opt\/vllm-venv\); 0\.32\.0 on thor-b/);
    });

    it("refuses docker nodes whose one tag names different images, naming both IDs", () => {
        const v = vllmVerdict(
            [node("spark-a", "0.31.0"), node("spark-b", "0.31.0", { probe: { version: "0.31.0", imageId: "sha256:bbbb" } })],
            SHIPPED_FLAG_TABLES,
        );
        assert.equal(v.problems.length, 1);
        assert.match(
            v.problems[0],
            /^the tag nvcr\.io\/nvidia\/vllm:26\.10-py3 names different images on the nodes: sha256:aaaa on spark-a; sha256:bbbb on spark-b\. Fix: docker pull/,
        );
    });

    it("warns, without refusing, about flags of a version no table brackets", () => {
        const v = vllmVerdict([node("spark-a", "0.9.0", { argv: vllmServeArgv({ ...VLLM_MP_BASE }) })], SHIPPED_FLAG_TABLES);
        assert.deepEqual(v.problems, []);
        assert.equal(v.warnings.length, 1);
        assert.match(v.warnings[0], /^vLLM 0\.9\.0 in the image \S+ on spark-a: no flag table for this version; not checked: --/);
    });

    it("its script prints each node's vLLM, and fails with every problem when there is one", () => {
        const good = spawnSync("bash", ["-c", vllmCheckScript(vllmVerdict([node("spark-a", "0.31.0")], SHIPPED_FLAG_TABLES))], { encoding: "utf8" });
        assert.equal(good.status, 0, good.stderr);
        assert.equal(good.stdout, "spark-a: vLLM 0.31.0 (the image nvcr.io/nvidia/vllm:26.10-py3, sha256:aaaa)\n");
        const bad = spawnSync("bash", ["-c", vllmCheckScript(vllmVerdict([node("spark-a", "0.10.1.1"), node("spark-b", "0.31.0")], SHIPPED_FLAG_TABLES))], {
            encoding: "utf8",
        });
        assert.equal(bad.status, 1);
        const lines = bad.stderr.trim().split("\n");
        assert.equal(lines[0], "spark-cluster: nothing was changed on any node; the nodes' vLLM cannot run this stack:");
        assert.match(lines[1], /^- spark-cluster:model\.executor is mp across 2 nodes, but the image \S+ on spark-a has vLLM 0\.10\.1\.1/);
        assert.match(lines[2], /^- the nodes' vLLM versions differ: 0\.10\.1\.1 on spark-a .*; 0\.31\.0 on spark-b/);
        assert.equal(lines.length, 3);
    });
});

describe("the vLLM probe", () => {
    /** Runs the probe against a fake venv whose python prints `version` (or fails when undefined). */
    function probeWith(version: string | undefined) {
        const python = version === undefined ? "#!/bin/sh\necho 'No module named vllm' >&2\nexit 1\n" : `#!/bin/sh\necho ${version}\n`;
        return runProbeInFakeVenv(python, (runtime) => vllmProbe.script({ node: "thor-1", runtime }));
    }

    it("reports the venv's vLLM version (no image ID for a venv)", () => {
        const r = probeWith("0.31.0");
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(vllmProbe.parse(r.stdout), { version: "0.31.0" });
    });

    it("fails, naming the runtime and the node, when there is no vLLM", () => {
        const r = probeWith(undefined);
        assert.equal(r.status, 1);
        assert.match(r.stderr, /^the venv \S+ on thor-1 has no vLLM .*Fix: give this node a runtime with vLLM/m);
        assert.deepEqual(vllmProbe.parse(r.stdout), { version: "none" });
    });

    it("asks a docker runtime through a throwaway container without network, then the image's ID, the image after --", () => {
        const script = vllmProbe.script({ node: "spark-a", runtime: DOCKER_DEFAULT });
        assert.match(script, /docker run --rm --network none --entrypoint python3 -- nvcr\.io\/nvidia\/vllm:\S+ -c /);
        assert.match(script, /echo "image-id=\$\(docker image inspect --format '\{\{\.Id\}\}' -- nvcr\.io\/nvidia\/vllm:\S+\)"/);
        assert.equal(spawnSync("bash", ["-n", "-c", script]).status, 0);
    });
});
