// What the error of a step says when its node cannot be reached over SSH: which node, and what to
// do next. Our provider adds it to its connection error (connection.unreachableHint), for
// `up` as for `destroy`.
import { CONFIG_NAMESPACE } from "../../config/namespace";

export interface UnreachableNode {
    name: string;
    ssh: { host: string; port: number; user: string };
}

/** The text after "failed to connect to host …": the node, and the three ways on. */
export function unreachableHint(node: UnreachableNode): string {
    const target = `${node.ssh.user}@${node.ssh.host}:${node.ssh.port}`;
    return [
        `spark-cluster: node ${node.name} (${target}) could not be reached over SSH. What to do next:`,
        `  - down for now: bring it back (power, cable, sshd) and run again, or run \`pulumi up --continue-on-error\` ` +
            `(or \`pulumi destroy --continue-on-error\`) to go on with the other nodes and leave ${node.name}'s steps for later;`,
        `  - gone for good: set \`retired: true\` on the node named ${node.name} in ${CONFIG_NAMESPACE}:nodes, then \`pulumi up\` ` +
            `(or \`pulumi destroy --run-program\`): nothing runs on it any more and its resources leave the stack;`,
        `  - moved: correct its ssh.host / ssh.port in ${CONFIG_NAMESPACE}:nodes.`,
    ].join("\n");
}
