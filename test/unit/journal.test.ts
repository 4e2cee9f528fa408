/**
 * Journal tails scrubbed of the stack's secrets (issue 40, item 5): the scrubber (Python, run here
 * by python3) reads secret files written by our own renderers (an env file in systemd's quoting
 * and in docker's, SGLang's YAML `--config`), and replaces every value in what the journal said,
 * SGLang's `server_args` line among it (sglang#37457), leaving the rest as it was.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SECRET_FILES } from "../../config/hostPaths";
import { SCRUBBED, SCRUB_PY, journalTailLine } from "../../components/render/host/journal";
import { renderEnvFile } from "../../components/render/host/envFile";
import { renderSglangSecrets } from "../../components/render/sglang";

const API_KEY = "sk-lab-journal-0123456789abcdef";
const HF_TOKEN = "hf_journalTestToken0123456789";
const RAY_TOKEN = "9f3b2c1d0e4a5b6c7d8e9f0a1b2c3d4e";
const ADMIN_PASSWORD = 'pa"ss$word`with\\odd chars';
const SESSION_KEY = "webui-session-key-abcdefghijklmnop";

function scrub(sources: [string, readonly string[]][], text: string): string {
    const run = spawnSync("python3", ["-c", SCRUB_PY, JSON.stringify(sources)], { input: text, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    return run.stdout;
}

describe("journal tails: every secret of the stack on the node is scrubbed", () => {
    it("the values of every secret file of ours, as our renderers write them, and nothing else", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-scrub-"));
        try {
            const files = {
                vllm: path.join(dir, "vllm.env"),
                ray: path.join(dir, "ray.env"),
                webui: path.join(dir, "open-webui.env"),
                sglang: path.join(dir, "sglang.yaml"),
            };
            fs.writeFileSync(
                files.vllm,
                renderEnvFile(
                    "vLLM",
                    [
                        ["VLLM_API_KEY", API_KEY],
                        ["HF_TOKEN", HF_TOKEN],
                    ],
                    "systemd",
                ),
            );
            fs.writeFileSync(
                files.ray,
                renderEnvFile(
                    "Ray",
                    [
                        ["RAY_AUTH_MODE", "token"],
                        ["RAY_AUTH_TOKEN", RAY_TOKEN],
                    ],
                    "docker",
                ),
            );
            fs.writeFileSync(
                files.webui,
                renderEnvFile(
                    "Open WebUI",
                    [
                        ["OPENAI_API_KEYS", API_KEY],
                        ["WEBUI_SECRET_KEY", SESSION_KEY],
                        ["WEBUI_ADMIN_PASSWORD", ADMIN_PASSWORD],
                        ["WEBUI_ADMIN_EMAIL", "admin@example.com"],
                    ],
                    "systemd",
                ),
            );
            fs.writeFileSync(files.sglang, renderSglangSecrets(API_KEY));
            // The same keys as the product's list, at this test's paths.
            const byPath = new Map(SECRET_FILES.map((f) => [path.basename(f.path), f.keys]));
            const sources: [string, readonly string[]][] = Object.values(files).map((f) => [f, byPath.get(path.basename(f)) ?? assert.fail(f)]);
            sources.push([path.join(dir, "missing.env"), ["VLLM_API_KEY"]]);
            const journal = [
                `[2026-11-29 08:00:00] INFO server_args=ServerArgs(model_path='lab/tiny-chat', api_key='${API_KEY}', port=8000)`,
                `Authorization: Bearer ${API_KEY}`,
                `hub: token ${HF_TOKEN} refused`,
                `ray: RAY_AUTH_TOKEN=${RAY_TOKEN} mode token`,
                `open-webui: admin ${ADMIN_PASSWORD} session ${SESSION_KEY} for admin@example.com`,
                "nothing secret here",
                "",
            ].join("\n");
            const out = scrub(sources, journal);
            for (const secret of [API_KEY, HF_TOKEN, RAY_TOKEN, ADMIN_PASSWORD, SESSION_KEY]) assert.ok(!out.includes(secret), `${secret} scrubbed:\n${out}`);
            assert.equal(
                out,
                [
                    `[2026-11-29 08:00:00] INFO server_args=ServerArgs(model_path='lab/tiny-chat', api_key='${SCRUBBED}', port=8000)`,
                    `Authorization: Bearer ${SCRUBBED}`,
                    `hub: token ${SCRUBBED} refused`,
                    `ray: RAY_AUTH_TOKEN=${SCRUBBED} mode token`,
                    `open-webui: admin ${SCRUBBED} session ${SCRUBBED} for admin@example.com`,
                    "nothing secret here",
                    "",
                ].join("\n"),
            );
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("the product's list names every secret file of ours; a tail line is valid bash that never fails the step's script by itself", () => {
        assert.deepEqual(
            SECRET_FILES.map((f) => path.basename(f.path)),
            ["vllm.env", "ray.env", "open-webui.env", "sglang.yaml"],
        );
        const line = journalTailLine("spark-cluster-vllm", 40);
        assert.match(line, /^journalctl -u spark-cluster-vllm\.service -n 40 --no-pager 2>&1 \| python3 -c '/);
        assert.match(line, / \|\| true$/);
        assert.equal(spawnSync("bash", ["-n", "-c", line]).status, 0);
        // With no journal and no secret files (this machine has neither of ours), it prints what journalctl said and exits 0.
        assert.equal(
            spawnSync("bash", ["-euo", "pipefail", "-c", line.replace("journalctl -u spark-cluster-vllm.service -n 40 --no-pager", "echo plain")]).status,
            0,
        );
    });
});
