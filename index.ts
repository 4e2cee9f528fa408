// Entry point: parse the stack's config once, build the cluster from it, and
// export what a user needs to reach it.
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, parseConfig } from "./config";
import { clusterSummary } from "./components/clusterSummary";
import { SparkCluster } from "./components/sparkCluster";
import { tryItCommand } from "./components/render/tryIt";
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
const sparkCluster = new SparkCluster(pulumi.getStack(), { config });

/** What this stack describes: nodes, transport, model and parallelism. No secrets. */
export const cluster = clusterSummary(config);
/** Will the model fit: the planner's per-node estimate, or why it was not checked (model.size). */
export const fit = config.fit;
/** OpenAI-compatible base URL; send `Authorization: Bearer <apiKey>`. */
export const endpoint = sparkCluster.endpoint;
export const servedModel = sparkCluster.servedModel;
export const transport = sparkCluster.transport;
export const roce = sparkCluster.roce;
export const links = sparkCluster.links;
/** The NCCL check per node: bus bandwidth over the transport NCCL used, against the pass mark. */
export const ncclCheck = sparkCluster.ncclCheck;
/** The SSH host key each node is pinned to: every command checks it (nodes[].ssh.hostKey, or recorded on first contact). */
export const hostKeys = sparkCluster.hostKeys;
/** Firewall per node: only the cluster's nodes reach its internal ports; what is open to all. */
export const firewall = sparkCluster.firewall;
/** Ray per node: version and token authentication (ray executor), or why Ray is not used. */
export const ray = sparkCluster.ray;
/** vLLM per node: the version in its runtime (and the image's ID), checked against what we render before anything changes. */
export const vllm = sparkCluster.vllm;
/** The model sync per node: what the last sync did there (each other node: the bytes it pulled from the head, the time, the rate and the streams). */
export const modelSync = sparkCluster.modelSync;
/** How to reach the Ray dashboard (bound to the head's loopback by default). */
export const rayDashboard = sparkCluster.dashboard;
/** Open WebUI (frontend.openWebui): the SSH tunnel to its page on the head's loopback, or its URL. */
export const openWebui = sparkCluster.openWebui;
/** Prometheus (metrics.enabled): the SSH tunnel to it on the head's loopback. */
export const metrics = sparkCluster.metrics;
/**
 * Try it: a curl line to paste into bash, every value quoted. The API key stays in config and is read
 * when the line runs (`./scripts/pulumi.sh … config get spark-cluster:apiKey`, which finds a stack under stacks/ itself).
 */
export const tryIt = tryItCommand({
    endpoint: sparkCluster.endpoint,
    servedModel: sparkCluster.servedModel,
    stack: pulumi.getStack(),
});
