// Building blocks the schema files share: formats and small zod helpers.
import { z } from "zod";
import { isHostOrIpv4 } from "./ipv4";
import { CONFIG_NAMESPACE } from "./namespace";

export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const IFNAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;
/**
 * A docker image reference (docker's reference grammar, distribution/reference): lowercase path
 * components, an optional registry (a first component with a `.` or a `:port`, or `localhost`;
 * its labels cannot start or end with `-`), tag and digest. It cannot start with `-`, so it can
 * never be read as a docker option.
 */
export const IMAGE_REFERENCE =
    /^(?:(?:localhost|[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)+)(?::[0-9]+)?\/|[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?:[0-9]+\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
/**
 * A secret's text: printable ASCII, spaces included, but no control characters (an env file holds
 * one variable per line), nothing outside ASCII (an HTTP header carries it: clients send UTF-8,
 * servers read latin-1) and no space at either end (HTTP drops it from a header, so the key a
 * client sends would differ from the one configured).
 */
export const SECRET_TEXT = /^(?! )(?!.* $)[\x20-\x7e]+$/;
/** Text that is a private key rather than a path to one. */
export const PRIVATE_KEY_TEXT = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/;

// zod helpers: each returns a fresh schema so defaults and refinements never leak between keys.
export const port = () => z.int().min(1).max(65535);
export const hostOrIpv4 = () =>
    z.string().refine(isHostOrIpv4, {
        error: "must be an IPv4 address or a hostname (no user@, no :port, no scheme)",
    });
export const keyFilePath = () =>
    z
        .string()
        .min(1)
        .refine((p) => !p.startsWith("~"), {
            error: "starts with ~, which is not expanded; write the full path",
        })
        .refine((p) => !PRIVATE_KEY_TEXT.test(p), {
            error: `holds key text, not a path; put key text in ${CONFIG_NAMESPACE}:sshPrivateKey, as a secret`,
        });
