// Open WebUI on the head (frontend.openWebui): its install (a venv from PyPI, or its own image),
// its data directory, the root-only env file that carries every secret it needs, its unit, and
// the readiness probe (a real sign-in as the admin that lists the served model).
//
// Open WebUI 0.12.4's own source (PyPI open-webui==0.12.4), for what each setting does:
//   open_webui/__init__.py:37-97   `open-webui serve --host H --port P` (defaults 0.0.0.0:8080); it
//                                  reads WEBUI_SECRET_KEY from the environment, else writes
//                                  ./.webui_secret_key (the working directory)
//   open_webui/env.py:228-250      DATA_DIR (the SQLite database webui.db, uploads, vector store)
//   open_webui/env.py:770-797      WEBUI_SECRET_KEY, required while auth is on
//   open_webui/env.py:806-808      WEBUI_ADMIN_EMAIL / _PASSWORD / _NAME; main.py:400-404 creates that
//                                  admin at start when no user exists, then turns signup off
//   open_webui/env.py:1224-1229    OFFLINE_MODE: HF_HUB_OFFLINE=1, no version check
//   open_webui/config.py:243       ENABLE_OLLAMA_API (default on: it would poll localhost:11434)
//   open_webui/config.py:325-353   ENABLE_OPENAI_API, OPENAI_API_BASE_URLS / OPENAI_API_KEYS (`;`-separated)
//   open_webui/config.py:1692      ENABLE_SIGNUP
//   open_webui/config.py:3352-3358 ENABLE_PERSISTENT_CONFIG: off, so the env file wins at every start
//                                  (on, the database keeps the first start's endpoint and key)
//   backend/start.sh (the image's entry point): HOST and PORT; the image's DATA_DIR is /app/backend/data
import type { OpenWebuiConfig, OpenWebuiRuntime, WatchdogConfig } from "../../config";
import { addressOnNode } from "../../config/ipv4";
import { pythonReadEnvValue, renderEnvFile } from "./host/envFile";
import type { EnvFileReader } from "./host/runtime";
import { type CompanionUnit, installFileFromStdinScript, installUnitScript, removeFilesScript, removeUnitScript } from "./host/files";
import { HOST_LIB } from "./host/lib";
import { secretFileReadScript, unitReadScript } from "./host/read";
import { bashScript, heredoc, shellJoin, shellQuote } from "./host/shell";
import { systemdJoin, systemdText } from "./host/systemd";
import type { StepScripts } from "./step";
import { renderWatchdogUnit } from "./watchdog";
import {
    CONFIG_DIR,
    CONTAINER_NAMES,
    MANAGED_MARKER,
    OPEN_WEBUI_ENV_PATH,
    OPEN_WEBUI_SECRET_NAMES,
    OPEN_WEBUI_USER,
    OPEN_WEBUI_USER_COMMENT,
    UNITS,
} from "../../config/hostPaths";
import { journalTailLine } from "./host/journal";

/** Where the image keeps its data (the Dockerfile's DATA_DIR); the host's data directory is mounted there. */
export const OPEN_WEBUI_IMAGE_DATA_DIR = "/app/backend/data";
/** A file `up` leaves in a venv it created: destroy removes only such a venv. */
export const OPEN_WEBUI_VENV_MARKER = ".spark-cluster-created";

/** The variables of Open WebUI's env file, every one set by us. */
export const OPEN_WEBUI_ENV_NAMES = [
    "OPENAI_API_BASE_URLS",
    "ENABLE_OPENAI_API",
    "ENABLE_OLLAMA_API",
    "ENABLE_SIGNUP",
    "ENABLE_PERSISTENT_CONFIG",
    "OFFLINE_MODE",
    "WEBUI_ADMIN_EMAIL",
    "WEBUI_ADMIN_NAME",
    // The secrets (config/hostPaths.ts: journal tails are scrubbed of their values).
    ...OPEN_WEBUI_SECRET_NAMES,
    "DATA_DIR",
    "STATIC_DIR",
    "HOST",
    "PORT",
] as const;
export type OpenWebuiEnvName = (typeof OPEN_WEBUI_ENV_NAMES)[number];

/** A step without a read-back (what it leaves is a directory, not a file we could compare). */
export type OneShotStep = Pick<StepScripts, "create" | "delete">;

/** What the renderers need: the resolved config minus its secrets (they arrive at deploy time). */
export type OpenWebuiSpec = Omit<OpenWebuiConfig, "adminPassword"> & { servedModel: string };

/** The secrets, as plaintext, at deploy time only (they reach the head on stdin). */
export interface OpenWebuiSecrets {
    apiKey: string;
    adminPassword: string;
    secretKey: string;
}

