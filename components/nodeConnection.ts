// One SSH connection per node, bound with the node's SSH user into a NodeHost:
// every step on the node builds its commands through it, so no step passes the
// connection and the user separately. The first step on every node proves SSH
// works and that we can act as root.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { NodeConfig } from "../config";
import { remoteCommand } from "./render/host/shell";

export type Connection = command.types.input.remote.ConnectionArgs;

/** What a step needs to run scripts on one node: its connection, and its scripts turned into root commands. */
export class NodeHost {
    constructor(
        /** The node's SSH connection (secret: it holds the private key). */
        readonly connection: pulumi.Output<Connection>,
        /** The SSH login user: commands go through `sudo -n` unless it is root. */
        readonly sshUser: string,
    ) {}

    /** The command line that runs `script` as root on this node. */
    asRoot(script: string): string {
        return remoteCommand(script, this.sshUser);
    }

    /** A remote command on this node whose create (and delete) scripts run as root. */
    command(
        name: string,
        args: { create: pulumi.Input<string>; delete?: pulumi.Input<string>; stdin?: pulumi.Input<string>; logging?: "none" },
        opts: pulumi.CustomResourceOptions,
    ): command.remote.Command {
        const asRoot = (script: pulumi.Input<string>) => pulumi.output(script).apply((s) => this.asRoot(s));
        return new command.remote.Command(
            name,
            {
                connection: this.connection,
                create: typeof args.create === "string" ? this.asRoot(args.create) : asRoot(args.create),
                ...(args.delete === undefined ? {} : { delete: typeof args.delete === "string" ? this.asRoot(args.delete) : asRoot(args.delete) }),
                ...(args.stdin === undefined ? {} : { stdin: args.stdin }),
                ...(args.logging === undefined ? {} : { logging: args.logging }),
            },
            opts,
        );
    }
}

/**
 * What a preview puts where the text of a key *file* goes: a preview never reads the file, so it
 * needs neither the key nor the hosts (a CI runner has neither). Nothing runs in a preview.
 */
export const PREVIEW_KEY_PLACEHOLDER = "(spark-cluster: the SSH private key file is not read in a preview)";

/**
 * The input a preview with a placeholder key ignores on every remote.Command (`ignoreChanges`):
 * the engine then diffs the command with the key recorded in its state instead, so a converged
 * stack previews with no change. `up` reads the file and ignores nothing.
 */
export const PREVIEW_IGNORED_KEY_PATH = "connection.privateKey";

/** Set once a connection of this program run holds {@link PREVIEW_KEY_PLACEHOLDER}. */
let placeholderInUse = false;

/**
 * Adds {@link PREVIEW_IGNORED_KEY_PATH} to the `ignoreChanges` of every remote.Command once a
 * placeholder key is in use. Registered on the stack when this module loads, i.e. before any
 * component exists: a component copies the stack's transformations when it is constructed, so
 * one registered later would miss its children. A no-op at `up` (no placeholder is made there).
 */
export function ignorePlaceholderKey(args: pulumi.ResourceTransformationArgs): pulumi.ResourceTransformationResult | undefined {
    if (!placeholderInUse || args.type !== "command:remote:Command") {
        return undefined;
    }
    return { props: args.props, opts: pulumi.mergeOptions(args.opts, { ignoreChanges: [PREVIEW_IGNORED_KEY_PATH] }) };
}
if (pulumi.runtime.getStackResource() !== undefined) {
    pulumi.runtime.registerStackTransformation(ignorePlaceholderKey);
}

/**
 * The node's SSH connection, its private key a Pulumi secret. A key given as a path is read
 * here, on the machine running Pulumi (relative to the project), at `up` only: a preview puts
 * {@link PREVIEW_KEY_PLACEHOLDER} in its place (see {@link ignorePlaceholderKey}). A key given
 * as secret text is used as it is, preview or not.
 */
export function nodeConnection(node: NodeConfig): pulumi.Output<Connection> {
    const key = node.ssh.privateKey;
    let text: string;
    if (key.kind === "secret") {
        text = key.text.reveal();
    } else if (pulumi.runtime.isDryRun()) {
        text = PREVIEW_KEY_PLACEHOLDER;
        placeholderInUse = true;
    } else {
        const file = path.resolve(key.path);
        try {
            text = fs.readFileSync(file, "utf8");
        } catch (err) {
            throw new pulumi.RunError(
                `spark-cluster:sshPrivateKeyPath (node ${node.name}): cannot read ${file}: ${(err as Error).message}. ` +
                    "Point it at an existing SSH private key, e.g. /home/you/.ssh/id_ed25519 (a preview does not read it; up does).",
            );
        }
    }
    return pulumi.secret({
        host: node.ssh.host,
        port: node.ssh.port,
        user: node.ssh.user,
        privateKey: text,
        // Bounded: 20 dials of 10 s each before the step fails.
        dialErrorLimit: 20,
        perDialTimeout: 10,
    });
}
