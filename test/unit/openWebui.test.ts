// frontend.openWebui: config refusals (each naming its key), resolution (runtime default, endpoint,
// access, firewall), the renderers (snapshots) and where the secrets go (only the root-only env
// file, from stdin; never the unit, the scripts or an error).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ConfigError, DEFAULT_OPEN_WEBUI_IMAGE, DEFAULT_OPEN_WEBUI_VENV, OPEN_WEBUI_VERSION, type Config, parseConfig } from "../../config";
import { OPEN_WEBUI_ENV_NAMES, type OpenWebuiSpec, openWebuiPlan, renderOpenWebuiEnv } from "../../components/render/openWebui";
import { pythonReadEnvValue } from "../../components/render/host/envFile";
import { OPEN_WEBUI_ENV_PATH, OPEN_WEBUI_USER, OPEN_WEBUI_USER_COMMENT, UNITS } from "../../config/hostPaths";
import { matchSnapshot } from "../support/snapshot";
import { systemdSplit } from "../support/unitText";

const API_KEY = "sk-API-KEY-plaintext-0123456789";
const PASSWORD = "ADMIN-PASSWORD-plaintext-42";
const SSH_KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA", "-----END OPENSSH PRIVATE KEY-----", ""].join("\n");

function base(openWebui: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
        nodes: [
            { name: "spark-a", kind: "spark", head: true, ssh: { host: "10.0.0.11" }, interconnect: [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }] },
            { name: "spark-b", kind: "spark", ssh: { host: "10.0.0.12" }, interconnect: [{ name: "enp1s0f1np1", address: "192.168.100.12/24" }] },
        ],
        model: { source: "Qwen/Qwen2.5-7B-Instruct" },
        apiKey: API_KEY,
        sshPrivateKey: SSH_KEY,
        ...(openWebui === undefined ? {} : { frontend: { openWebui } }),
        ...extra,
    };
}

function parse(values: Record<string, unknown>): Config {
    const secretKeys = new Set(["apiKey", "sshPrivateKey", "openWebuiAdminPassword"].filter((k) => k in values));
    return parseConfig({ values, secretKeys });
}

function refusal(values: Record<string, unknown>, secretKeys?: Set<string>): string {
    try {
        if (secretKeys) parseConfig({ values, secretKeys });
        else parse(values);
    } catch (err) {
        assert.ok(err instanceof ConfigError, String(err));
        assert.ok(!err.message.includes(PASSWORD) && !err.message.includes(API_KEY), "a secret's plaintext in an error");
        return err.message;
    }
    assert.fail("the config was accepted");
}

const ENABLED = { enabled: true, adminEmail: "admin@example.com" };

