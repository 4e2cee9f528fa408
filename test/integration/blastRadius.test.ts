// Blast radius, on the lab's Spark pair with the real Pulumi CLI: for each everyday change to the
// dev stack, `preview` names exactly the resources the change must touch, the diff shows the
// changed lines of what we render (not a blob), and applying it restarts Ray and vLLM only where
// the change requires (their main PIDs compared before and after). The changes apply one after
// the other; each row's expectation is relative to the row before. One table, printed as it runs.
// The engine rows (vLLM -> SGLang -> vLLM, issue 21) run SGLang in the lab's stand-in for its own
// image (LAB_SGLANG_IMAGE): it answers naming both nodes, and a second `up` changes nothing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { HEREDOC_DELIMITER } from "../../components/render/host/shell";
import { UNITS } from "../../config/hostPaths";
import { withLabUp } from "../lab/lab-harness";
import {
    LAB_IMAGES,
    LAB_SGLANG_IMAGE,
    NodeName,
    Session,
    apiKeyOf,
    chat,
    mainPid,
    newSession,
    nodeReport,
    pulumi,
    pulumiWithConfig,
    removeSession,
    withImage,
} from "./stackSession";

const members: NodeName[] = ["spark-a", "spark-b"];

/** The engine probe's new line asking the node which image `image` names (its ID, which the units then start). */
const IMAGE_PROBED = (image: string) => new RegExp(`^\\s+\\+ echo "image-id=\\$\\(docker image inspect .* -- ${image.replace(/[.:/]/g, "\\$&")}\\)"`, "m");

withLabUp();

/** A process the change may restart: the main PID of one of our units on one node. */
type Proc = `${NodeName}:${"ray" | "vllm" | "sglang"}`;

interface Row {
    /** The change, as a reviewer would name it. */
    change: string;
    /** How the stack's config file changes (text in, text out). */
    edit: (config: string, session: Session) => string;
    /** Exactly the resources (last URN segment) that preview must report as changing. */
    touches: string[];
    /** Lines the human-readable `preview --diff` must show (the rendered text that changes). */
    diffShows: RegExp[];
    /** The processes that must restart; every other one must keep its PID. */
    restarts: Proc[];
    /** The served model name after the change (for the chat that proves it still answers). */
    model?: string;
    /** false: after the change nothing may answer (serving is paused). Defaults to true. */
    serving?: false;
    /** What the answer must say after the change (who served it). */
    answer?: RegExp;
    /** true: a preview after the change must touch nothing (a second `up` changes nothing). */
    secondUpIdle?: true;
    /**
     * true: the change installs other files (an engine switch: SGLang's unit in place of vLLM's), so
     * the opening line of those heredocs changes with the path; the delimiter itself still may not.
     */
    installsOtherFiles?: true;
}

/** The vLLM layer of the pair with the mp executor: both ranks' components, units, secrets, rank 1's follower, rank 0's probe. */
const MP_SERVING_STEPS = [
    "spark-a-vllm",
    "spark-a-vllm-ready",
    "spark-a-vllm-secrets",
    "spark-a-vllm-unit",
    "spark-b-vllm",
    "spark-b-vllm-follow",
    "spark-b-vllm-secrets",
    "spark-b-vllm-unit",
];

function replaceOnce(config: string, from: string | RegExp, to: string): string {
    const next = config.replace(from, to);
    assert.notEqual(next, config, `the config has ${String(from)}`);
    return next;
}

/** The serving steps an engine switch touches, with the probes and check (docs/engines.md, "Switching engine"), and the image change's model download. */
function engineSwitchTouches(op: "create" | "delete"): string[] {
    return [
        "dev-model-download(update)",
        "dev-node-check(update)",
        "dev-vllm-check(update)",
        "spark-a-facts(update)",
        `spark-a-vllm-engine-switch(${op})`,
        "spark-a-vllm-probe(update)",
        "spark-a-vllm-ready(replace)",
        "spark-a-vllm-secrets(update)",
        "spark-a-vllm-unit(update)",
        "spark-b-facts(update)",
        `spark-b-vllm-engine-switch(${op})`,
        "spark-b-vllm-follow(update)",
        "spark-b-vllm-probe(update)",
        "spark-b-vllm-secrets(update)",
        "spark-b-vllm-unit(update)",
    ];
}

const NEW_API_KEY = "sk-lab-blast-radius-0123456789abcdef";

