// Our provider's SDK (components/sparkRemote.ts) against the schema its plugin serves (GetSchema,
// through the project's CLI: `pulumi package get-schema`): the package, version and type token, every
// input and output of a Step, the connection's properties and the logging values. The SDK is
// written by hand against the schema; this is what keeps the two the same.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import {
    CONNECTION_KEYS,
    LOGGING,
    PACKAGE,
    RANDOM_SECRET_INPUTS,
    RANDOM_SECRET_OUTPUTS,
    RANDOM_SECRET_TYPE,
    STEP_INPUTS,
    STEP_OUTPUTS,
    STEP_TYPE,
    VERSION,
} from "../../components/sparkRemote";

const root = path.resolve(__dirname, "..", "..", "..");

interface Schema {
    name: string;
    version: string;
    resources: Record<
        string,
        {
            inputProperties: Record<string, { secret?: boolean; replaceOnChanges?: boolean }>;
            properties: Record<string, { secret?: boolean }>;
            requiredInputs?: string[];
            required: string[];
        }
    >;
    types: Record<string, { properties?: Record<string, unknown>; enum?: { value: string }[] }>;
}

function servedSchema(): Schema {
    const out = execFileSync("bash", ["-c", `source scripts/env.sh && pulumi package get-schema ${PACKAGE}@${VERSION}`], { cwd: root, encoding: "utf8" });
    return JSON.parse(out) as Schema;
}

const sorted = (keys: Iterable<string>) => [...keys].sort();

describe("the spark-remote SDK against its plugin's schema", () => {
    const schema = servedSchema();
    const step = schema.resources[STEP_TYPE];

    it("is package spark-remote at the SDK's version, with the SDK's two resources, Step and RandomSecret", () => {
        assert.equal(schema.name, PACKAGE);
        assert.equal(schema.version, VERSION);
        assert.deepEqual(sorted(Object.keys(schema.resources)), sorted([STEP_TYPE, RANDOM_SECRET_TYPE]));
        assert.doesNotMatch(JSON.stringify(schema), /command:/, "no type of Pulumi's command package");
    });

    it("a Step's inputs and outputs are the SDK's; the scripts and the connection are inputs only", () => {
        assert.deepEqual(sorted(Object.keys(step.inputProperties)), sorted(STEP_INPUTS));
        assert.deepEqual(sorted(Object.keys(step.properties)), sorted(STEP_OUTPUTS));
        assert.deepEqual(step.requiredInputs, ["connection"]);
        assert.equal(step.inputProperties.connection.secret, true, "the SDK makes the connection secret");
        for (const key of ["create", "update", "delete", "read", "connection"]) {
            assert.ok(!(key in step.properties), `${key} is not in the state`);
        }
    });

    it("a RandomSecret's inputs and outputs are the SDK's: each input replaces it, the value is secret", () => {
        const secret = schema.resources[RANDOM_SECRET_TYPE];
        assert.deepEqual(sorted(Object.keys(secret.inputProperties)), sorted(RANDOM_SECRET_INPUTS));
        assert.deepEqual(sorted(Object.keys(secret.properties)), sorted(RANDOM_SECRET_OUTPUTS));
        for (const input of RANDOM_SECRET_INPUTS) assert.equal(secret.inputProperties[input].replaceOnChanges, true, input);
        assert.equal(secret.properties.value.secret, true);
    });

    it("the connection's properties and the logging values are the SDK's", () => {
        assert.deepEqual(sorted(Object.keys(schema.types[`${PACKAGE}:index:Connection`].properties ?? {})), sorted(CONNECTION_KEYS));
        assert.deepEqual(
            sorted(Object.keys(schema.types[`${PACKAGE}:index:ProxyConnection`].properties ?? {})),
            sorted(CONNECTION_KEYS.filter((key) => key !== "proxy" && key !== "sudoPassword")),
        );
        assert.deepEqual(sorted((schema.types[`${PACKAGE}:index:Logging`].enum ?? []).map((e) => e.value)), sorted(LOGGING));
    });
});
