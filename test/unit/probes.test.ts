/**
 * The probes as facts: each probe's parser on output as its step prints it, and the facts it
 * reads, from fixtures in pyinfra's shape (its `tests/facts/<fact>/<case>.json`): one folder per
 * probe under test/unit/fixtures/probes/, one file per case,
 * `{ "about", "spec", "output": [lines] | "outputFile", "facts" }`. `output` is the step's stdout
 * as the provider records it (its lines joined by newlines, the last newline trimmed:
 * toolchain/plugins/internal/commandprovider/ssh.go); `outputFile` names a capture under
 * test/unit/fixtures/ instead; `facts: null` is the parser's undefined (JSON has none). Each case's
 * script (from its `spec`) is valid bash, and every `name=` or `name: ` line of its output is one
 * that script prints.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import type { Probe } from "../../components/render/facts";
import { lldpProbe } from "../../components/render/lldp";
import { NetplanSpec, linkCheck, netplanApplyScript } from "../../components/render/netplan";
import { hardwareProbe, rayProbe, vllmProbe } from "../../components/render/probe";
import { rdmaBandwidthProbe } from "../../components/render/rdmaBandwidth";
import { sglangProbe } from "../../components/render/sglang";
import { engineStrategy } from "../../components/render/engine";
import { findRepoRoot } from "../support/repoRoot";

const FIXTURES = path.join(findRepoRoot(), "test", "unit", "fixtures");

/** Every probe with fixtures, by its folder's name. The link checks' script is the netplan apply that runs them. */
const PROBES: Record<string, Probe<never, unknown>> = {
    hardware: hardwareProbe,
    ray: rayProbe,
    vllm: vllmProbe,
    sglang: sglangProbe,
    lldp: lldpProbe,
    links: { script: (spec: NetplanSpec) => netplanApplyScript(spec), parse: (stdout) => linkCheck.parse(stdout) },
    "rdma-bandwidth": rdmaBandwidthProbe,
};

interface ProbeCase {
    /** What the case is: the node, the runtime, what was wrong. */
    about: string;
    spec: unknown;
    output?: string[];
    outputFile?: string;
    facts: unknown;
}

function readCase(file: string): ProbeCase {
    const c = JSON.parse(fs.readFileSync(file, "utf8")) as ProbeCase;
    assert.equal(typeof c.about, "string", `${file}: about`);
    assert.ok("spec" in c && "facts" in c, `${file}: spec and facts`);
    assert.ok((c.output === undefined) !== (c.outputFile === undefined), `${file}: output or outputFile, not both`);
    return c;
}

/** The step's stdout: the lines joined, or the capture with its last newline trimmed (as the provider records it). */
function stdoutOf(c: ProbeCase): string {
    if (c.output !== undefined) return c.output.join("\n");
    return fs.readFileSync(path.join(FIXTURES, c.outputFile ?? ""), "utf8").replace(/\n$/, "");
}

const folders = fs.readdirSync(path.join(FIXTURES, "probes")).sort();

it("every probe has fixtures, and every fixture folder is a probe", () => {
    assert.deepEqual(folders, Object.keys(PROBES).sort());
});

it("each engine's strategy gives its own probe", () => {
    assert.equal(engineStrategy({ kind: "vllm" }).probe, vllmProbe);
    assert.equal(engineStrategy({ kind: "sglang", version: "0.5.23" }).probe, sglangProbe);
});

for (const folder of folders) {
    const probe = PROBES[folder] as Probe<unknown, unknown> | undefined;
    const dir = path.join(FIXTURES, "probes", folder);
    describe(`the ${folder} probe`, () => {
        for (const name of fs
            .readdirSync(dir)
            .filter((f) => f.endsWith(".json"))
            .sort()) {
            const c = readCase(path.join(dir, name));
            it(`${name.replace(/\.json$/, "")}: ${c.about}`, () => {
                assert.ok(probe, `no probe for fixtures/probes/${folder}`);
                const output = stdoutOf(c);
                assert.deepEqual(probe.parse(output), c.facts === null ? undefined : c.facts);
                const script = probe.script(c.spec ?? undefined);
                const syntax = spawnSync("bash", ["-n", "-c", script], { encoding: "utf8" });
                assert.equal(syntax.status, 0, syntax.stderr);
                for (const line of output.split("\n")) {
                    const marker = /^([a-z][a-z -]*?(?:=|: ))/.exec(line)?.[1];
                    if (marker !== undefined) assert.ok(script.includes(marker), `${JSON.stringify(line)}: the script prints no ${JSON.stringify(marker)}`);
                }
            });
        }
    });
}