/** Everything that differs between the two ways of running it; one object per runtime. */
interface OpenWebuiRuntimeStrategy {
    envFileReader: EnvFileReader;
    /** Variables that say where its data is and where it listens, for this runtime. */
    placeEnv(spec: OpenWebuiSpec): [OpenWebuiEnvName, string][];
    /** The [Unit]/[Service] lines around ExecStart, and ExecStart's argv. */
    unit(spec: OpenWebuiSpec): { after: string[]; service: string[]; execStart: string[] };
    /** The user it runs as when not root ({@link OPEN_WEBUI_USER}: the data step makes it and gives it the data). */
    user?: string;
    /** Probe, install when missing, verify. */
    install(spec: OpenWebuiSpec): string[];
    /** What destroy removes of the install. */
    uninstall(spec: OpenWebuiSpec): string[];
    describe(spec: OpenWebuiSpec): string;
}

function venvStrategy(runtime: Extract<OpenWebuiRuntime, { kind: "venv" }>): OpenWebuiRuntimeStrategy {
    const venv = runtime.path;
    const pipSource = runtime.wheelhouse === undefined ? [] : ["--no-index", "--find-links", runtime.wheelhouse];
    return {
        envFileReader: "systemd",
        // STATIC_DIR: at every start it copies its static files there (open_webui/config.py, 0.12.4:
        // into the package by default, which its user may not write), so into the data directory.
        placeEnv: (spec) => [
            ["DATA_DIR", spec.dataDir],
            ["STATIC_DIR", `${spec.dataDir}/static`],
        ],
        unit: (spec) => ({
            after: [],
            service: [
                // systemd reads the root-only env file before it drops to the user.
                "EnvironmentFile=" + OPEN_WEBUI_ENV_PATH,
                // Not root: a user of its own that owns the data directory, and nothing else of the host's.
                `User=${OPEN_WEBUI_USER}`,
                `Group=${OPEN_WEBUI_USER}`,
                // Its working directory and home are the data directory: anything it writes beside it stays there.
                `WorkingDirectory=${spec.dataDir}`,
                `Environment=${systemdJoin([`HOME=${spec.dataDir}`])}`,
                "NoNewPrivileges=yes",
                "PrivateTmp=yes",
            ],
            execStart: [`${venv}/bin/open-webui`, "serve", "--host", spec.listenAddress, "--port", String(spec.port)],
        }),
        user: OPEN_WEBUI_USER,
        install: (spec) => {
            const have = `$(${shellJoin([`${venv}/bin/python`, "-c", 'import importlib.metadata as m; print(m.version("open-webui"))'])} 2>/dev/null || true)`;
            const pip = shellJoin([
                `${venv}/bin/pip`,
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                ...pipSource,
                `open-webui==${spec.version}`,
            ]);
            return [
                `venv=${shellQuote(venv)}`,
                `if [ "${have}" = ${shellQuote(spec.version)} ]; then`,
                `  sc_log "open-webui ${spec.version} is already in $venv"`,
                `else`,
                `  if [ ! -x "$venv/bin/python" ]; then`,
                `    if ! python3 -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else 1)'; then`,
                `      sc_log "open-webui ${spec.version} needs Python 3.11 or 3.12; this head's python3 is $(python3 -V 2>&1): set frontend.openWebui.runtime to { kind: docker }"`,
                `      exit 1`,
                `    fi`,
                `    python3 -m venv "$venv" || { sc_log "python3 -m venv failed: install the python3-venv package on the head"; exit 1; }`,
                `    touch "$venv/${OPEN_WEBUI_VENV_MARKER}"`,
                `  fi`,
                `  sc_log "installing open-webui ${spec.version} into $venv${runtime.wheelhouse ? ` from ${runtime.wheelhouse}` : " from PyPI"} (several minutes)"`,
                `  log=$(mktemp)`,
                `  if ! ${pip} >"$log" 2>&1; then`,
                `    tail -n 30 "$log"; rm -f "$log"`,
                `    sc_log "pip install open-webui==${spec.version} failed"`,
                `    exit 1`,
                `  fi`,
                `  rm -f "$log"`,
                `fi`,
                `got="${have}"`,
                `[ "$got" = ${shellQuote(spec.version)} ] || { sc_log "$venv has open-webui '$got', not ${spec.version}"; exit 1; }`,
                `echo "open-webui $got in $venv"`,
            ];
        },
        // Only a venv `up` created: one the user made and named is theirs.
        uninstall: () => [
            `if [ -f ${shellQuote(`${venv}/${OPEN_WEBUI_VENV_MARKER}`)} ]; then rm -rf --one-file-system ${shellQuote(venv)}; sc_log "removed ${venv}"; fi`,
        ],
        describe: (spec) => `open-webui ${spec.version} in the venv ${venv}`,
    };
}

