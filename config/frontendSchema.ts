/**
 * The optional chat front end: `frontend.openWebui`, Open WebUI on the head, talking to the
 * cluster's own OpenAI-compatible endpoint. Off by default: a stack without it registers nothing
 * new. The facts each setting relies on are Open WebUI 0.12.4's own source (docs/open-webui.md).
 */
import { z } from "zod";
import { CONFIG_NAMESPACE } from "./namespace";
import { IMAGE_REFERENCE, port } from "./schemaFields";

/** The Open WebUI release the project renders for and the lab runs (PyPI `open-webui`). */
export const OPEN_WEBUI_VERSION = "0.12.4";
/** Open WebUI's own image of that release (ghcr.io, tag `v<version>`). */
export const DEFAULT_OPEN_WEBUI_IMAGE = `ghcr.io/open-webui/open-webui:v${OPEN_WEBUI_VERSION}`;
/** Where the venv runtime installs Open WebUI on the head. */
export const DEFAULT_OPEN_WEBUI_VENV = "/opt/spark-cluster-open-webui";
/** Open WebUI's data (its SQLite database, uploads, the vector store): kept across `up`. */
export const DEFAULT_OPEN_WEBUI_DATA_DIR = "/var/lib/spark-cluster-open-webui";
/** The system's own directories, where Open WebUI's data directory may not be. */
const SYSTEM_DIRS: readonly string[] = ["/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr"];

// These paths reach bash (the install and data steps' messages), systemd (ExecStart=, where `%` is a
// specifier, and WorkingDirectory=) and docker's `-v SRC:DST` (split at `:`): only characters none
// of them reads specially (the sinks property test found a backquote run by bash and `%n`
// expanded by systemd). Linux limits a path's parts to 255 bytes.
const absolutePath = () =>
    z
        .string()
        .regex(/^\/[A-Za-z0-9_@+=,./-]*$/, {
            error: "must be an absolute path of ASCII letters, digits and _ @ + = , . / - only (bash and systemd read other characters, e.g. ` or %, specially)",
        })
        .max(4000)
        .refine((path) => path.split("/").every((part) => Buffer.byteLength(part, "utf8") <= 255), { error: "has a directory name longer than 255 bytes" })
        .refine((path) => !path.split("/").some((part) => part === ".." || part === "."), { error: "must not contain . or .. parts" })
        .refine((path) => path.replace(/\/+$/, "").split("/").filter(Boolean).length >= 2, {
            error: "must be at least two directories deep (e.g. /var/lib/NAME): destroy may remove it",
        });

/** Open WebUI in a container of its own image (where the head runs docker). */
export const OpenWebuiDockerSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("docker").meta({ example: "docker (or venv)" }),
    /** Open WebUI's image. Defaults to "ghcr.io/open-webui/open-webui:v0.12.4". */
    image: z
        .string()
        .max(255)
        .regex(IMAGE_REFERENCE, { error: "must be an image reference like registry/name:tag (lowercase name; it cannot start with -)" })
        .default(DEFAULT_OPEN_WEBUI_IMAGE)
        .meta({ example: DEFAULT_OPEN_WEBUI_IMAGE }),
});

/** Open WebUI from PyPI in a venv of its own on the head, installed by `up` (`pip install open-webui==version`). */
export const OpenWebuiVenvSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("venv").meta({ example: "docker (or venv)" }),
    /** The venv's directory; `up` creates it with the head's python3 (3.11 or 3.12). Defaults to "/opt/spark-cluster-open-webui". */
    path: absolutePath().default(DEFAULT_OPEN_WEBUI_VENV).meta({ example: DEFAULT_OPEN_WEBUI_VENV }),
    /**
     * Where pip finds the packages: a directory on the head holding every wheel (`pip install
     * --no-index --find-links DIR`), for a head without internet access. Defaults to PyPI.
     */
    wheelhouse: absolutePath().optional().meta({ example: "/srv/wheelhouse/open-webui-0.12.4" }),
});