describe("frontend.openWebui config", () => {
    it("is off by default: no openWebui in the resolved config, and the head's firewall is as before", () => {
        const off = parse(base(undefined));
        assert.equal(off.openWebui, undefined);
        const explicitOff = parse(base({ enabled: false }));
        assert.equal(explicitOff.openWebui, undefined);
        assert.deepEqual(explicitOff.nodes[0].firewall, off.nodes[0].firewall);
    });

    it("resolves the defaults: the head's runtime decides docker, loopback, port 8080, the tunnel command", () => {
        const config = parse(base(ENABLED, { openWebuiAdminPassword: PASSWORD }));
        const ui = config.openWebui;
        assert.ok(ui);
        assert.deepEqual(ui.runtime, { kind: "docker", image: DEFAULT_OPEN_WEBUI_IMAGE });
        assert.equal(ui.version, OPEN_WEBUI_VERSION);
        assert.equal(ui.node, "spark-a");
        assert.equal(ui.listenAddress, "127.0.0.1");
        assert.equal(ui.exposed, false);
        assert.equal(ui.endpoint, "http://127.0.0.1:8000/v1");
        assert.equal(ui.access, "ssh -N -L 8080:127.0.0.1:8080 root@10.0.0.11, then open http://localhost:8080");
        assert.equal(ui.removeDataOnDestroy, false);
        assert.equal(ui.adminPassword.reveal(), PASSWORD);
        assert.equal(String(ui.adminPassword), "[secret]");
        assert.equal(JSON.stringify(ui).includes(PASSWORD), false);
        assert.equal(config.nodes[0].firewall.openTcp.includes(8080), false, "loopback: nothing opened");
    });

    it("a venv head gets a venv; a venv runtime keeps its wheelhouse", () => {
        const venvHead = base(ENABLED, { openWebuiAdminPassword: PASSWORD });
        (venvHead.nodes as Record<string, unknown>[])[0].runtime = { kind: "venv", path: "/opt/vllm-venv" };
        assert.deepEqual(parse(venvHead).openWebui?.runtime, { kind: "venv", path: DEFAULT_OPEN_WEBUI_VENV });
        const wheels = parse(base({ ...ENABLED, runtime: { kind: "venv", wheelhouse: "/srv/wheels/open-webui" } }, { openWebuiAdminPassword: PASSWORD }));
        assert.deepEqual(wheels.openWebui?.runtime, { kind: "venv", path: DEFAULT_OPEN_WEBUI_VENV, wheelhouse: "/srv/wheels/open-webui" });
    });

    it("a listen address off loopback is opt-in and opens the port on the head only", () => {
        const config = parse(base({ ...ENABLED, listenAddress: "0.0.0.0", port: 3000 }, { openWebuiAdminPassword: PASSWORD }));
        assert.equal(config.openWebui?.exposed, true);
        assert.equal(config.openWebui?.access, "http://10.0.0.11:3000");
        assert.ok(config.nodes[0].firewall.openTcp.includes(3000));
        assert.equal(config.nodes[1].firewall.openTcp.includes(3000), false);
    });

    it("talks to the address vLLM binds when model.apiHost is one address", () => {
        const values = base(ENABLED, { openWebuiAdminPassword: PASSWORD });
        values.model = { source: "Qwen/Qwen2.5-7B-Instruct", apiHost: "10.0.0.11", apiPort: 8001 };
        assert.equal(parse(values).openWebui?.endpoint, "http://10.0.0.11:8001/v1");
        // A loopback address other than 127.0.0.1: vLLM accepts connections to that one only.
        values.model = { source: "Qwen/Qwen2.5-7B-Instruct", apiHost: "127.0.0.2", apiPort: 8001 };
        assert.equal(parse(values).openWebui?.endpoint, "http://127.0.0.2:8001/v1");
        for (const host of ["0.0.0.0", "localhost"]) {
            values.model = { source: "Qwen/Qwen2.5-7B-Instruct", apiHost: host, apiPort: 8001 };
            assert.equal(parse(values).openWebui?.endpoint, "http://127.0.0.1:8001/v1", host);
        }
    });

    const refusals: [string, Record<string, unknown>, RegExp][] = [
        ["no admin email", base({ enabled: true }, { openWebuiAdminPassword: PASSWORD }), /spark-cluster:frontend\.openWebui\.adminEmail: is missing/],
        [
            "no admin password",
            base(ENABLED),
            /spark-cluster:openWebuiAdminPassword: is missing.*pulumi config set --secret spark-cluster:openWebuiAdminPassword/,
        ],
        ["a short password", base(ENABLED, { openWebuiAdminPassword: "short" }), /spark-cluster:openWebuiAdminPassword: /],
        [
            "a bad email",
            base({ ...ENABLED, adminEmail: "admin" }, { openWebuiAdminPassword: PASSWORD }),
            /spark-cluster:frontend\.openWebui\.adminEmail: must be an email address/,
        ],
        [
            "the API port",
            base({ ...ENABLED, port: 8000 }, { openWebuiAdminPassword: PASSWORD }),
            /spark-cluster:frontend\.openWebui\.port: is also model\.apiPort/,
        ],
        [
            "the Ray dashboard's port",
            base({ ...ENABLED, port: 8265 }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.port: is also ray\.dashboardPort/,
        ],
        [
            "a relative data dir",
            base({ ...ENABLED, dataDir: "data" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be an absolute path/,
        ],
        [
            "a data dir at the root",
            base({ ...ENABLED, dataDir: "/var" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be at least two directories deep/,
        ],
        [
            "a data dir with ..",
            base({ ...ENABLED, dataDir: "/var/lib/../.." }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must not contain/,
        ],
        [
            "a data dir with :",
            base({ ...ENABLED, dataDir: "/var/lib/a:b" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be an absolute path/,
        ],
        [
            "a data dir that is not Open WebUI's own (a system directory chmod 0700 and removeDataOnDestroy would hit)",
            base({ ...ENABLED, dataDir: "/var/lib" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be a directory of Open WebUI's own, named for it/,
        ],
        [
            "a home directory as the data dir",
            base({ ...ENABLED, dataDir: "/home/nvidia" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be a directory of Open WebUI's own/,
        ],
        [
            "a data dir in the system's directories",
            base({ ...ENABLED, dataDir: "/etc/open-webui" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must lie outside the system's directories/,
        ],
        // Found by the sinks property test: bash ran a backquote in the install step's message,
        // systemd expanded %n in WorkingDirectory=.
        [
            "a data dir with a backquote",
            base({ ...ENABLED, dataDir: "/srv/a`touch x`" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be an absolute path of ASCII letters, digits/,
        ],
        [
            "a data dir with a systemd specifier",
            base({ ...ENABLED, dataDir: "/srv/a%n" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.dataDir: must be an absolute path of ASCII letters, digits/,
        ],
        [
            "a venv path with a backquote",
            base({ ...ENABLED, runtime: { kind: "venv", path: "/opt/open-webui`" } }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.runtime\.path: must be an absolute path of ASCII letters, digits/,
        ],
        [
            "a wheelhouse with a brace and non-ASCII",
            base({ ...ENABLED, runtime: { kind: "venv", wheelhouse: "/srv/wheels}/ü" } }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.runtime\.wheelhouse: must be an absolute path of ASCII letters, digits/,
        ],
        [
            "a venv path with a space",
            base({ ...ENABLED, runtime: { kind: "venv", path: "/opt/open webui" } }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.runtime\.path: /,
        ],
        [
            "an image starting with -",
            base({ ...ENABLED, runtime: { kind: "docker", image: "--privileged" } }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.runtime\.image: /,
        ],
        [
            "a listen address that is no IPv4",
            base({ ...ENABLED, listenAddress: "localhost" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.listenAddress: /,
        ],
        ["an unknown key", base({ ...ENABLED, signup: true }, { openWebuiAdminPassword: PASSWORD }), /frontend\.openWebui/],
        [
            "a version that is no release",
            base({ ...ENABLED, version: "latest" }, { openWebuiAdminPassword: PASSWORD }),
            /frontend\.openWebui\.version: must be a release/,
        ],
        [
            "an API key with ;, which Open WebUI splits",
            { ...base(ENABLED, { openWebuiAdminPassword: PASSWORD }), apiKey: "sk-API-KEY;plaintext-0123456789" },
            /spark-cluster:apiKey: contains ;/,
        ],
    ];
    for (const [what, values, expected] of refusals) {
        it(`refuses ${what}, naming the key`, () => assert.match(refusal(values), expected));
    }

    it("refuses the admin password set without --secret", () => {
        const values = base(ENABLED, { openWebuiAdminPassword: PASSWORD });
        assert.match(refusal(values, new Set(["apiKey", "sshPrivateKey"])), /spark-cluster:openWebuiAdminPassword: was set without --secret/);
    });

    it("a data dir of its own is accepted wherever it lies outside the system's directories", () => {
        for (const dataDir of ["/data/open-webui", "/srv/OpenWebUI/data", "/home/nvidia/open-webui"]) {
            assert.equal(parse(base({ ...ENABLED, dataDir }, { openWebuiAdminPassword: PASSWORD })).openWebui?.dataDir, dataDir);
        }
    });

    it("a disabled Open WebUI needs no admin", () => {
        assert.equal(parse(base({ enabled: false, port: 8000 })).openWebui, undefined);
    });
});

function spec(runtime: OpenWebuiSpec["runtime"], overrides: Partial<OpenWebuiSpec> = {}): OpenWebuiSpec {
    return {
        node: "spark-a",
        runtime,
        version: OPEN_WEBUI_VERSION,
        listenAddress: "127.0.0.1",
        port: 8080,
        exposed: false,
        adminEmail: "admin@example.com",
        adminName: "Admin",
        dataDir: "/var/lib/spark-cluster-open-webui",
        removeDataOnDestroy: false,
        endpoint: "http://127.0.0.1:8000/v1",
        access: "ssh -N -L 8080:127.0.0.1:8080 root@10.0.0.11, then open http://localhost:8080",
        servedModel: "qwen2.5-7b",
        ...overrides,
    };
}
const VENV_SPEC = spec({ kind: "venv", path: DEFAULT_OPEN_WEBUI_VENV, wheelhouse: "/opt/lab-open-webui/wheelhouse" });
const DOCKER_SPEC = spec({ kind: "docker", image: DEFAULT_OPEN_WEBUI_IMAGE });
const SECRETS = { apiKey: API_KEY, adminPassword: PASSWORD, secretKey: "f".repeat(64) };

describe("Open WebUI renderers", () => {
    for (const [name, s] of [
        ["venv", VENV_SPEC],
        ["docker", DOCKER_SPEC],
    ] as const) {
        it(`${name}: unit, env file and scripts (snapshots)`, () => {
            const plan = openWebuiPlan(s);
            matchSnapshot(`openWebui.${name}.unit`, plan.unit);
            matchSnapshot(`openWebui.${name}.env`, plan.envFile(SECRETS));
            matchSnapshot(`openWebui.${name}.install.sh`, plan.install.create);
            matchSnapshot(`openWebui.${name}.install-delete.sh`, plan.install.delete);
            matchSnapshot(`openWebui.${name}.ready.sh`, plan.ready);
        });

        it(`${name}: the secrets are only in the env file, which is written root-only from stdin`, () => {
            const plan = openWebuiPlan(s);
            const scripts = [
                plan.unit,
                plan.install.create,
                plan.install.delete,
                plan.data.create,
                plan.data.delete,
                plan.env.create,
                plan.env.delete,
                plan.ready,
            ];
            for (const text of scripts) {
                for (const secret of Object.values(SECRETS)) assert.equal(text.includes(secret), false);
            }
            assert.match(plan.env.create, new RegExp(`sc_install_file ${OPEN_WEBUI_ENV_PATH.replace(/[/.]/g, "\\$&")} 600`));
            assert.match(plan.env.create, new RegExp(`systemctl restart ${UNITS.openWebui}\\.service`));
            const env = plan.envFile(SECRETS);
            for (const secret of Object.values(SECRETS)) assert.ok(env.includes(secret));
            assert.ok(plan.unit.includes(OPEN_WEBUI_ENV_PATH), "the unit names the env file");
        });
    }

    it("the env file carries exactly the variables Open WebUI 0.12.4 reads for this, and keeps it offline and closed", () => {
        const names = (text: string) =>
            text
                .split("\n")
                .filter((l) => l && !l.startsWith("#"))
                .map((l) => l.slice(0, l.indexOf("=")));
        const venv = renderOpenWebuiEnv(VENV_SPEC, SECRETS);
        const docker = renderOpenWebuiEnv(DOCKER_SPEC, SECRETS);
        for (const name of [...names(venv), ...names(docker)]) assert.ok((OPEN_WEBUI_ENV_NAMES as readonly string[]).includes(name), name);
        assert.match(venv, /^ENABLE_SIGNUP="False"$/m);
        assert.match(venv, /^ENABLE_OLLAMA_API="False"$/m);
        assert.match(venv, /^OFFLINE_MODE="True"$/m);
        assert.match(venv, /^ENABLE_PERSISTENT_CONFIG="False"$/m);
        assert.match(venv, /^DATA_DIR="\/var\/lib\/spark-cluster-open-webui"$/m);
        assert.match(docker, /^HOST=127\.0\.0\.1$/m);
        assert.match(docker, /^PORT=8080$/m);
        assert.doesNotMatch(docker, /^DATA_DIR=/m, "the image's own DATA_DIR, where the data directory is mounted");
    });

    it("a password with characters systemd would expand reaches Open WebUI as written (read back by the probe's reader)", () => {
        const odd = { ...SECRETS, adminPassword: 'pa$$ "word" \\ `x` %h' };
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "owui-env-"));
        try {
            for (const s of [VENV_SPEC, DOCKER_SPEC]) {
                const file = path.join(dir, "open-webui.env");
                fs.writeFileSync(file, renderOpenWebuiEnv(s, odd));
                const reader = s.runtime.kind === "venv" ? "systemd" : "docker";
                const code = `${pythonReadEnvValue(reader)}\nimport sys\nsys.stdout.write(read_env_value(sys.argv[1], "WEBUI_ADMIN_PASSWORD"))`;
                const out = spawnSync("python3", ["-c", code, file], { encoding: "utf8" });
                assert.equal(out.status, 0, out.stderr);
                assert.equal(out.stdout, odd.adminPassword);
            }
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("the data directory stays on destroy unless removeDataOnDestroy", () => {
        assert.doesNotMatch(openWebuiPlan(VENV_SPEC).data.delete, /rm -rf/);
        assert.match(openWebuiPlan({ ...VENV_SPEC, removeDataOnDestroy: true }).data.delete, /rm -rf --one-file-system \/var\/lib\/spark-cluster-open-webui;/);
        assert.match(openWebuiPlan(VENV_SPEC).data.create, /install -d -m 0700 \/var\/lib\/spark-cluster-open-webui/);
    });

    it("a venv runs as a system user of its own that owns the data (made when missing, refused when not ours); destroy gives kept data back to root and removes the user", () => {
        // Stand-ins for the user tools, on PATH: getent answers from a passwd line in $STUB/passwd,
        // useradd writes it, userdel removes it, chown records its arguments. The data dir is a temporary one.
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "webui-user-"));
        try {
            const bin = path.join(dir, "bin");
            fs.mkdirSync(bin);
            const stub = (name: string, body: string) => fs.writeFileSync(path.join(bin, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
            stub("getent", `[ -f "$STUB/passwd" ] && grep "^$2:" "$STUB/passwd"`);
            stub("useradd", `echo "useradd $*" >> "$STUB/calls"; echo "\${@: -1}:x:998:998:\${9}:/nonexistent:/usr/sbin/nologin" > "$STUB/passwd"`);
            stub("userdel", `echo "userdel $*" >> "$STUB/calls"; rm -f "$STUB/passwd"`);
            stub("chown", `echo "chown $*" >> "$STUB/calls"`);
            const data = path.join(dir, "data");
            const run = (script: string) => {
                fs.rmSync(path.join(dir, "calls"), { force: true });
                const r = spawnSync("bash", ["-c", script], {
                    encoding: "utf8",
                    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STUB: dir, SC_STATE: path.join(dir, "state") },
                });
                const calls = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n") : [];
                return { ...r, calls };
            };
            const venv = openWebuiPlan(spec(VENV_SPEC.runtime, { dataDir: data }));
            const made = run(venv.data.create);
            assert.equal(made.status, 0, made.stdout + made.stderr);
            assert.deepEqual(made.calls, [
                `useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --comment ${OPEN_WEBUI_USER_COMMENT} ${OPEN_WEBUI_USER}`,
                `chown -R ${OPEN_WEBUI_USER}:${OPEN_WEBUI_USER} ${data}`,
            ]);
            assert.equal((fs.statSync(data).mode & 0o777).toString(8), "700");
            assert.match(made.stdout, new RegExp(`created the system user ${OPEN_WEBUI_USER}`));
            // Again: the user is ours, nothing is made twice.
            assert.deepEqual(run(venv.data.create).calls, [`chown -R ${OPEN_WEBUI_USER}:${OPEN_WEBUI_USER} ${data}`]);
            // Destroy keeping the data: back to root, then our user goes.
            const kept = run(venv.data.delete);
            assert.equal(kept.status, 0, kept.stdout + kept.stderr);
            assert.deepEqual(kept.calls, [`chown -R root:root ${data}`, `userdel ${OPEN_WEBUI_USER}`]);
            assert.ok(fs.existsSync(data));
            // A user of that name that is not ours: refused, naming the fix; and destroy leaves it.
            fs.writeFileSync(path.join(dir, "passwd"), `${OPEN_WEBUI_USER}:x:1001:1001:Someone Else:/home/x:/bin/bash\n`);
            const foreign = run(venv.data.create);
            assert.equal(foreign.status, 1);
            assert.deepEqual(foreign.calls, []);
            assert.match(foreign.stdout, /a user spark-openwebui exists and is not ours .* set frontend\.openWebui\.runtime to \{ kind: docker \}/);
            assert.ok(!run(venv.data.delete).calls.some((c) => c.startsWith("userdel")), "not ours: not removed");
            // In its image it runs as root: no user, the data root's.
            fs.rmSync(path.join(dir, "passwd"));
            const docker = openWebuiPlan(spec(DOCKER_SPEC.runtime, { dataDir: data }));
            assert.deepEqual(run(docker.data.create).calls, [`chown -R root:root ${data}`]);
            assert.doesNotMatch(docker.unit, /^User=/m);
            assert.match(venv.unit, new RegExp(`^User=${OPEN_WEBUI_USER}$`, "m"));
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("destroy removes only a venv that up created (its marker)", () => {
        assert.match(openWebuiPlan(VENV_SPEC).install.delete, /if \[ -f \/opt\/spark-cluster-open-webui\/\.spark-cluster-created \]; then rm -rf/);
        assert.doesNotMatch(openWebuiPlan(DOCKER_SPEC).install.delete, /docker (rmi|image rm)|rm -rf/);
    });

    it("its watchdog (watchdog on): the unit wants it, the step installs and reads it back, destroy removes it; off, the step removes it", () => {
        const watchdog = parse(base(ENABLED, { openWebuiAdminPassword: PASSWORD })).watchdog;
        assert.ok(watchdog, "the watchdog is on by default");
        const on = openWebuiPlan(DOCKER_SPEC, watchdog);
        const watchdogUnit = `${UNITS.openWebuiWatchdog}.service`;
        assert.match(on.unit, new RegExp(`^Wants=${watchdogUnit.replace(/\./g, "\\.")}$`, "m"));
        const exec = /^ExecStart=(.*)$/m.exec(on.unitStep.create.slice(on.unitStep.create.indexOf(`Description=spark-cluster: restarts Open WebUI`)));
        assert.ok(exec, "the step installs the watchdog's unit");
        assert.deepEqual(systemdSplit(exec[1]).slice(3), [
            "watchdog",
            UNITS.openWebui,
            `http://127.0.0.1:${DOCKER_SPEC.port}/health`,
            "1800",
            "30",
            "-",
            "restart",
        ]);
        assert.match(on.unitStep.read ?? "", new RegExp(watchdogUnit.replace(/\./g, "\\.")), "read back beside the unit");
        const removal = new RegExp(`systemctl disable --now ${watchdogUnit.replace(/\./g, "\\.")}`);
        assert.match(on.unitStep.delete ?? "", removal);
        const off = openWebuiPlan(DOCKER_SPEC);
        assert.doesNotMatch(off.unit, /-watchdog/);
        assert.match(off.unitStep.create, removal, "a watchdog left by an earlier up goes");
    });

    it("every rendered script is valid bash", () => {
        const plan = openWebuiPlan(VENV_SPEC);
        for (const script of [
            plan.install.create,
            plan.install.delete,
            plan.data.create,
            plan.data.delete,
            plan.env.create,
            plan.env.read,
            plan.unitStep.create,
            plan.ready,
        ]) {
            const out = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
            assert.equal(out.status, 0, out.stderr);
        }
    });
});
