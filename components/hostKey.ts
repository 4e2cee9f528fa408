// SSH host keys: every later command of a node checks the key it is presented
// against the node's pin: nodes[].ssh.hostKey when configured, else the key the
// node presented in the SSH step's handshake on first contact (the provider
// records it, presentedHostKey, and checks it on the step's own later runs, on a
// changed host, port or user as well). The SSH step also prints the keys the node
// has. The check itself is the provider's (connection.hostKey): a changed key
// fails the command before it runs anything, and is not retried.
import { createHash } from "node:crypto";
import { SUDO_STDIN_MARKER, bashScript } from "./render/host/shell";

/** The line of the SSH step's output that carries a host key. */
export const HOST_KEY_PREFIX = "host-key=";

/**
 * Proves SSH works and that we can act as root (directly or by passwordless sudo), and prints the
 * node's host public keys, ed25519 first: the order the provider negotiates them in on first
 * contact, so the first printed is the one the handshake presented.
 */
export const SSH_READY_SCRIPT = bashScript([
    `[ "$(id -u)" = 0 ] || { echo "need root (or passwordless sudo)"; exit 1; }`,
    `echo "ssh ok: $(hostname)"`,
    `for key in /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ecdsa_key.pub /etc/ssh/ssh_host_rsa_key.pub; do`,
    `  if [ -r "$key" ]; then echo "${HOST_KEY_PREFIX}$(cut -d' ' -f1,2 "$key")"; fi`,
    `done`,
]);

/** The line of the SSH step's output (a login other than root) that says how it becomes root. */
export const ROOT_ACCESS_PREFIX = "root-access=";

const HOST_KEY_LINES = [
    `for key in /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ecdsa_key.pub /etc/ssh/ssh_host_rsa_key.pub; do`,
    `  if [ -r "$key" ]; then echo "${HOST_KEY_PREFIX}$(cut -d' ' -f1,2 "$key")"; fi`,
    `done`,
];

/**
 * The SSH step of a node that logs in as another user than root (DGX OS's admin user): runs as that
 * user, proves it can become root (passwordless sudo, or sudo with the password the provider puts
 * on stdin, before the marker line: config sudoPassword), says which, and prints the host keys. A
 * user that cannot become root fails here, naming the fix, before anything else runs on the node.
 */
export const SSH_LOGIN_SCRIPT = bashScript([
    `echo "ssh ok: $(hostname) as $(id -un)"`,
    // The sudo password and the marker line, when the connection has one (nothing to read otherwise).
    `pw=; IFS= read -r pw || true; [ "$pw" = ${SUDO_STDIN_MARKER} ] && pw=`,
    `while [ -n "$pw" ] && IFS= read -r line && [ "$line" != ${SUDO_STDIN_MARKER} ]; do :; done`,
    `if [ "$(id -u)" = 0 ]; then`,
    `  echo "${ROOT_ACCESS_PREFIX}root"`,
    `elif why=$(sudo -n true 2>&1); then`,
    `  echo "${ROOT_ACCESS_PREFIX}sudo without a password"`,
    `elif [ -n "$pw" ]; then`,
    `  if printf '%s\n' "$pw" | sudo -k -S -p '' true 2>/dev/null; then`,
    `    echo "${ROOT_ACCESS_PREFIX}sudo with its password (spark-cluster:sudoPassword)"`,
    `  else`,
    `    echo "spark-cluster: sudo refused the password in spark-cluster:sudoPassword for $(id -un) on $(hostname). Fix: pulumi config set --secret spark-cluster:sudoPassword (the sudo password of $(id -un))" >&2`,
    `    exit 1`,
    `  fi`,
    `else`,
    `  echo "spark-cluster: $(id -un) on $(hostname) cannot become root without a password (sudo: $why). Fix: pulumi config set --secret spark-cluster:sudoPassword (the sudo password of $(id -un)), or give $(id -un) passwordless sudo, or log in as root (nodes[].ssh.user)" >&2`,
    `  exit 1`,
    `fi`,
    ...HOST_KEY_LINES,
]);

/** How the SSH step found the login user becomes root (`root`, `sudo without a password`, ...), or undefined (a root login's step does not say). */
export function parseRootAccess(output: string): string | undefined {
    const line = output.split("\n").find((l) => l.startsWith(ROOT_ACCESS_PREFIX));
    return line === undefined ? undefined : line.slice(ROOT_ACCESS_PREFIX.length).trim();
}

/** The first host key the SSH step's output printed (ed25519 where the node has one). */
export function recordedHostKey(output: string): string | undefined {
    const line = output.split("\n").find((l) => l.startsWith(HOST_KEY_PREFIX));
    return line === undefined ? undefined : line.slice(HOST_KEY_PREFIX.length).trim();
}

/** What is known of a node's host key when its later steps are pinned. */
export interface KnownHostKeys {
    /** nodes[].ssh.hostKey. */
    configured?: string;
    /** The SSH step's `presentedHostKey`: the key its handshake presented (undefined until it ran with this provider). */
    presented?: string;
    /** The SSH step's stdout, with the keys it printed. */
    sshOutput?: string;
}

/**
 * The key a node's later steps are pinned to: the configured one, else the one the SSH step's
 * handshake presented, else (a stack deployed before the provider recorded it, whose SSH step
 * has not run since) the first one it printed, which is the key those steps were pinned to then.
 * Undefined when none is known: the steps must not run unpinned ({@link noHostKeyMessage}).
 */
export function hostKeyToPin(known: KnownHostKeys): string | undefined {
    const given = (key: string | undefined) => (key !== undefined && key.trim() !== "" ? key : undefined);
    return given(known.configured) ?? given(known.presented) ?? given(recordedHostKey(known.sshOutput ?? ""));
}

/** Why a node's steps do not run when no host key is known for it, and the fix. */
export function noHostKeyMessage(node: string): string {
    return (
        `spark-cluster: no SSH host key is known for node ${node}: its SSH step neither recorded the key the node presented nor printed one, ` +
        `and its other steps do not run on a host they cannot check. Fix: set nodes[].ssh.hostKey for ${node} to the node's public key ` +
        `(on the node's console: cat /etc/ssh/ssh_host_ed25519_key.pub; docs/how-it-works.md, "SSH host keys")`
    );
}

/** `SHA256:…`, as `ssh-keygen -lf` and ssh print it, of a public key line. */
export function hostKeyFingerprint(publicKey: string): string {
    const blob = Buffer.from(publicKey.trim().split(/\s+/)[1] ?? "", "base64");
    return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}
