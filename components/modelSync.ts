import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import type { ModelConfig, NodeConfig } from "../config";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { ModelSyncNodeSpec, modelSyncPlan } from "./render/modelSync";

const TYPE = typeToken("ModelSync");

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
    /**
     * The secret the workers authenticate to the head's rsync daemon with (components/clusterSecrets.ts
     * derives it); called only when a step carries it (workers pulling a model).
     */
    syncSecret: () => pulumi.Input<string>;
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
 *   addresses alone, authenticated by a secret derived from the stack's root secret (stdin, a root-only
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
    public readonly steps: sparkRemote.Step[];

    constructor(name: string, args: ModelSyncArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const nodes = [args.head, ...args.workers];
        const specOf = (n: ModelSyncNode): ModelSyncNodeSpec => ({
            node: n.node.name,
            ip: n.node.ip,
            ips: n.node.interconnect.map((i) => i.ip),
            runtime: n.node.runtime,
        });
        const plan = modelSyncPlan({
            source: args.model.source,
            localModel: args.localModel,
            removeCacheOnDestroy: args.model.removeCacheOnDestroy === true,
            withToken: args.hfToken !== undefined,
            head: specOf(args.head),
            workers: args.workers.map(specOf),
        });
        const stdin = {
            hfToken: () => (args.hfToken === undefined ? undefined : pulumi.secret(args.hfToken)),
            syncSecret: () => pulumi.secret(args.syncSecret()),
        };
        // A keyed step is replaced (not updated) when the repository changes, the old step's delete
        // first: with model.removeCacheOnDestroy the old repository goes before the new one arrives,
        // and a replaced serve step cannot remove the marks its successor just relied on.
        const made = new Map<string, sparkRemote.Step>();
        for (const step of plan) {
            const n = nodes.find((candidate) => candidate.node.name === step.node);
            if (n === undefined) throw new pulumi.ResourceError(`internal: the model sync plans a step on ${step.node}, which is not a node`, this);
            const after = step.after.map((before) => {
                const found = made.get(before);
                if (found === undefined)
                    throw new pulumi.ResourceError(`internal: the model sync step ${step.name} runs after ${before}, not planned before it`, this);
                return found;
            });
            const command = n.host.command(
                `${name}-${step.name}`,
                {
                    create: step.create,
                    ...(step.delete === undefined ? {} : { delete: step.delete }),
                    ...(step.stdin === undefined ? {} : { stdin: stdin[step.stdin]() }),
                    ...(step.keyed ? { triggers: [args.model.source] } : {}),
                },
                {
                    parent: this,
                    ...(step.keyed ? { deleteBeforeReplace: true } : {}),
                    dependsOn: [...after, ...n.hostReady],
                    ...(step.timeout === undefined ? {} : { customTimeouts: { create: step.timeout, update: step.timeout } }),
                },
            );
            made.set(step.name, command);
        }
        this.steps = [...made.values()];
        this.registerOutputs({});
    }
}