/** Open WebUI: a chat page in front of the cluster's endpoint, on the head. */
export const OpenWebuiSchema = z.strictObject({
    /** Run it. Defaults to false. */
    enabled: z.boolean().default(false).meta({ example: "true" }),
    /** How the head runs it. Defaults to docker (its own image) where the head runs docker, else a venv. */
    runtime: z
        .discriminatedUnion("kind", [OpenWebuiDockerSchema, OpenWebuiVenvSchema])
        .optional()
        .meta({ example: `{ kind: docker, image: ${DEFAULT_OPEN_WEBUI_IMAGE} } (or { kind: venv })` }),
    /** Open WebUI's version (PyPI `open-webui`) for the venv runtime. Defaults to "0.12.4". */
    version: z
        .string()
        .regex(/^[0-9]+\.[0-9]+\.[0-9]+$/, { error: "must be a release like 0.12.4" })
        .default(OPEN_WEBUI_VERSION)
        .meta({ example: OPEN_WEBUI_VERSION }),
    /**
     * The address it listens on. Loopback keeps it on the head (the `openWebui` output gives the
     * SSH tunnel); any other address opens `port` in the firewall to everyone. Defaults to "127.0.0.1".
     */
    listenAddress: z.ipv4({ error: "must be an IPv4 address, e.g. 127.0.0.1 or 0.0.0.0" }).default("127.0.0.1").meta({ example: "127.0.0.1" }),
    /** The port it listens on. Defaults to 8080 (Open WebUI's own). */
    port: port().default(8080).meta({ example: "8080" }),
    /** The admin account's email, created on the first start (the password is the secret openWebuiAdminPassword). Required when enabled. */
    adminEmail: z
        .email({ error: "must be an email address (it is the admin's login), e.g. admin@example.com" })
        .max(254)
        .optional()
        .meta({ example: "admin@example.com" }),
    /** The admin account's display name. Defaults to "Admin". */
    adminName: z
        .string()
        .regex(/^[^\0-\x1f\x7f]{1,64}$/, { error: "must be 1-64 characters without control characters" })
        .default("Admin")
        .meta({ example: "Admin" }),
    /**
     * Open WebUI's data directory on the head (users, chats, settings). Kept across `up`. A
     * directory of its own: `up` makes it root-only (0700) and removeDataOnDestroy deletes it, so
     * its path names it (a part containing `webui`) and lies outside the system's directories
     * (/etc, /usr, /boot, /run, /root, …). Defaults to "/var/lib/spark-cluster-open-webui".
     */
    dataDir: absolutePath()
        .refine((path) => path.split("/").some((part) => /webui/i.test(part)), {
            error: "must be a directory of Open WebUI's own, named for it (a part containing webui, e.g. /var/lib/spark-cluster-open-webui or /data/open-webui): up makes it root-only and removeDataOnDestroy deletes it",
        })
        .refine((path) => !SYSTEM_DIRS.some((dir) => path === dir || path.startsWith(`${dir}/`)), {
            error: `must lie outside the system's directories (${SYSTEM_DIRS.join(", ")}): up makes it root-only and removeDataOnDestroy deletes it`,
        })
        .default(DEFAULT_OPEN_WEBUI_DATA_DIR)
        .meta({ example: DEFAULT_OPEN_WEBUI_DATA_DIR }),
    /**
     * Remove the data directory when `pulumi destroy` (or turning Open WebUI off) removes Open WebUI.
     * The chats are your users' data: by default they stay. Run `up` after changing it, so the
     * delete step destroy runs knows. Defaults to false.
     */
    removeDataOnDestroy: z.boolean().default(false).meta({ example: "false" }),
});

/** Front ends in front of the endpoint. */
export const FrontendSchema = z.strictObject({
    /** Open WebUI on the head. Defaults to off. */
    openWebui: OpenWebuiSchema.prefault({}).meta({ example: "{ enabled: true, adminEmail: admin@example.com }" }),
});

/** The admin password's secret key, for messages. */
export const OPEN_WEBUI_PASSWORD_KEY = "openWebuiAdminPassword";
export const OPEN_WEBUI_PASSWORD_EXAMPLE = `pulumi config set --secret ${CONFIG_NAMESPACE}:${OPEN_WEBUI_PASSWORD_KEY} "$(openssl rand -base64 18)"`;