function dockerStrategy(runtime: Extract<OpenWebuiRuntime, { kind: "docker" }>): OpenWebuiRuntimeStrategy {
    const container = CONTAINER_NAMES.openWebui;
    return {
        envFileReader: "docker",
        placeEnv: (spec) => [
            ["HOST", spec.listenAddress],
            ["PORT", String(spec.port)],
        ],
        unit: (spec) => ({
            after: ["docker.service"],
            service: [`ExecStartPre=-/usr/bin/docker rm -f ${container}`, `ExecStop=/usr/bin/docker stop ${container}`],
            execStart: [
                "/usr/bin/docker",
                "run",
                "--rm",
                "--name",
                container,
                "--network",
                "host",
                "-v",
                `${spec.dataDir}:${OPEN_WEBUI_IMAGE_DATA_DIR}`,
                "--env-file",
                OPEN_WEBUI_ENV_PATH,
                "--",
                runtime.image,
            ],
        }),
        install: () => [
            `image=${shellQuote(runtime.image)}`,
            `if ! docker image inspect --format '{{.Id}}' -- "$image" >/dev/null 2>&1; then`,
            `  sc_log "pulling $image"`,
            `  docker pull --quiet -- "$image" >/dev/null || { sc_log "docker pull $image failed (a head without internet access: docker load it first)"; exit 1; }`,
            `fi`,
            `echo "open-webui image $image: $(docker image inspect --format '{{.Id}}' -- "$image")"`,
        ],
        // The image stays, as vLLM's does: a later up would pull it again.
        uninstall: () => [],
        describe: () => `the image ${runtime.image}`,
    };
}

/** The strategy of Open WebUI's runtime: the one place that tells them apart. */
export function openWebuiRuntime(runtime: OpenWebuiRuntime): OpenWebuiRuntimeStrategy {
    switch (runtime.kind) {
        case "venv":
            return venvStrategy(runtime);
        case "docker":
            return dockerStrategy(runtime);
        default: {
            const never: never = runtime;
            throw new Error(`unknown Open WebUI runtime ${JSON.stringify(never)}`);
        }
    }
}

/** The root-only env file: the cluster's endpoint and API key, the admin, the session key, and the settings that keep it offline and closed. */
export function renderOpenWebuiEnv(spec: OpenWebuiSpec, secrets: OpenWebuiSecrets): string {
    const runtime = openWebuiRuntime(spec.runtime);
    const vars: [OpenWebuiEnvName, string][] = [
        ["OPENAI_API_BASE_URLS", spec.endpoint],
        ["OPENAI_API_KEYS", secrets.apiKey],
        ["ENABLE_OPENAI_API", "True"],
        ["ENABLE_OLLAMA_API", "False"],
        ["ENABLE_SIGNUP", "False"],
        ["ENABLE_PERSISTENT_CONFIG", "False"],
        ["OFFLINE_MODE", "True"],
        ["WEBUI_SECRET_KEY", secrets.secretKey],
        ["WEBUI_ADMIN_EMAIL", spec.adminEmail],
        ["WEBUI_ADMIN_PASSWORD", secrets.adminPassword],
        ["WEBUI_ADMIN_NAME", spec.adminName],
        ...runtime.placeEnv(spec),
    ];
    return renderEnvFile(MANAGED_MARKER, vars, runtime.envFileReader);
}

/** Where Open WebUI answers on the head (loopback where it listens on every address). */
function openWebuiBaseUrl(spec: Pick<OpenWebuiSpec, "listenAddress" | "port">): string {
    return `http://${addressOnNode(spec.listenAddress)}:${spec.port}`;
}

/**
 * Open WebUI's watchdog unit (watchdog on), or its removal (off): it asks Open WebUI's `/health`
 * (open_webui/main.py, 0.12.4: answered by its event loop, no database call), and restarts a
 * server that stopped answering, or that never answered within watchdog.startSeconds.
 */
export function openWebuiWatchdogCompanions(spec: Pick<OpenWebuiSpec, "listenAddress" | "port">, watchdog?: WatchdogConfig): CompanionUnit[] {
    return [
        {
            name: UNITS.openWebuiWatchdog,
            content:
                watchdog === undefined
                    ? undefined
                    : renderWatchdogUnit(
                          {
                              unit: UNITS.openWebui,
                              url: `${openWebuiBaseUrl(spec)}/health`,
                              what: "spark-cluster: restarts Open WebUI when it stops answering /health",
                              gated: false,
                          },
                          watchdog,
                      ),
        },
    ];
}

