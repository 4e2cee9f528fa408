/**
 * The model sync's serve and pull scripts, as rendered, against each other with the real rsync
 * daemon and client (Debian's rsync; scripts/test.sh installs it) over loopback: the head serves a
 * small Hugging Face repository (blobs, a snapshot of links to them, refs/main), a worker pulls it
 * with model.syncStreams streams, and the worker's copy must be the head's, byte for byte and link
 * for link. Each side runs in a mount namespace of its own whose /root/.cache and /var/lib are
 * empty tmpfs (the scripts' fixed paths: the Hugging Face cache and our state), so nothing touches
 * this machine's own directories. Root only (unshare, mount).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { HF_HUB_DIR, modelPullScript, modelServeScript } from "../../components/render/modelSync";

const REPO = "lab/pull-test";
const REPO_DIR = `${HF_HUB_DIR}/models--lab--pull-test`;
const SECRET = "model-pull-test-secret-0123456789";

const missing = [
    process.getuid?.() !== 0 ? "root" : "",
    ...["unshare", "rsync"].filter((tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0),
].filter(Boolean);

/** Lines that give this side empty tmpfs over the scripts' fixed paths. */
const PRIVATE_DIRS = ["mount -t tmpfs tmpfs /root/.cache", "mount -t tmpfs tmpfs /var/lib"];

/** Every file and link of the repository with its size, target or sha256 (what the test compares). */
const LISTING = `echo '== listing'; cd ${REPO_DIR} && find . -mindepth 1 -printf '%y %p %l\\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum && echo '== end'`;

/** A head's repository: `files` blobs of growing sizes (random bytes), a snapshot linking to them, config.json, refs/main. */
function populate(files: number): string {
    return [
        `mkdir -p ${REPO_DIR}/blobs ${REPO_DIR}/snapshots/rev1 ${REPO_DIR}/refs`,
        `echo rev1 > ${REPO_DIR}/refs/main`,
        `for i in $(seq 1 ${files}); do head -c $(( i * 700000 )) /dev/urandom > ${REPO_DIR}/blobs/blob$i; ln -s ../../blobs/blob$i ${REPO_DIR}/snapshots/rev1/model-$i.safetensors; done`,
        `echo '{"architectures": ["Test"]}' > ${REPO_DIR}/blobs/config; ln -s ../../blobs/config ${REPO_DIR}/snapshots/rev1/config.json`,
    ].join("\n");
}

async function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const server = net.createServer();
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => {
            const port = (server.address() as net.AddressInfo).port;
            server.close(() => resolve(port));
        });
    });
}

/** `unshare -m` running `script` with `stdin`; resolves with its exit status and output, killed (by its PID) after `limitMs`. */
function inNamespace(
    script: string,
    stdin: string,
    limitMs: number,
    onStart?: (child: ChildProcess) => void,
): Promise<{ status: number | null; output: string }> {
    return new Promise((resolve) => {
        const child = spawn("unshare", ["--mount", "--propagation", "private", "bash", "-euo", "pipefail", "-c", script], { stdio: ["pipe", "pipe", "pipe"] });
        let output = "";
        child.stdout.on("data", (d: Buffer) => (output += d.toString()));
        child.stderr.on("data", (d: Buffer) => (output += d.toString()));
        const timer = setTimeout(() => child.kill("SIGKILL"), limitMs);
        child.on("close", (status) => {
            clearTimeout(timer);
            resolve({ status, output });
        });
        child.stdin.end(stdin);
        onStart?.(child);
    });
}

function listingOf(output: string): string {
    const at = output.indexOf("== listing\n");
    const end = output.indexOf("== end\n", at);
    assert.ok(at >= 0 && end > at, `no listing in:\n${output}`);
    return output.slice(at, end);
}

async function sync(streams: number, files: number): Promise<{ head: string; worker: string }> {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "model-pull-"));
    try {
        const serve = path.join(dir, "serve.sh");
        const pull = path.join(dir, "pull.sh");
        fs.writeFileSync(serve, modelServeScript({ repoId: REPO, node: "head", headIp: "127.0.0.1", port, workers: [{ node: "worker", ips: ["127.0.0.1"] }] }));
        fs.writeFileSync(pull, modelPullScript({ repoId: REPO, node: "worker", head: "head", headIp: "127.0.0.1", port, streams }));
        // The head lists its repository first, then serves until the worker has told it it holds the model.
        const head = inNamespace([...PRIVATE_DIRS, populate(files), `(${LISTING})`, `bash ${serve}`].join("\n"), SECRET, 120_000);
        const worker = await inNamespace([...PRIVATE_DIRS, `bash ${pull}`, `(${LISTING})`].join("\n"), SECRET, 120_000);
        const served = await head;
        assert.equal(worker.status, 0, `the pull failed:\n${worker.output}`);
        assert.equal(served.status, 0, `the serve step failed:\n${served.output}`);
        return { head: served.output, worker: worker.output };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

describe(
    "the model sync over a real rsync daemon (loopback, private mount namespaces)",
    { skip: missing.length > 0 ? `needs ${missing.join(", ")}` : false },
    () => {
        it("four streams: the files are dealt to the streams, the worker's copy is the head's, the rate is printed", async () => {
            const { head, worker } = await sync(4, 9);
            assert.equal(listingOf(worker), listingOf(head), "the worker holds exactly the head's files and links");
            assert.match(worker, /pulling lab\/pull-test from head \(127\.0\.0\.1\) in 4 streams: \d+ MiB in 4 lists/);
            assert.match(worker, /worker holds lab\/pull-test: .*; pulled (\d+) MiB in \d+ s \([\d.]+ MB\/s, 4 stream\(s\)\)/);
            assert.doesNotMatch(worker, /the parallel pass did not copy everything/);
            assert.match(head, /every other node holds lab\/pull-test; stopped serving it/);
        });

        it("one stream: the single pass alone, the same copy", async () => {
            const { head, worker } = await sync(1, 3);
            assert.equal(listingOf(worker), listingOf(head));
            assert.doesNotMatch(worker, /streams:/, "no parallel pass");
            assert.match(worker, /, 1 stream\(s\)\)/);
        });

        it("more streams than files: a list per file, the same copy", async () => {
            const { head, worker } = await sync(16, 2);
            assert.equal(listingOf(worker), listingOf(head));
            // Two blobs, config.json and refs/main: four regular files, so four lists.
            assert.match(worker, /in 16 streams: \d+ MiB in 4 lists/);
        });
    },
);
