// One SSH connection per node, and the first step on every node: wait until
// SSH answers and we can act as root. Every other step of the node depends on it.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { NodeConfig } from "../config";
import { bashScript, remoteCommand } from "./render/shell";

export type Connection = command.types.input.remote.ConnectionArgs;

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

/** Proves SSH works and that we can act as root (directly or by passwordless sudo). */
export function sshReadyCommand(
    name: string,
    node: NodeConfig,
    connection: pulumi.Input<Connection>,
    parent: pulumi.Resource,
): command.remote.Command {
    return new command.remote.Command(
        `${name}-ssh`,
        {
            connection,
            create: remoteCommand(bashScript([`[ "$(id -u)" = 0 ] || { echo "need root (or passwordless sudo)"; exit 1; }`, `echo "ssh ok: $(hostname)"`]), node.ssh.user),
        },
        { parent },
    );
}
