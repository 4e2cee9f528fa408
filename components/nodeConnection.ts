// One SSH connection per node, bound with the node's SSH user into a NodeHost:
// every step on the node builds its commands through it, so no step passes the
// connection and the user separately. The first step on every node proves SSH
// works and that we can act as root.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { NodeConfig } from "../config";
import { bashScript, remoteCommand } from "./render/host/shell";

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
 * The node's SSH connection, its private key a Pulumi secret. A key given as a
 * path is read here, on the machine running Pulumi (relative to the project).
 */
export function nodeConnection(node: NodeConfig): pulumi.Output<Connection> {
    const key = node.ssh.privateKey;
    let text: string;
    if (key.kind === "secret") {
        text = key.text.reveal();
    } else {
        const file = path.resolve(key.path);
        try {
            text = fs.readFileSync(file, "utf8");
        } catch (err) {
            throw new pulumi.RunError(
                `spark-cluster:sshPrivateKeyPath (node ${node.name}): cannot read ${file}: ${(err as Error).message}. ` +
                    "Point it at an existing SSH private key, e.g. /home/you/.ssh/id_ed25519.",
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

/** The check every other step of a node depends on: SSH answers and we can act as root (directly or by passwordless sudo). */
export const SSH_READY_SCRIPT = bashScript([`[ "$(id -u)" = 0 ] || { echo "need root (or passwordless sudo)"; exit 1; }`, `echo "ssh ok: $(hostname)"`]);
