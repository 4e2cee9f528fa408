// toolchain/migrate-provider.js, the state rewrite that moves a stack deployed with our provider
// under Pulumi's `command` name (type command:remote:Command, default provider
// pulumi:providers:command::default_1_2_1) to our own package, spark-remote. The fixture is a real
// `pulumi stack export` of such a stack (two steps under a component, one depending on the other,
// secrets encrypted under the throwaway passphrase "x"; stack traces left out). The lab test
// test/integration/provider.test.ts deploys with the commit before the rename and checks
// the engine's side (no change, destroy cleans the hosts).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const SCRIPT = path.join(ROOT, "toolchain", "migrate-provider.js");
const FIXTURE = path.join(ROOT, "test", "unit", "fixtures", "migrate", "command-1.2.1-export.json");

interface Resource {
    urn: string;
    type: string;
    id?: string;
    provider?: string;
    parent?: string;
    dependencies?: string[];
    propertyDependencies?: Record<string, string[]>;
    inputs?: Record<string, unknown>;
    outputs?: Record<string, unknown>;
    additionalSecretOutputs?: string[];
}
interface Exported {
    version: number;
    deployment: { resources: Resource[]; pending_operations?: { resource: Resource; type: string }[] };
}
interface Migrate {
    migrateState(state: Exported, version: string): { state: Exported; steps: number; provider: string } | { state: undefined; reason: string };
    RefusedError: new (message: string) => Error;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const migrate = require(SCRIPT) as Migrate;

const fixture = (): Exported => JSON.parse(fs.readFileSync(FIXTURE, "utf8")) as Exported;

function migrated(state: Exported = fixture()): Exported {
    const result = migrate.migrateState(state, "0.1.0");
    assert.ok(result.state !== undefined, "something to migrate");
    return result.state;
}

const byName = (state: Exported, name: string): Resource => {
    const found = state.deployment.resources.find((r) => r.urn.endsWith(`::${name}`));
    assert.ok(found, name);
    return found;
};

describe("migrate-provider: command:remote:Command to spark-remote:index:Step", () => {
    it("renames each step's type and URN, and points it at the new default provider, keeping its id, inputs and outputs", () => {
        const before = fixture();
        const after = migrated(before);
        const provider = byName(after, "default_0_1_0");
        assert.equal(provider.type, "pulumi:providers:spark-remote");
        assert.equal(provider.urn, "urn:pulumi:dev::spark-cluster::pulumi:providers:spark-remote::default_0_1_0");
        assert.deepEqual(provider.inputs, { __internal: {}, version: "0.1.0" });
        assert.deepEqual(provider.outputs, { version: "0.1.0" });
        assert.equal(provider.id, byName(before, "default_1_2_1").id, "the provider keeps its id");
        for (const name of ["spark-a-ssh", "spark-a-unit"]) {
            const [old, now] = [byName(before, name), byName(after, name)];
            assert.equal(now.type, "spark-remote:index:Step");
            assert.equal(now.urn, `urn:pulumi:dev::spark-cluster::spark-cluster:index:ClusterNode$spark-remote:index:Step::${name}`);
            assert.equal(now.provider, `${provider.urn}::${provider.id}`);
            assert.equal(now.id, old.id);
            assert.deepEqual(now.inputs, old.inputs);
            assert.deepEqual(now.outputs, old.outputs);
            assert.equal(now.parent, old.parent, "the component's URN does not change");
            assert.equal(now.additionalSecretOutputs, undefined, "the connection is no output of ours");
        }
        assert.deepEqual(byName(after, "spark-a-unit").dependencies, [byName(after, "spark-a-ssh").urn]);
        assert.doesNotMatch(JSON.stringify(after), /command:remote:Command|pulumi:providers:command/);
        // The provider comes before the steps it serves.
        const order = after.deployment.resources.map((r) => r.urn.split("::").pop());
        assert.ok(order.indexOf("default_0_1_0") < order.indexOf("spark-a-ssh"), order.join(", "));
        // Everything else as it was.
        assert.equal(after.deployment.resources.length, before.deployment.resources.length);
        assert.deepEqual(byName(after, "spark-a"), byName(before, "spark-a"));
    });

    it("is idempotent: a migrated state, or one deployed after the rename, has nothing to migrate", () => {
        const result = migrate.migrateState(migrated(), "0.1.0");
        assert.equal(result.state, undefined);
    });

    it("rewrites the resources of pending operations too", () => {
        const state = fixture();
        const step = structuredClone(byName(state, "spark-a-unit"));
        state.deployment.pending_operations = [{ resource: step, type: "updating" }];
        const op = migrated(state).deployment.pending_operations?.[0];
        assert.equal(op?.resource.type, "spark-remote:index:Step");
        assert.match(op?.resource.provider ?? "", /::pulumi:providers:spark-remote::default_0_1_0::/);
    });

    it("keeps a new default provider the state has already, and drops the old one", () => {
        const half = migrated();
        const state = fixture();
        const newProvider = byName(half, "default_0_1_0");
        state.deployment.resources.push({ ...newProvider, id: "already-there" });
        const after = migrated(state);
        assert.equal(after.deployment.resources.filter((r) => r.type.startsWith("pulumi:providers:")).length, 1);
        assert.match(byName(after, "spark-a-ssh").provider ?? "", /::already-there$/);
        const order = after.deployment.resources.map((r) => r.urn.split("::").pop());
        assert.ok(order.indexOf("default_0_1_0") < order.indexOf("spark-a-ssh"), order.join(", "));
    });

    it("refuses a state this program did not write: another command type, an explicit command provider", () => {
        const local = fixture();
        local.deployment.resources.push({
            ...byName(local, "spark-a-ssh"),
            urn: "urn:pulumi:dev::spark-cluster::command:local:Command::x",
            type: "command:local:Command",
        });
        assert.throws(() => migrate.migrateState(local, "0.1.0"), migrate.RefusedError);
        const explicit = fixture();
        const provider = byName(explicit, "default_1_2_1");
        provider.urn = provider.urn.replace("default_1_2_1", "mine");
        assert.throws(() => migrate.migrateState(explicit, "0.1.0"), /explicit provider/);
    });

    it("as a command: the migrated state on stdout, exit 3 and nothing on stdout when there is nothing to do", () => {
        const run = (input: string) => spawnSync(process.execPath, [SCRIPT, "0.1.0"], { input, encoding: "utf8" });
        const first = run(fs.readFileSync(FIXTURE, "utf8"));
        assert.equal(first.status, 0, first.stderr);
        assert.match(first.stderr, /2 step\(s\) command:remote:Command -> spark-remote:index:Step/);
        const second = run(first.stdout);
        assert.equal(second.status, 3, second.stderr);
        assert.equal(second.stdout, "");
        const foreign = fixture();
        foreign.deployment.resources.push({ urn: "urn:pulumi:dev::spark-cluster::command:local:Command::x", type: "command:local:Command" });
        const refused = run(JSON.stringify(foreign));
        assert.equal(refused.status, 1);
        assert.match(refused.stderr, /refused: .*command:local:Command/);
    });
});
