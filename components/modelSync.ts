import * as pulumi from "@pulumi/pulumi";
import type * as command from "@pulumi/command";
import type { ModelConfig, NodeConfig } from "../config";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import {
    MODEL_SYNC_LIMITS,
    localModelCheckScript,
    modelCacheRemovalScript,
    modelDownloadScript,
    modelPullScript,
    modelServeRemovalScript,
    modelServeScript,
} from "./render/modelSync";

const TYPE = typeToken("ModelSync");

/**
 * A step on one node, keyed on the model: `triggers` replace it when the repository changes (the
 * delete that goes with the old repository runs for the old one).
 */
function syncStep(
    name: string,
    host: NodeHost,
    args: { create: string; delete?: string; stdin?: pulumi.Input<string>; triggers?: string[] },
    opts: pulumi.CustomResourceOptions,
): command.remote.Command {
    return host.command(name, args, opts);
}

/** A node as the sync sees it: its resolved config, its connection, and the host layers to wait for. */
export interface ModelSyncNode {
    node: NodeConfig;
    host: NodeHost;
    /** The node's host layers (interconnect, NCCL, firewall): the sync runs over the interconnect. */
    hostReady: pulumi.Resource[];
}

export interface ModelSyncArgs {
    /** model.source (a Hugging Face id or an absolute path) and model.removeCacheOnDestroy. */
    model: Pick<ModelConfig, "source" | "removeCacheOnDestroy">;
    /** The head: it downloads and serves. */
    head: ModelSyncNode;
    /** Every other node: each pulls from the head. */
    workers: ModelSyncNode[];
    /** model.source is a directory on the nodes: checked there, nothing synced (config/facts.ts). */
    localModel: boolean;
    /** The secret the workers authenticate to the head's rsync daemon with (config/resolve.ts derives it). */
    syncSecret: pulumi.Input<string>;
    /** Hugging Face token for gated models, handed to the download only. Defaults to none. */
    hfToken?: pulumi.Input<string>;
}

/**
 * The model every vLLM serves, on every node, before any vLLM starts; vLLM then runs with
 * HF_HUB_OFFLINE=1 against the node's own copy.
 *
 * A Hugging Face id (`org/name`) is downloaded once, on the head, and copied to the other nodes
 * over the interconnect:
 *
 * - **download** (head): the runtime's own `hf download` (docker: a throwaway `docker run --rm` of
 *   the node's image with the host's Hugging Face cache mounted; venv: the venv's `bin/hf`) into
 *   `/root/.cache/huggingface/hub/models--ORG--NAME`, the cache vLLM reads. The hfToken secret is
 *   this step's stdin (as it is vllm.env's writer's): it reaches `hf` through the environment
 *   only, never argv, and is replaced in anything printed. The size so far and the tool's last
 *   line show in `up` every 10 s (bounded: 24 h).
 * - **serve** (head): an rsync daemon bound to the head's interconnect address, read-only, for
 *   the duration of the sync only: per worker a module open to that worker's interconnect
 *   addresses alone, authenticated by a secret derived from the API key (stdin, a root-only
 *   file while serving). The firewall already keeps everyone but members off the port. It stops
 *   once every worker reported (an rsync `done-<node>` module it lists after checking its copy),
 *   when a worker does not connect within 10 min, or after the overall bound.
 * - **pull-&lt;node&gt;** (each other node): waits (bounded) for the head to serve, then
 *   `rsync -a --partial-dir` into its own cache: resumable, up to 5 attempts, rsync's overall
 *   progress every 10 s; checks the snapshot vLLM will resolve (refs/main and its config.json).
 *
 * Unchanged detection, three layers: (1) the steps' inputs hold the model id, so a second `up`
 * with the same model runs none of them (the Pulumi engine's diff); (2) when they do run again
 * (a failed earlier run, a changed connection), the head and each worker compare the repository
 * with the manifest they recorded after the last download or pull (every file's size, mtime and
 * link target) and do nothing when it matches, and the head does not wait for a worker it
 * already saw finish this model; (3) rsync itself skips every file already present with the
 * same size and mtime. Changing the model runs everything for the new repository only: other
 * repositories in the cache are never touched.
 *
 * `destroy` (and a model change) removes our records but leaves the model in every node's cache:
 * it is the user's data. `model.removeCacheOnDestroy: true` removes the repository instead (a
 * model change then removes the old one before the new one arrives: delete-before-replace).
 *
 * A local path is served as it is: a read-only check on every node that the directory exists
 * with config.json, failing with a message naming model.source and the node.
 */
