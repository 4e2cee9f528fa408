// Entry point: parse the stack's config once, then (as later components land)
// build the cluster from it, and export what a user needs to reach it.
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, parseConfig } from "./config";
import { clusterSummary } from "./components/render/clusterSummary";
import { readStackConfig } from "./stackConfig";

function loadConfig() {
    try {
        return parseConfig(readStackConfig());
    } catch (err) {
        if (err instanceof ConfigError) {
            // RunError prints the message alone: every problem, with its key and a fix.
            throw new pulumi.RunError(`invalid stack configuration:\n${err.message}`);
        }
        throw err;
    }
}

const config = loadConfig();

/** What this stack describes: nodes, transport, model and parallelism. No secrets. */
export const cluster = clusterSummary(config);
