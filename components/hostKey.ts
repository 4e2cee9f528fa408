// SSH host keys: the node's SSH step prints the keys the node has, and every
// later command of the node checks the key it is presented against the pinned
// one (configured, or recorded on first contact). The check itself is the
// provider's (connection.hostKey): a changed key fails the command
// before it runs anything, and is not retried.
import { createHash } from "node:crypto";
import { bashScript } from "./render/host/shell";

/** The line of the SSH step's output that carries a host key. */
export const HOST_KEY_PREFIX = "host-key=";

/**
 * Proves SSH works and that we can act as root (directly or by passwordless sudo), and prints the
 * node's host public keys, ed25519 first: what the SSH client negotiated on first contact.
 */
export const SSH_READY_SCRIPT = bashScript([
    `[ "$(id -u)" = 0 ] || { echo "need root (or passwordless sudo)"; exit 1; }`,
    `echo "ssh ok: $(hostname)"`,
    `for key in /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ecdsa_key.pub /etc/ssh/ssh_host_rsa_key.pub; do`,
    `  if [ -r "$key" ]; then echo "${HOST_KEY_PREFIX}$(cut -d' ' -f1,2 "$key")"; fi`,
    `done`,
]);

/** The host key to pin from the SSH step's output: the first one it printed (ed25519 where the node has one). */
export function recordedHostKey(output: string): string | undefined {
    const line = output.split("\n").find((l) => l.startsWith(HOST_KEY_PREFIX));
    return line === undefined ? undefined : line.slice(HOST_KEY_PREFIX.length).trim();
}

/** `SHA256:…`, as `ssh-keygen -lf` and ssh print it, of a public key line. */
export function hostKeyFingerprint(publicKey: string): string {
    const blob = Buffer.from(publicKey.trim().split(/\s+/)[1] ?? "", "base64");
    return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}