export class ModelSync extends pulumi.ComponentResource {
    /** The steps vLLM waits for. */
    public readonly steps: command.remote.Command[];

    constructor(name: string, args: ModelSyncArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const source = args.model.source;
        const nodes = [args.head, ...args.workers];

        if (args.localModel) {
            this.steps = nodes.map((n) =>
                syncStep(
                    `${name}-check-${n.node.name}`,
                    n.host,
                    { create: localModelCheckScript(source, n.node.name) },
                    { parent: this, dependsOn: n.hostReady },
                ),
            );
            this.registerOutputs({});
            return;
        }

        // Replaced (not updated) when the repository changes, the old step's delete first: with
        // model.removeCacheOnDestroy the old repository goes before the new one arrives, and a
        // replaced serve step cannot remove the marks its successor just relied on.
        const keyed = (extra: pulumi.CustomResourceOptions): pulumi.CustomResourceOptions => ({ parent: this, deleteBeforeReplace: true, ...extra });
        const triggers = [source];
        const hours = (seconds: number) => `${Math.ceil(seconds / 3600) + 1}h`;
        const head = args.head;
        const secret = pulumi.secret(args.syncSecret);

        const download = syncStep(
            `${name}-download`,
            head.host,
            {
                create: modelDownloadScript({ repoId: source, node: head.node.name, runtime: head.node.runtime, withToken: args.hfToken !== undefined }),
                delete: modelCacheRemovalScript({ repoId: source, node: head.node.name, remove: args.model.removeCacheOnDestroy === true }),
                ...(args.hfToken !== undefined ? { stdin: pulumi.secret(args.hfToken) } : {}),
                triggers,
            },
            keyed({ dependsOn: head.hostReady, customTimeouts: { create: hours(MODEL_SYNC_LIMITS.download), update: hours(MODEL_SYNC_LIMITS.download) } }),
        );
        const pullTimeout = hours(MODEL_SYNC_LIMITS.pull + MODEL_SYNC_LIMITS.serveStart);
        const steps = [download];
        if (args.workers.length > 0) {
            // Serve and pulls run side by side (both after the download): the head serves until
            // every worker that needed the model reported that it holds it.
            steps.push(
                syncStep(
                    `${name}-serve`,
                    head.host,
                    {
                        create: modelServeScript({
                            repoId: source,
                            node: head.node.name,
                            headIp: head.node.ip,
                            workers: args.workers.map((w) => ({ node: w.node.name, ips: w.node.interconnect.map((i) => i.ip) })),
                        }),
                        delete: modelServeRemovalScript(source),
                        stdin: secret,
                        triggers,
                    },
                    keyed({ dependsOn: [download, ...head.hostReady], customTimeouts: { create: pullTimeout, update: pullTimeout } }),
                ),
            );
        }
        for (const worker of args.workers) {
            steps.push(
                syncStep(
                    `${name}-pull-${worker.node.name}`,
                    worker.host,
                    {
                        create: modelPullScript({ repoId: source, node: worker.node.name, head: head.node.name, headIp: head.node.ip }),
                        delete: modelCacheRemovalScript({ repoId: source, node: worker.node.name, remove: args.model.removeCacheOnDestroy === true }),
                        stdin: secret,
                        triggers,
                    },
                    keyed({ dependsOn: [download, ...worker.hostReady], customTimeouts: { create: pullTimeout, update: pullTimeout } }),
                ),
            );
        }
        this.steps = steps;
        this.registerOutputs({});
    }
}
