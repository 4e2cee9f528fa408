/**
 * scripts/pulumi-on-path.sh: which Pulumi CLI already on PATH scripts/bootstrap.sh uses instead of
 * building one. The fake `pulumi` is a real executable (built here from a few lines of Go, as the
 * script refuses scripts and other shims) that prints whatever FAKE_PULUMI_PRINTS says when asked
 * `pulumi version`; each case puts it first on PATH, behind the project's own .tools/bin, and runs
 * the script with toolchain/versions.env's PULUMI_VERSION as the minimum, as bootstrap does.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const SCRIPT = path.join(ROOT, "scripts", "pulumi-on-path.sh");
const PINNED = /^PULUMI_VERSION=(\S+)$/m.exec(fs.readFileSync(path.join(ROOT, "toolchain", "versions.env"), "utf8"))?.[1] ?? "";

const FAKE_GO = `package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "version" {
		os.Exit(3)
	}
	fmt.Println(os.Getenv("FAKE_PULUMI_PRINTS"))
}
`;

/** The pinned version with its patch (or minor) number moved by `delta`. */
function bump(part: "minor" | "patch", delta: number): string {
    const [major, minor, patch] = PINNED.split(".").map(Number);
    return part === "minor" ? `${major}.${minor + delta}.0` : `${major}.${minor}.${patch + delta}`;
}

describe("scripts/pulumi-on-path.sh: a Pulumi CLI on PATH that bootstrap may use", () => {
    let work = "";
    /** A folder holding the fake, named `pulumi`. */
    let binDir = "";

    before(() => {
        work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-pulumi-on-path-"));
        binDir = path.join(work, "bin");
        fs.mkdirSync(binDir);
        fs.writeFileSync(path.join(work, "main.go"), FAKE_GO);
        execFileSync("go", ["build", "-o", path.join(binDir, "pulumi"), "main.go"], {
            cwd: work,
            env: { ...process.env, GO111MODULE: "off", GOFLAGS: "" },
            stdio: ["ignore", "pipe", "pipe"],
            timeout: 300_000,
        });
    });
    after(() => fs.rmSync(work, { recursive: true, force: true }));

    /** Runs the script with `dir` first on PATH (after the project's own .tools/bin, which it must look past). */
    function onPath(dir: string, printed: string, min = PINNED): { status: number | null; stdout: string; stderr: string } {
        const r = spawnSync(SCRIPT, [min], {
            encoding: "utf8",
            env: { ...process.env, FAKE_PULUMI_PRINTS: printed, PATH: `${path.join(ROOT, ".tools", "bin")}:${dir}:/usr/bin:/bin` },
            timeout: 60_000,
        });
        return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    }

    it("reads PULUMI_VERSION from toolchain/versions.env", () => {
        assert.match(PINNED, /^\d+\.\d+\.\d+$/);
    });

    const used: [string, string][] = [
        ["the pinned version itself", `v${PINNED}`],
        ["a newer patch", `v${bump("patch", 1)}`],
        ["a newer minor", `v${bump("minor", 6)}`],
        ["a pre-release of a newer version", `v${bump("patch", 1)}-alpha.1764000000`],
        ["the pinned version with build metadata", `v${PINNED}+dirty`],
        ["the pinned version without the leading v", PINNED],
    ];
    for (const [what, printed] of used) {
        it(`uses ${what} (${printed})`, () => {
            const r = onPath(binDir, printed);
            assert.equal(r.status, 0, r.stderr);
            assert.equal(r.stdout, `${path.join(binDir, "pulumi")}\t${printed.replace(/^v/, "")}\n`);
        });
    }

    const refused: [string, string, RegExp][] = [
        ["an older patch", `v${bump("patch", -1)}`, /older than/],
        ["an older minor", `v${bump("minor", -1)}`, /older than/],
        ["a pre-release of the pinned version (older than its release)", `v${PINNED}-alpha.1`, /older than/],
        ["a new major version", `v${Number(PINNED.split(".")[0]) + 1}.0.0`, /another major version/],
        ["a CLI that prints no version", "warning: something went wrong", /not a version/],
    ];
    for (const [what, printed, why] of refused) {
        it(`refuses ${what} (${printed}), saying why`, () => {
            const r = onPath(binDir, printed);
            assert.equal(r.status, 1);
            assert.equal(r.stdout, "");
            assert.match(r.stderr, why);
            assert.ok(r.stderr.includes(path.join(binDir, "pulumi")), "names the CLI it found");
        });
    }

    it("compares numbers as numbers, not as text (3.10.0 is newer than 3.9.0)", () => {
        assert.equal(onPath(binDir, "v3.10.0", "3.9.0").status, 0);
        assert.equal(onPath(binDir, "v3.9.0", "3.10.0").status, 1);
    });

    it("follows a symlink to the binary (a package manager's bin folder)", () => {
        const linked = path.join(work, "linked");
        fs.mkdirSync(linked);
        fs.symlinkSync(path.join(binDir, "pulumi"), path.join(linked, "pulumi"));
        const r = onPath(linked, `v${PINNED}`);
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, `${path.join(linked, "pulumi")}\t${PINNED}\n`);
    });

    it("refuses a version manager's shims: a script, and a binary of another name", () => {
        const script = path.join(work, "script");
        fs.mkdirSync(script);
        fs.writeFileSync(path.join(script, "pulumi"), `#!/bin/sh\nexec ${path.join(binDir, "pulumi")} "$@"\n`, { mode: 0o755 });
        const r1 = onPath(script, `v${PINNED}`);
        assert.equal(r1.status, 1);
        assert.match(r1.stderr, /is a script, not the pulumi binary/);
        const multicall = path.join(work, "multicall");
        fs.mkdirSync(multicall);
        fs.copyFileSync(path.join(binDir, "pulumi"), path.join(multicall, "mise"));
        fs.chmodSync(path.join(multicall, "mise"), 0o755);
        fs.symlinkSync(path.join(multicall, "mise"), path.join(multicall, "pulumi"));
        const r2 = onPath(multicall, `v${PINNED}`);
        assert.equal(r2.status, 1);
        assert.match(r2.stderr, /mise, not a binary named pulumi/);
    });

    it("says so when there is no pulumi on PATH but the project's own", () => {
        const empty = path.join(work, "empty");
        fs.mkdirSync(empty, { recursive: true });
        const r = onPath(empty, `v${PINNED}`);
        assert.equal(r.status, 1);
        assert.match(r.stderr, /no pulumi on PATH/);
    });

    it("refuses a minimum that is not a version", () => {
        const r = onPath(binDir, `v${PINNED}`, "latest");
        assert.equal(r.status, 2);
        assert.match(r.stderr, /latest is not a version/);
    });
});
