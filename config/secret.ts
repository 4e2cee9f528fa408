// Secrets in the parsed config: which keys are secret, and the wrapper that
// keeps a secret's plaintext out of every string, JSON and log it meets.
import { inspect } from "node:util";

/** Top-level keys whose values are secrets: they must be set with `pulumi config set --secret`. */
export const SECRET_KEYS = ["sshPrivateKey", "sudoPassword", "apiKey", "hfToken", "rayAuthToken", "openWebuiAdminPassword"] as const;
export type SecretKey = (typeof SECRET_KEYS)[number];

const REDACTED = "[secret]";

/**
 * A secret string. It prints as `[secret]` everywhere (string conversion, JSON, `console.log`,
 * `util.inspect`); the plaintext is only reachable through {@link SecretString.reveal}, so a
 * call site that needs it is easy to find and review.
 */
export class SecretString {
    readonly #value: string;

    constructor(value: string) {
        this.#value = value;
    }

    /** The plaintext. Pass it on only to something that keeps it secret (e.g. `pulumi.secret`). */
    reveal(): string {
        return this.#value;
    }

    toString(): string {
        return REDACTED;
    }

    toJSON(): string {
        return REDACTED;
    }

    [inspect.custom](): string {
        return REDACTED;
    }
}
