// The cluster's internal secrets: the Ray token (unless rayAuthToken is set), the model sync's rsync
// secret and Open WebUI's session key. Each is an HMAC of the stack's root secret, a random secret
// drawn once by our provider (spark-remote:index:RandomSecret) and kept encrypted in the state, so
// nothing a client of the API holds computes them. secretsGeneration rotates the root, and with it
// every derived secret (docs/how-it-works.md, "Internal secrets").
import { createHmac } from "node:crypto";

/** What each derived secret is for: the text the root secret is HMAC'd over. */
export const SECRET_PURPOSES = {
    rayAuthToken: "spark-cluster ray auth token",
    modelSync: (source: string) => `spark-cluster model sync: ${source}`,
    openWebuiSessionKey: "spark-cluster open webui session key",
} as const;

/** A secret derived from the root: HMAC-SHA256 of `purpose` keyed by it, in hex (64 characters). The one place derived secrets are made. */
export function deriveSecret(root: string, purpose: string): string {
    return createHmac("sha256", root).update(purpose).digest("hex");
}
