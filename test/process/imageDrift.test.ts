/**
 * Image identity as drift (issue 36, part 3): the engine probe's read-back
 * (components/render/probe.ts engineProbeReadScript), run for real by bash against a fake `docker`
 * on PATH that keeps its tags and images in files. On refresh our provider runs it with the probe's
 * last output on stdin; what it prints becomes the step's `drift`. The fake records every call, so
 * the test also shows that the read-back only asks (`docker image inspect`) and changes nothing.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { DockerRuntime } from "../../config";
import { runtimeStrategy } from "../../components/render/host/runtime";
import { IMAGE_ID_PREFIX, engineProbeReadScript } from "../../components/render/probe";
import { DOCKER_DEFAULT, VENV } from "../support/fixtures";

const TAG = DOCKER_DEFAULT.image;
const OLD = `sha256:${"0a".repeat(32)}`;
const NEW = `sha256:${"1b".repeat(32)}`;

/**
 * `docker image inspect [--format '{{.Id}}'] -- REF` as docker answers it: REF a tag (a file under
 * tags/, holding its ID) or an ID (a file under images/); an image that is not under images/ is
 * not there. Every call is appended to calls.
 */
const FAKE_DOCKER = String.raw`#!/bin/bash
state=${"$"}{FAKE_DOCKER_STATE:?}
printf '%s\n' "$*" >> "$state/calls"
[ "$1 $2" = "image inspect" ] || { echo "fake docker: not a read: $*" >&2; exit 2; }
shift 2
format=""
if [ "$1" = --format ]; then format=$2; shift 2; fi
[ "$1" = -- ] && shift
ref=$1
key=$(printf '%s' "$ref" | tr '/:@' '___')
if [ -f "$state/tags/$key" ]; then id=$(cat "$state/tags/$key"); else id=$ref; fi
[ -f "$state/images/$id" ] || { echo "Error: No such image: $ref" >&2; exit 1; }
if [ -n "$format" ]; then echo "$id"; else echo "[{\"Id\": \"$id\"}]"; fi
`;

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** A node's docker: the tags (ref -> ID) and the images it has. */
function fakeNode(tags: Record<string, string>, images: string[]): { env: NodeJS.ProcessEnv; calls: () => string[] } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sc-image-drift-"));
    dirs.push(dir);
    for (const sub of ["bin", "tags", "images"]) fs.mkdirSync(path.join(dir, sub));
    fs.writeFileSync(path.join(dir, "bin", "docker"), FAKE_DOCKER, { mode: 0o755 });
    for (const [ref, id] of Object.entries(tags)) fs.writeFileSync(path.join(dir, "tags", ref.replace(/[/:@]/g, "_")), `${id}\n`);
    for (const id of images) fs.writeFileSync(path.join(dir, "images", id), "");
    fs.writeFileSync(path.join(dir, "calls"), "");
    return {
        env: { ...process.env, PATH: `${path.join(dir, "bin")}:${process.env.PATH ?? ""}`, FAKE_DOCKER_STATE: dir },
        calls: () => fs.readFileSync(path.join(dir, "calls"), "utf8").split("\n").filter(Boolean),
    };
}

function bash(script: string, stdin: string, env: NodeJS.ProcessEnv): { status: number | null; stdout: string; stderr: string } {
    const run = spawnSync("bash", ["-c", script], { input: stdin, env, encoding: "utf8", timeout: 30_000 });
    return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** The read-back of spark-b with `runtime`, run with `last` (the probe's last output) on stdin. */
function readBack(node: ReturnType<typeof fakeNode>, last: string, runtime: DockerRuntime = DOCKER_DEFAULT): string {
    const script = engineProbeReadScript({ node: "spark-b", runtime });
    assert.ok(script !== undefined, "a docker runtime has a read-back");
    const run = bash(script, last, node.env);
    assert.equal(run.status, 0, `a read-back reports, it does not fail: ${run.stderr}`);
    assert.equal(run.stderr, "");
    assert.ok(
        node.calls().every((c) => c.startsWith("image inspect ")),
        `only reads: ${node.calls().join("; ")}`,
    );
    return run.stdout;
}

const probed = (id: string) => `vllm-version=0.31.0+lab.standin\n${IMAGE_ID_PREFIX}${id}\n`;

describe("the engine probe's read-back: the image the tag names now against the one up found", () => {
    it("the probe's own line read back on the same node: no drift (the probe and the read-back agree on what an ID is)", () => {
        const node = fakeNode({ [TAG]: OLD }, [OLD]);
        const probe = bash(runtimeStrategy(DOCKER_DEFAULT).imageIdLines(IMAGE_ID_PREFIX).join("\n"), "", node.env);
        assert.equal(probe.stdout, `${IMAGE_ID_PREFIX}${OLD}\n`);
        assert.equal(readBack(node, `vllm-version=0.31.0\n${probe.stdout}`), "");
    });

    it("the tag re-pointed (a later docker pull, a re-tag): one line naming the node, the tag and both IDs", () => {
        const node = fakeNode({ [TAG]: NEW }, [OLD, NEW]);
        assert.equal(
            readBack(node, probed(OLD)),
            `spark-b: the tag ${TAG} names ${NEW} now, not ${OLD} as when up last probed it; up --refresh probes it again\n`,
        );
    });

    it("re-pointed and the old image removed: both are said (the units' next start would fail)", () => {
        const node = fakeNode({ [TAG]: NEW }, [NEW]);
        assert.deepEqual(readBack(node, probed(OLD)).split("\n").filter(Boolean), [
            `spark-b: the tag ${TAG} names ${NEW} now, not ${OLD} as when up last probed it; up --refresh probes it again`,
            `spark-b: ${OLD}, the image its units start, is no longer on the node: their next start fails`,
        ]);
    });

    it("the tag gone from the node (docker rmi): names no image now", () => {
        const node = fakeNode({}, [OLD]);
        assert.equal(
            readBack(node, probed(OLD)),
            `spark-b: the tag ${TAG} names no image now, not ${OLD} as when up last probed it; up --refresh probes it again\n`,
        );
    });

    it("a probe output without an image ID (a failed inspect at the last up): nothing to compare, no drift", () => {
        const node = fakeNode({ [TAG]: NEW }, [NEW]);
        assert.equal(readBack(node, "vllm-version=0.31.0\nimage-id=\n"), "");
        assert.equal(readBack(node, ""), "");
    });

    it("a digest reference (repo@sha256:…) reads back the same way; the ID line is the last probe's, whatever surrounds it", () => {
        const digest = `nvcr.io/nvidia/vllm@sha256:${"9f".repeat(32)}`;
        const node = fakeNode({ [digest]: OLD }, [OLD]);
        assert.equal(readBack(node, `noise image-id=${NEW}\n${probed(OLD)}trailing\n`, { ...DOCKER_DEFAULT, image: digest }), "");
    });

    it("a venv has no image: no read-back", () => {
        assert.equal(engineProbeReadScript({ node: "thor-1", runtime: VENV }), undefined);
    });
});