// In this order: the API key and secretsGeneration last, because `pulumi config set` rewrites the file's YAML.
const ROWS: Row[] = [
    {
        change: "a vLLM flag (model.maxModelLen)",
        edit: (c) => replaceOnce(c, "    servedName: tiny-chat\n", "    servedName: tiny-chat\n    maxModelLen: 4096\n"),
        touches: ["spark-a-vllm-ready(replace)", "spark-a-vllm-unit(update)", "spark-b-vllm-unit(update)"],
        diffShows: [/^\s+- ExecStart=/m, /^\s+\+ ExecStart=.*--max-model-len 4096/m],
        restarts: ["spark-a:vllm", "spark-b:vllm"],
    },
    {
        change: "the model",
        edit: (c) =>
            replaceOnce(replaceOnce(c, "source: lab/tiny-chat", "source: Qwen/Qwen2.5-0.5B-Instruct"), "servedName: tiny-chat", "servedName: qwen-small"),
        touches: [
            "dev-model-download(replace)",
            "dev-model-pull-spark-b(replace)",
            "dev-model-serve(replace)",
            "spark-a-vllm-ready(replace)",
            "spark-a-vllm-unit(update)",
            "spark-b-vllm-unit(update)",
        ],
        diffShows: [/^\s+\+ ExecStart=.* Qwen\/Qwen2\.5-0\.5B-Instruct /m],
        restarts: ["spark-a:vllm", "spark-b:vllm"],
        model: "qwen-small",
    },
    {
        change: "pause (model.paused: true)",
        edit: (c) => replaceOnce(c, "    executor: mp\n", "    executor: mp\n    paused: true\n"),
        touches: MP_SERVING_STEPS.map((step) => `${step}(delete)`),
        diffShows: [/^\s*- spark-remote:index:Step: \(delete\)/m],
        restarts: ["spark-a:vllm", "spark-b:vllm"],
        serving: false,
    },
    {
        change: "resume (model.paused removed)",
        edit: (c) => replaceOnce(c, "    paused: true\n", ""),
        // No model step (nothing downloaded again) and no host layer.
        touches: MP_SERVING_STEPS.map((step) => `${step}(create)`),
        diffShows: [/^\s*\+ spark-remote:index:Step: \(create\)/m],
        restarts: ["spark-a:vllm", "spark-b:vllm"],
    },
    {
        change: "the interconnect MTU",
        edit: (c) => replaceOnce(c, "mtu: 9000", "mtu: 8000"),
        touches: ["spark-a-interconnect-apply(update)", "spark-b-interconnect-apply(update)"],
        diffShows: [/^\s+- +mtu: 9000$/m, /^\s+\+ +mtu: 8000$/m],
        restarts: [],
    },
    {
        change: "an interconnect address (spark-b's first link)",
        edit: (c) => replaceOnce(c, "192.168.100.12/24", "192.168.100.13/24"),
        touches: [
            "dev-model-serve(update)",
            "spark-a-firewall-apply(update)",
            "spark-a-interconnect-apply(update)",
            "spark-b-firewall-apply(update)",
            "spark-a-vllm-ready(replace)",
            "spark-a-vllm-unit(update)",
            "spark-b-interconnect-apply(update)",
            "spark-b-nccl-files(update)",
            "spark-b-vllm-unit(update)",
        ],
        diffShows: [/^\s+- .*192\.168\.100\.12\/24/m, /^\s+\+ .*192\.168\.100\.13\/24/m],
        // rank 1's restart ends the engine on rank 0 too: rank 0 restarts after it, on purpose.
        restarts: ["spark-a:vllm", "spark-b:vllm"],
    },
    {
        change: "the image tag",
        edit: (c) => withImage(c, LAB_IMAGES.v2605),
        // The vLLM probes ask the new image, and the check lists what they found; the facts
        // (first contact) say whether each node has it, and the node check reads them again.
        touches: [
            "dev-model-download(update)",
            "dev-node-check(update)",
            "dev-vllm-check(update)",
            "spark-a-facts(update)",
            "spark-a-vllm-probe(update)",
            "spark-a-vllm-ready(replace)",
            "spark-a-vllm-unit(update)",
            "spark-b-facts(update)",
            "spark-b-vllm-probe(update)",
            "spark-b-vllm-unit(update)",
        ],
        // The units start the image by the ID the probe finds (issue 36): until the probe has run,
        // a preview knows the tag it asks about, not the units' new text.
        diffShows: [IMAGE_PROBED(LAB_IMAGES.v2605)],
        restarts: ["spark-a:vllm", "spark-b:vllm"],
    },
    {
        change: "model.engine vllm -> sglang (and SGLang's image)",
        edit: (c) => replaceOnce(withImage(c, LAB_SGLANG_IMAGE), "    executor: mp\n", "    executor: mp\n    engine: sglang\n"),
        touches: engineSwitchTouches("create"),
        diffShows: [IMAGE_PROBED(LAB_SGLANG_IMAGE)],
        restarts: ["spark-a:sglang", "spark-a:vllm", "spark-b:sglang", "spark-b:vllm"],
        answer: /LAB STAND-IN .*served by spark-a,spark-b \(sglang tp=2 nnodes=2\)/,
        secondUpIdle: true,
        installsOtherFiles: true,
    },
    {
        change: "model.engine sglang -> vllm (and the vLLM image back)",
        edit: (c) => replaceOnce(withImage(c, LAB_IMAGES.v2605), "    engine: sglang\n", ""),
        touches: engineSwitchTouches("delete"),
        diffShows: [IMAGE_PROBED(LAB_IMAGES.v2605)],
        restarts: ["spark-a:sglang", "spark-a:vllm", "spark-b:sglang", "spark-b:vllm"],
        installsOtherFiles: true,
    },
    {
        change: "the executor, mp -> ray (and the image back to one with Ray)",
        edit: (c) => replaceOnce(withImage(c, LAB_IMAGES.ray), "executor: mp", "executor: ray"),
        touches: [
            "dev-model-download(update)",
            "dev-node-check(update)",
            "dev-vllm-check(update)",
            "spark-a-facts(update)",
            "spark-a-ray-head(create)",
            "spark-a-ray-head-auth(create)",
            "spark-a-ray-head-ready(create)",
            "spark-a-ray-head-unit(create)",
            "spark-a-ray-probe(create)",
            "spark-a-vllm-probe(update)",
            "spark-a-vllm-ready(replace)",
            "spark-a-vllm-unit(update)",
            "spark-b-facts(update)",
            "spark-b-ray-probe(create)",
            "spark-b-ray-worker(create)",
            "spark-b-ray-worker-auth(create)",
            "spark-b-ray-worker-unit(create)",
            "spark-b-vllm(delete)",
            "spark-b-vllm-follow(delete)",
            "spark-b-vllm-probe(update)",
            "spark-b-vllm-secrets(delete)",
            "spark-b-vllm-unit(delete)",
        ],
        // The image changes too: the units' new text is unknown until the probes ran (see "the image tag").
        diffShows: [IMAGE_PROBED(LAB_IMAGES.ray), /^\s+\+ spark-remote:index:Step: \(create\)\n\s+\[urn=\S+::spark-a-ray-probe\]/m],
        restarts: ["spark-a:ray", "spark-a:vllm", "spark-b:ray", "spark-b:vllm"],
    },
    {
        change: "PFC off (roce.enabled: false)",
        edit: (c) => replaceOnce(c, "  spark-cluster:ray:\n", "  spark-cluster:roce:\n    enabled: false\n  spark-cluster:ray:\n"),
        touches: ["spark-a-roce(delete)", "spark-a-roce-apply(delete)", "spark-b-roce(delete)", "spark-b-roce-apply(delete)"],
        diffShows: [/^\s*- spark-remote:index:Step: \(delete\)/m, /mlnx_qos/],
        restarts: [],
    },
    {
        change: "the API key",
        edit: (c, session) => {
            fs.writeFileSync(session.configFile, c);
            pulumiWithConfig(session, "config", "set", "--secret", "spark-cluster:apiKey", NEW_API_KEY);
            return fs.readFileSync(session.configFile, "utf8");
        },
        // Nothing internal derives from it any more (issue 40): only vLLM's secrets and its probe.
        touches: ["spark-a-vllm-ready(replace)", "spark-a-vllm-secrets(update)"],
        diffShows: [/\[secret\]/],
        restarts: ["spark-a:vllm"],
    },
    {
        change: "secretsGeneration (rotating the internal secrets)",
        edit: (c, session) => {
            fs.writeFileSync(session.configFile, c);
            pulumiWithConfig(session, "config", "set", "spark-cluster:secretsGeneration", "2");
            return fs.readFileSync(session.configFile, "utf8");
        },
        // A new root secret: the Ray token's steps (Ray restarts, the engine with it: its probe runs again) and the model sync's.
        touches: [
            "dev-model-pull-spark-b(update)",
            "dev-model-serve(update)",
            "dev-root-secret(replace)",
            "spark-a-ray-head-auth(update)",
            "spark-a-vllm-ready(replace)",
            "spark-b-ray-worker-auth(update)",
        ],
        diffShows: [/\[secret\]/],
        restarts: ["spark-a:ray", "spark-a:vllm", "spark-b:ray"],
    },
];