/** Open WebUI's unit: restarts on failure, starts on boot (and its watchdog, `watchdog` on); no secret in it (they are in the env file). */
export function renderOpenWebuiUnit(spec: OpenWebuiSpec, watchdog?: WatchdogConfig): string {
    const unit = openWebuiRuntime(spec.runtime).unit(spec);
    return (
        [
            `# ${MANAGED_MARKER}`,
            "[Unit]",
            `Description=${systemdText(`spark-cluster: Open WebUI on ${spec.listenAddress}:${spec.port} for ${spec.endpoint}`)}`,
            "Wants=network-online.target",
            // The watchdog starts with it (it is PartOf this unit: it stops and restarts with it too).
            ...(watchdog !== undefined ? [`Wants=${UNITS.openWebuiWatchdog}.service`] : []),
            `After=${["network-online.target", ...unit.after].join(" ")}`,
            ...unit.after.map((after) => `Requires=${after}`),
            "StartLimitIntervalSec=0",
            "",
            "[Service]",
            "Type=simple",
            ...unit.service,
            `ExecStart=${systemdJoin(unit.execStart)}`,
            "Restart=always",
            "RestartSec=5",
            "TimeoutStopSec=30",
            "KillMode=mixed",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ].join("\n") + "\n"
    );
}

/** The install step: the venv or the image, and the data directory (root only), each probed first. */
export function openWebuiInstallScripts(spec: OpenWebuiSpec): OneShotStep {
    const runtime = openWebuiRuntime(spec.runtime);
    return {
        create: bashScript([HOST_LIB, ...runtime.install(spec)]),
        delete: bashScript([HOST_LIB, ...runtime.uninstall(spec), "sc_cleanup_state"]),
    };
}

/**
 * The data directory, 0700 and owned by the user Open WebUI runs as (root in its image; the venv's
 * own system user, made here when missing, refused when a user of that name is not ours). Destroy
 * removes it only when removeDataOnDestroy says so; kept data goes back to root, and our user goes.
 */
export function openWebuiDataScripts(spec: OpenWebuiSpec): OneShotStep {
    const dir = shellQuote(spec.dataDir);
    const user = openWebuiRuntime(spec.runtime).user;
    const ours = user === undefined ? [] : [`ours() { [ "$(getent passwd ${user} | cut -d: -f5)" = ${shellQuote(OPEN_WEBUI_USER_COMMENT)} ]; }`];
    const makeUser =
        user === undefined
            ? []
            : [
                  ...ours,
                  `if ! getent passwd ${user} >/dev/null; then`,
                  `  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --comment ${shellQuote(OPEN_WEBUI_USER_COMMENT)} ${user}`,
                  `  sc_log "created the system user ${user}: Open WebUI runs as it, not as root"`,
                  `elif ! ours; then`,
                  `  sc_log "a user ${user} exists and is not ours (its comment is not '${OPEN_WEBUI_USER_COMMENT}'): Open WebUI would run as it. Remove or rename it, or set frontend.openWebui.runtime to { kind: docker }"`,
                  `  exit 1`,
                  `fi`,
              ];
    const owner = user === undefined ? "root:root" : `${user}:${user}`;
    const dropUser = user === undefined ? [] : [...ours, `if ours; then userdel ${user} && sc_log "removed the system user ${user}"; fi`];
    return {
        create: bashScript([
            HOST_LIB,
            ...makeUser,
            `install -d -m 0700 ${dir}`,
            `chown -R ${owner} ${dir}`,
            `chmod 0700 ${dir}`,
            `echo "data in ${spec.dataDir} ($(du -sh ${dir} | cut -f1)), owned by ${owner.split(":")[0]}"`,
        ]),
        delete: bashScript([
            HOST_LIB,
            spec.removeDataOnDestroy
                ? `rm -rf --one-file-system ${dir}; sc_log "removed ${spec.dataDir} (frontend.openWebui.removeDataOnDestroy)"`
                : `[ ! -d ${dir} ] || chown -R root:root ${dir}; sc_log "kept ${spec.dataDir}, owned by root (Open WebUI's users and chats; frontend.openWebui.removeDataOnDestroy removes it)"`,
            ...dropUser,
            "sc_cleanup_state",
        ]),
    };
}

