// The program's reader of the stack's keys (stackConfig.ts), under Pulumi's own config runtime:
// structured values decoded, secrets marked, other namespaces left out, and a top-level key named
// `__proto__` kept as a key, so that the parser refuses it by name (issue 40) instead of it
// becoming the prototype of the values, past every check.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, parseConfig } from "../../config";

describe("readStackConfig: the stack's spark-cluster:* keys as the program reads them", () => {
    it("decodes, marks secrets, and keeps spark-cluster:__proto__ a key that the parser refuses by name", async () => {
        await pulumi.runtime.setMocks(
            {
                newResource: (args: pulumi.runtime.MockResourceArgs) => ({ id: `${args.name}-id`, state: {} }),
                call: () => ({}),
            },
            "spark-cluster",
            "dev",
            true,
        );
        pulumi.runtime.setAllConfig(
            {
                "spark-cluster:__proto__": '{"model":{"source":"lab/tiny-chat"}}',
                "spark-cluster:model": '{"source":"lab/tiny-chat"}',
                "spark-cluster:apiKey": "sk-mocked-0123456789",
                "aws:region": "us-east-1",
            },
            ["spark-cluster:apiKey"],
        );
        const { readStackConfig } = await import("../../stackConfig");
        const raw = readStackConfig();
        assert.equal(Object.getPrototypeOf(raw.values), Object.prototype, "the prototype is untouched");
        assert.deepEqual(Object.keys(raw.values).sort(), ["__proto__", "apiKey", "model"]);
        assert.deepEqual(raw.values["model"], { source: "lab/tiny-chat" });
        assert.deepEqual([...raw.secretKeys], ["apiKey"]);
        assert.throws(
            () => parseConfig(raw),
            (err: unknown) => err instanceof ConfigError && err.issues.some((i) => i.path === "__proto__" && /reserves for the prototype/.test(i.message)),
        );
    });
});