function pids(): Record<Proc, string> {
    const out = {} as Record<Proc, string>;
    for (const node of members) {
        out[`${node}:ray`] = mainPid(node, UNITS.ray);
        out[`${node}:vllm`] = mainPid(node, UNITS.vllm);
        out[`${node}:sglang`] = mainPid(node, UNITS.sglang);
    }
    return out;
}

describe("blast radius: each everyday change touches exactly what it must (preview, diff, PIDs)", { timeout: 3_600_000 }, () => {
    let session: Session;
    let apiKey = "";
    let model = "tiny-chat";
    /** One row per change that converged: what its preview touched and which processes restarted. */
    const table: { change: string; touched: string[]; restarted: Proc[]; line: string }[] = [];

    before(() => {
        // mp's multi-node flags need vLLM >= 0.11.1: the 26.10 image (vLLM 0.31.0), not the stack's 25.09 (0.10.1.1).
        session = newSession((c) => withImage(replaceOnce(c, "executor: ray", "executor: mp"), LAB_IMAGES.v2610));
        apiKey = apiKeyOf(session);
    });

    it("converges the pair (mp executor) and answers", async () => {
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, model);
    });

    for (const row of ROWS) {
        it(row.change, async (t) => {
            fs.writeFileSync(session.configFile, row.edit(fs.readFileSync(session.configFile, "utf8"), session));
            if (row.change === "the API key") apiKey = NEW_API_KEY;
            if (row.model) model = row.model;
            const preview = JSON.parse(pulumiWithConfig(session, "preview", "--json")) as { steps: { op: string; urn: string }[] };
            const touched = preview.steps
                .filter((s) => s.op !== "same")
                .map((s) => `${s.urn.split("::").pop()}(${s.op})`)
                .sort();
            // The up shows each step's diff as `preview --diff` does (the same display of the same
            // steps; CI's previews are tested in test/process): one run of the program instead of two.
            const before = pids();
            const start = Date.now();
            let diff: string;
            try {
                diff = pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--diff", "--show-full-output");
            } catch (err) {
                // What the nodes were doing when the up failed, at the end of the message (CI keeps its last lines).
                (err as Error).message += `\n== the nodes after the failed up:\n${members.map((node) => nodeReport(node)).join("\n")}`;
                throw err;
            }
            const seconds = Math.round((Date.now() - start) / 1000);
            assert.ok(!diff.includes(apiKey), "the diff shows no secret");
            // What changes reads as the changed lines of what we render: no heredoc delimiter or
            // other blob changes along with them.
            if (row.installsOtherFiles) {
                // Only an `sc_install_file PATH MODE <<'DELIMITER'` line may change (its PATH), with the same delimiter; never the closing line.
                for (const [line] of diff.matchAll(new RegExp(`^\\s+[-+] .*${HEREDOC_DELIMITER}.*$`, "gm"))) {
                    assert.match(
                        line,
                        new RegExp(`^\\s+[-+] result=\\$\\(sc_install_file /etc/\\S+ \\d+ <<'"'"'${HEREDOC_DELIMITER}'"'"'$`),
                        "only a heredoc's target path changed",
                    );
                }
            } else {
                assert.doesNotMatch(diff, /^\s+[-+] .*SPARK_CLUSTER_EOF/m, "a heredoc delimiter changed");
            }
            const after = pids();
            const restarted = (Object.keys(before) as Proc[]).filter((p) => before[p] !== after[p]).sort();
            if (row.serving === false) {
                await assert.rejects(chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, model, 10_000), "nothing answers while paused");
            } else {
                const text = await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, model);
                if (row.answer) assert.match(text, row.answer);
            }
            const line = `| ${row.change} | ${touched.join(", ")} | ${restarted.join(", ") || "none"} | ${seconds} s |`;
            table.push({ change: row.change, touched, restarted, line });
            t.diagnostic(line);
            for (const shown of row.diffShows) assert.match(diff, shown, `the diff shows ${String(shown)}:\n${diff}`);
            assert.deepEqual(touched, [...row.touches].sort(), `preview touches exactly the expected resources`);
            assert.deepEqual(restarted, [...row.restarts].sort(), `only the expected processes restart`);
            if (row.secondUpIdle) {
                const again = JSON.parse(pulumiWithConfig(session, "preview", "--json")) as { steps: { op: string; urn: string }[] };
                assert.deepEqual(
                    again.steps.filter((s) => s.op !== "same").map((s) => `${s.urn.split("::").pop()}(${s.op})`),
                    [],
                    "a second up changes nothing",
                );
            }
        });
    }

    it("prints the table: one row per change, each touching exactly its resources and processes", (t) => {
        t.diagnostic(["| change | preview touches | restarted | up |", "|---|---|---|---|", ...table.map((r) => r.line)].join("\n"));
        assert.deepEqual(
            table.map((r) => r.change),
            ROWS.map((r) => r.change),
            "every change has its row, in order",
        );
        for (const [i, row] of ROWS.entries()) {
            assert.deepEqual(table[i].touched, [...row.touches].sort(), `${row.change}: the row's preview touches`);
            assert.deepEqual(table[i].restarted, [...row.restarts].sort(), `${row.change}: the row's restarts`);
        }
    });

    after(() => {
        if (session) removeSession(session);
    });
});