/** The env file's step: written from stdin (root only, 0600), restarting Open WebUI when it changed. */
export function openWebuiEnvScripts(): StepScripts {
    return {
        create: installFileFromStdinScript(OPEN_WEBUI_ENV_PATH, "600", UNITS.openWebui),
        delete: removeFilesScript([OPEN_WEBUI_ENV_PATH], [CONFIG_DIR]),
        read: secretFileReadScript(OPEN_WEBUI_ENV_PATH, "600"),
    };
}

/** The unit's step, with its watchdog's unit (or that unit's removal) as its companion. */
export function openWebuiUnitScripts(unit: string, companions: readonly CompanionUnit[] = []): StepScripts {
    return {
        create: installUnitScript(UNITS.openWebui, unit, companions),
        delete: removeUnitScript(
            UNITS.openWebui,
            companions.map((c) => c.name),
        ),
        read: unitReadScript(UNITS.openWebui, unit, companions),
    };
}

/**
 * Ready when the admin signs in (POST /api/v1/auths/signin) and Open WebUI lists the served model
 * (GET /api/models): its own account, the cluster's endpoint and API key all work. The password is
 * read on the head from the root-only env file, never passed on a command line.
 */
export function openWebuiReadyScript(spec: OpenWebuiSpec, seconds = 600): string {
    const base = openWebuiBaseUrl(spec);
    const probe = [
        "import json, sys, urllib.request",
        pythonReadEnvValue(openWebuiRuntime(spec.runtime).envFileReader),
        `env = ${JSON.stringify(OPEN_WEBUI_ENV_PATH)}`,
        `def call(path, body=None, token=None):`,
        `    headers = {"Content-Type": "application/json"}`,
        `    if token: headers["Authorization"] = "Bearer " + token`,
        `    data = None if body is None else json.dumps(body).encode()`,
        `    return json.load(urllib.request.urlopen(urllib.request.Request(${JSON.stringify(base)} + path, data=data, headers=headers), timeout=30))`,
        `try:`,
        `    token = call("/api/v1/auths/signin", {"email": read_env_value(env, "WEBUI_ADMIN_EMAIL"), "password": read_env_value(env, "WEBUI_ADMIN_PASSWORD")})["token"]`,
        `    models = [m.get("id") for m in call("/api/models", token=token).get("data", [])]`,
        `except Exception as exc:`,
        `    print("not ready:", exc); sys.exit(1)`,
        `if ${JSON.stringify(spec.servedModel)} not in models:`,
        `    print("signed in; models listed:", models); sys.exit(1)`,
        `print("signed in as the admin; it lists", ${JSON.stringify(spec.servedModel)})`,
    ].join("\n");
    return bashScript([
        HOST_LIB,
        `mkdir -p "$SC_STATE"`,
        heredoc(`cat > "$SC_STATE/open-webui-probe.py"`, probe),
        `probe() { python3 "$SC_STATE/open-webui-probe.py" | tail -n 1; [ "\${PIPESTATUS[0]}" = 0 ]; }`,
        `if ! sc_wait ${seconds} ${shellQuote(`Open WebUI at ${base} to sign the admin in and list ${spec.servedModel}`)} probe; then`,
        `  sc_log "Open WebUI is not ready; last log lines of ${UNITS.openWebui}:"`,
        `  ${journalTailLine(UNITS.openWebui, 60)}`,
        `  rm -f "$SC_STATE/open-webui-probe.py"`,
        `  exit 1`,
        `fi`,
        `rm -f "$SC_STATE/open-webui-probe.py"`,
        `sc_cleanup_state`,
    ]);
}

/** What the component wires, asked for once. */
export interface OpenWebuiPlan {
    spec: OpenWebuiSpec;
    install: OneShotStep;
    data: OneShotStep;
    env: StepScripts;
    envFile: (secrets: OpenWebuiSecrets) => string;
    unit: string;
    unitStep: StepScripts;
    ready: string;
    describe: string;
}

/** Open WebUI's plan; `watchdog`: its health watchdog (config.watchdog; undefined: none, and any left is removed). */
export function openWebuiPlan(spec: OpenWebuiSpec, watchdog?: WatchdogConfig): OpenWebuiPlan {
    const unit = renderOpenWebuiUnit(spec, watchdog);
    return {
        spec,
        install: openWebuiInstallScripts(spec),
        data: openWebuiDataScripts(spec),
        env: openWebuiEnvScripts(),
        envFile: (secrets) => renderOpenWebuiEnv(spec, secrets),
        unit,
        unitStep: openWebuiUnitScripts(unit, openWebuiWatchdogCompanions(spec, watchdog)),
        ready: openWebuiReadyScript(spec),
        describe: openWebuiRuntime(spec.runtime).describe(spec),
    };
}
