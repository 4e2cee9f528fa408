// The rules about secrets that the schema cannot express: secret keys must be
// set with --secret, and exactly one cluster-wide SSH key source.
import { ConfigIssue, describeSecret, describeValue } from "./issues";
import { CONFIG_NAMESPACE } from "./namespace";
import { SECRET_KEYS } from "./secret";
import { exampleFor, valueAt } from "./zodIssues";

/**
 * Secrets must be set with `--secret`: a secret key present in the config but missing from
 * `secretKeys` sits in plaintext in the stack file.
 */
export function checkSecretsAreSecret(values: Readonly<Record<string, unknown>>, secretKeys: ReadonlySet<string>): ConfigIssue[] {
    return SECRET_KEYS.filter((key) => values[key] !== undefined && !secretKeys.has(key)).map((key) => ({
        path: key,
        message: "was set without --secret, so it sits in plaintext in the stack file; set it again as a secret (and rotate it if that file was shared)",
        got: describeSecret(values[key]),
        example: exampleFor([key]),
    }));
}

/**
 * Exactly one cluster-wide SSH key source: `sshPrivateKey` (secret text) or `sshPrivateKeyPath`
 * (a file). Neither is needed when every node names its own ssh.privateKeyPath.
 */
export function checkSshKeySource(values: Readonly<Record<string, unknown>>): ConfigIssue[] {
    const hasText = values["sshPrivateKey"] !== undefined;
    const hasPath = values["sshPrivateKeyPath"] !== undefined;
    if (hasText && hasPath) {
        return [
            {
                path: "sshPrivateKeyPath",
                message: `and ${CONFIG_NAMESPACE}:sshPrivateKey are both set; give exactly one of them`,
                got: describeValue(values["sshPrivateKeyPath"]),
                example: `pulumi config rm ${CONFIG_NAMESPACE}:sshPrivateKeyPath`,
            },
        ];
    }
    const nodes = values["nodes"];
    const everyNodeHasKey = Array.isArray(nodes) && nodes.length > 0 && nodes.every((node) => typeof valueAt(node, ["ssh", "privateKeyPath"]) === "string");
    if (!hasText && !hasPath && !everyNodeHasKey) {
        return [
            {
                path: "sshPrivateKey",
                message: `is missing: set exactly one of ${CONFIG_NAMESPACE}:sshPrivateKey (the key text, as a secret) or ${CONFIG_NAMESPACE}:sshPrivateKeyPath (a key file)`,
                got: "nothing",
                example: exampleFor(["sshPrivateKey"]),
            },
        ];
    }
    return [];
}

// ---------------------------------------------------------------------------------------------
// Phase 2: cross-field rules (each pure, each exported, each table-tested)
