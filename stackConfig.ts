// Reads this stack's `spark-cluster:*` configuration from the Pulumi runtime
// into the plain form that config.ts validates. The only place that knows how
// Pulumi hands configuration to a program.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, RawConfig, decodeConfigValue, setRawValue } from "./config";

// `isConfigSecret` is part of the SDK's runtime but missing from its typings.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const runtimeConfig = require("@pulumi/pulumi/runtime/config") as { isConfigSecret(key: string): boolean };

/** Every key under the project's namespace, structured values decoded, and which are secrets. */
export function readStackConfig(): RawConfig {
    const prefix = `${CONFIG_NAMESPACE}:`;
    const values: Record<string, unknown> = {};
    const secretKeys = new Set<string>();
    for (const [fullKey, text] of Object.entries(pulumi.runtime.allConfig())) {
        if (!fullKey.startsWith(prefix)) {
            continue;
        }
        const key = fullKey.slice(prefix.length);
        setRawValue(values, key, decodeConfigValue(text));
        if (runtimeConfig.isConfigSecret(fullKey)) {
            secretKeys.add(key);
        }
    }
    return { values, secretKeys, modelConfigJson: localModelConfig(values["model"]) };
}

/**
 * A local model directory's config.json, for the fit check, when model.source is an absolute path
 * that exists on the machine running Pulumi too (it must exist on every node to be served).
 */
function localModelConfig(model: unknown): unknown {
    const source = typeof model === "object" && model !== null ? (model as Record<string, unknown>)["source"] : undefined;
    if (typeof source !== "string" || !source.startsWith("/")) {
        return undefined;
    }
    try {
        return JSON.parse(fs.readFileSync(path.join(source, "config.json"), "utf8")) as unknown;
    } catch {
        return undefined; // not here, or not JSON: the fit check says it skipped
    }
}
