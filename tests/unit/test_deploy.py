"""deploy/: the image, the compose file and the Kubernetes manifests parse and agree with the code.

Checked against the code itself, never against a copy of it: every SHOPFLOOR_* variable the
deploy files (and docs/scaling.md) name is a field of Settings, the values they configure
validate as Settings, every command a container runs is a `shopfloor` subcommand, probes and
health checks hit routes the webhook app serves, ports agree from the Dockerfile to the Service,
the image runs as a non-root uid with PYTHONSAFEPATH=1, and secrets appear only as placeholders.
Nothing here builds an image or needs Docker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import AliasChoices, SecretStr

from shopfloor.activities.sandbox_mounts import shown_by_default
from shopfloor.blobs import FileBlobStore
from shopfloor.cli.lazy import every_command
from shopfloor.settings import Settings
from shopfloor.webhooks.app import create_app

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SCANNED = [p for p in sorted(DEPLOY.rglob("*")) if p.is_file() and p.name != ".gitkeep"] + [ROOT / "docs/scaling.md"]


# --- what the code defines ---------------------------------------------------------------------


def _settings_env_names() -> dict[str, str]:
    """Environment name -> Settings field, as pydantic-settings maps them: the env_prefix plus the
    field name, or the validation alias's choices (which take no prefix)."""
    prefix = Settings.model_config.get("env_prefix", "")
    names: dict[str, str] = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update({str(choice).upper(): field_name for choice in alias.choices})
        elif isinstance(alias, str):
            names[alias.upper()] = field_name
        else:
            names[f"{prefix}{field_name}".upper()] = field_name
    return names


ENV_NAMES = _settings_env_names()
SECRET_ENV_NAMES = {
    env
    for env, field in ENV_NAMES.items()
    if Settings.model_fields[field].annotation is SecretStr
    or SecretStr in get_args(Settings.model_fields[field].annotation)
} | {"AWS_SECRET_ACCESS_KEY"}  # boto3's, for the S3 blob store
CLI_COMMANDS = set(every_command().commands)
DEFAULT_WEBHOOK_PORT = Settings.model_fields["webhook_port"].default


def _get_routes() -> set[str]:
    async def no_client() -> Any:
        raise AssertionError("not called")

    app = create_app(no_client, settings_for({}), FileBlobStore(Path("/nonexistent")))
    return {route.path for route in app.routes if "GET" in (getattr(route, "methods", None) or set())}


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """Exactly `env` for Settings: every variable Settings reads is removed first."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.upper() in ENV_NAMES:
                mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        yield


def settings_for(env: dict[str, str]) -> Settings:
    """Settings as a process with `env` would read them (other variables play no part)."""
    with _environment({name: value for name, value in env.items() if name.upper() in ENV_NAMES}):
        return Settings()


# --- reading the files ---------------------------------------------------------------------------


def parse_dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comment lines dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "a continuation line ends the Dockerfile"
    return instructions


def parse_env_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(active KEY=VALUE lines, commented-out `# KEY=VALUE` lines) of a dotenv file."""
    active: dict[str, str] = {}
    commented: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if match := re.fullmatch(r"#\s*([A-Z][A-Z0-9_]*)=(.*)", line):
            commented[match[1]] = match[2]
        elif line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", name), f"{path.name}: not KEY=VALUE: {line!r}"
            active[name] = value
    return active, commented


_VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR:?error}` with `env` as the .env file; a
    required variable left empty there gets a stand-in value."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        name, op, arg = m[1], m[2] or "", m[3] or ""
        if env.get(name):
            return env[name]
        if op.endswith("-"):
            return arg
        if op.endswith("?"):
            return f"stand-in-for-{name.lower()}"
        return ""

    return _VAR.sub(one, value)


DOCKERFILE = parse_dockerfile(DEPLOY / "Dockerfile")
COMPOSE_RAW = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
COMPOSE_ENV, _ = parse_env_file(DEPLOY / "compose.env.example")
COMPOSE = interpolate(COMPOSE_RAW, COMPOSE_ENV)
SHOPFLOOR_ENV, SHOPFLOOR_ENV_COMMENTED = parse_env_file(DEPLOY / "shopfloor.env.example")
K8S_DOCS = {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(K8S.glob("*.yaml"))}


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for keyword, rest in DOCKERFILE:
        if keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((keyword, rest))
    return stages


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in dockerfile_stages()[-1]:
        if keyword == "ENV":
            for token in shlex.split(rest):
                name, sep, value = token.partition("=")
                assert sep, f"ENV in the legacy `ENV key value` form: {rest!r}"
                env[name] = value
    return env


def image_user() -> str:
    users = [rest for keyword, rest in dockerfile_stages()[-1] if keyword == "USER"]
    assert users, "the runtime stage has no USER line: the image would run as root"
    return users[-1]


def shopfloor_services() -> dict[str, dict[str, Any]]:
    """The compose services that run the shopfloor image (the ones built from deploy/Dockerfile)."""
    services = {name: s for name, s in COMPOSE["services"].items() if "build" in s}
    assert services, "no compose service builds deploy/Dockerfile"
    return services


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    """What a shopfloor container sees: image ENV < env_file < environment."""
    assert service["env_file"] in ("shopfloor.env", ["shopfloor.env"])
    env = {**image_env(), **SHOPFLOOR_ENV}
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return env


def k8s_objects(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for docs in K8S_DOCS.values() for d in docs if d["kind"] == kind}


def pod_specs() -> dict[str, dict[str, Any]]:
    specs = {name: d["spec"]["template"]["spec"] for name, d in k8s_objects("Deployment").items()}
    specs.update({name: d["spec"]["template"]["spec"] for name, d in k8s_objects("Job").items()})
    return specs


def configmap() -> dict[str, str]:
    return k8s_objects("ConfigMap")["shopfloor-config"]["data"]


def k8s_env(container: dict[str, Any]) -> dict[str, str]:
    """Image ENV < envFrom ConfigMaps < literal env (secretKeyRef values come from Secrets)."""
    env = dict(image_env())
    maps = k8s_objects("ConfigMap")
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(maps[source["configMapRef"]["name"]]["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def named_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p.get("name") == port)


# --- every file parses, every variable exists ------------------------------------------------------


def test_every_yaml_file_parses_and_the_scripts_are_valid_sh() -> None:
    for path in SCANNED:
        if path.suffix in (".yaml", ".yml"):
            assert list(yaml.safe_load_all(path.read_text())), f"{path} is empty"
        if path.suffix == ".sh":
            done = subprocess.run(["sh", "-n", str(path)], check=False, capture_output=True, text=True)
            assert done.returncode == 0, f"{path}: {done.stderr}"


@pytest.mark.fast
def test_every_shopfloor_variable_named_in_deploy_files_is_a_setting() -> None:
    named: dict[str, set[str]] = {}
    for path in SCANNED:
        for name in re.findall(r"\bSHOPFLOOR_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()):
            named.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    unknown = {name: sorted(where) for name, where in named.items() if name not in ENV_NAMES}
    assert not unknown, f"not a Settings field (shopfloor/settings.py): {unknown}"
    # The scan itself works: the variables every deployment needs are found.
    assert {"SHOPFLOOR_TEMPORAL_ADDRESS", "SHOPFLOOR_BLOB_URL", "SHOPFLOOR_SANDBOX", "SHOPFLOOR_DATA_DIR"} <= set(named)


@pytest.mark.fast
def test_env_example_names_real_settings_and_its_values_validate() -> None:
    for name in {**SHOPFLOOR_ENV, **SHOPFLOOR_ENV_COMMENTED}:
        assert name in ENV_NAMES or name.startswith("AWS_"), f"shopfloor.env.example: {name} is read by nothing"
    settings = settings_for(SHOPFLOOR_ENV)
    assert settings.sandbox == "bwrap"
    # Optional values are commented out, never left empty ("" does not parse as unset).
    assert not [name for name, value in SHOPFLOOR_ENV.items() if value == ""]


# --- the image -----------------------------------------------------------------------------------


@pytest.mark.fast
def test_image_is_built_from_the_wheel_in_two_stages() -> None:
    builder, runtime = dockerfile_stages()[0], dockerfile_stages()[-1]
    assert len(dockerfile_stages()) >= 2
    assert re.search(r"\bAS builder$", builder[0][1], re.IGNORECASE)
    assert any(k == "RUN" and ("pip wheel" in r or "-m build" in r) for k, r in builder)
    args = dict(rest.split("=", 1) for keyword, rest in DOCKERFILE if keyword == "ARG" and "=" in rest)
    base = interpolate(runtime[0][1].split()[0], args)
    assert base.startswith("python:3.11") and "slim" in base, base
    installs = [r for k, r in runtime if k == "RUN" and "pip install" in r]
    assert installs and all("--no-index" in r and "from=builder" in r for r in installs)
    # The builder copies only what dockerignore lets into the context, and the context excludes
    # everything else (no .venv, no deploy/shopfloor.env, no deploy/secrets).
    ignore = [
        line
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert ignore[0] == "*" and not [line for line in ignore if line.startswith("!deploy")]
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {src.rstrip("/") for k, r in builder if k == "COPY" for src in r.split()[:-1]}
    assert copied <= allowed, copied - allowed


@pytest.mark.fast
def test_image_installs_bubblewrap_and_checks_git_for_merge_tree() -> None:
    runtime_runs = " ".join(r for k, r in dockerfile_stages()[-1] if k == "RUN")
    packages = re.search(r"apt-get install (.*?);", runtime_runs)
    assert packages and {"bubblewrap", "git"} <= set(packages[1].split())
    assert re.search(r"dpkg --compare-versions \S+ ge 2\.38\b", runtime_runs)


@pytest.mark.fast
def test_image_runs_as_non_root_with_safe_python_path() -> None:
    user = image_user().split(":")[0]
    assert user not in ("root", "0") and user.isdigit(), f"USER {image_user()}: use a numeric non-root uid"
    env = image_env()
    assert env["PYTHONSAFEPATH"] == "1"
    volumes = [v for k, r in dockerfile_stages()[-1] if k == "VOLUME" for v in json.loads(r)]
    assert env["SHOPFLOOR_DATA_DIR"] in volumes
    assert not SECRET_ENV_NAMES & set(env), "a secret is baked into the image"
    for name in env:
        assert not name.startswith("SHOPFLOOR_") or name in ENV_NAMES, name
    settings = settings_for(env)
    assert str(settings.data_dir) == env["SHOPFLOOR_DATA_DIR"] and settings.sandbox == "bwrap"


@pytest.mark.fast
def test_image_entrypoint_is_the_cli_with_a_real_default_command() -> None:
    runtime = dict(dockerfile_stages()[-1])
    entrypoint, cmd = json.loads(runtime["ENTRYPOINT"]), json.loads(runtime["CMD"])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint[-1] in scripts and entrypoint[-1] == "shopfloor"
    assert cmd[0] in CLI_COMMANDS
    exposed = {int(p.split("/")[0]) for k, r in dockerfile_stages()[-1] if k == "EXPOSE" for p in r.split()}
    assert exposed == {settings_for(image_env()).webhook_port} == {DEFAULT_WEBHOOK_PORT}


# --- compose -------------------------------------------------------------------------------------


@pytest.mark.fast
def test_compose_has_temporal_on_postgres_ui_minio_workers_and_webhooks() -> None:
    services = COMPOSE["services"]
    temporal = services["temporal"]
    assert temporal["image"].startswith("temporalio/server:")
    assert temporal["environment"]["DB"] == "postgres12" and temporal["environment"]["POSTGRES_SEEDS"] in services
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert "minio" in services["minio"]["image"]
    assert services["minio-init"]["depends_on"]["minio"]["condition"] == "service_healthy"
    worker = services["worker"]
    assert worker["command"] == ["worker"] and "container_name" not in worker
    assert isinstance(worker["deploy"]["replicas"], int) and worker["deploy"]["replicas"] >= 1
    # Every ${VAR} compose substitutes is documented in compose.env.example.
    used = set(_VAR.findall((DEPLOY / "compose.yaml").read_text()))
    assert {name for name, *_ in used} <= set(COMPOSE_ENV), {name for name, *_ in used} - set(COMPOSE_ENV)


@pytest.mark.fast
def test_compose_one_shot_jobs_mount_the_scripts_they_run() -> None:
    for name, service in COMPOSE["services"].items():
        entrypoint = service.get("entrypoint") or []
        scripts = [arg for arg in entrypoint if arg.endswith(".sh")]
        for script in scripts:
            mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
            directory, _, filename = script.rpartition("/")
            assert (DEPLOY / mounts[directory] / filename).is_file(), f"{name}: {script} is not in deploy/"
    temporal = COMPOSE["services"]["temporal"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in temporal["volumes"]}
    config = Path("/etc/temporal") / temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    local = DEPLOY / mounts[str(config.parent)] / config.name
    assert isinstance(yaml.safe_load(local.read_text()), dict)


@pytest.mark.fast
def test_compose_commands_are_cli_commands_and_settings_validate() -> None:
    for name, service in shopfloor_services().items():
        assert service["command"][0] in CLI_COMMANDS, f"{name}: shopfloor has no command {service['command'][0]!r}"
        settings = settings_for(compose_env(service))
        host = settings.effective_temporal_address.rpartition(":")[0]
        assert host in COMPOSE["services"], f"{name}: Temporal at {host}, not a compose service"
        assert settings.temporal_namespace == COMPOSE["services"]["temporal-namespace"]["environment"]["NAMESPACE"]
    queues = {settings_for(compose_env(s)).task_queue for s in shopfloor_services().values()}
    assert len(queues) == 1, f"webhooks, workers and setup must share one task queue: {queues}"


@pytest.mark.fast
def test_compose_workers_share_an_s3_blob_store_and_keep_the_sandbox() -> None:
    worker = COMPOSE["services"]["worker"]
    settings = settings_for(compose_env(worker))
    if worker["deploy"]["replicas"] > 1:
        assert (settings.blob_url or "").startswith("s3://"), "several workers need a shared (S3) blob store"
    bucket = settings.blob_url.removeprefix("s3://").split("/")[0]
    assert bucket == COMPOSE["services"]["minio-init"]["environment"]["BLOB_BUCKET"]
    assert settings.s3_endpoint_url and settings.s3_endpoint_url.split("//")[1].split(":")[0] in COMPOSE["services"]
    assert settings.sandbox == "bwrap"
    assert {"seccomp=unconfined", "systempaths=unconfined"} <= set(worker["security_opt"])
    assert str(settings.data_dir) in worker["volumes"]  # one anonymous volume per replica
    assert "seccomp=unconfined" not in COMPOSE["services"]["webhooks"]["security_opt"]


@pytest.mark.fast
def test_compose_webhook_port_matches_what_the_server_binds() -> None:
    webhooks = COMPOSE["services"]["webhooks"]
    settings = settings_for(compose_env(webhooks))
    targets = {int(str(p).rsplit(":", 1)[1]) for p in webhooks["ports"]}
    assert targets == {settings.webhook_port}
    assert settings.webhook_host == "0.0.0.0"
    url = next(arg for arg in webhooks["healthcheck"]["test"] if "http://" in arg)
    port, path = re.search(r"http://[\w.]+:(\d+)(/\w+)", url).groups()
    assert int(port) == settings.webhook_port and path in _get_routes()


@pytest.mark.fast
def test_compose_has_no_literal_secrets_and_no_privileges() -> None:
    for name, service in COMPOSE_RAW["services"].items():
        assert not service.get("privileged") and not service.get("cap_add"), name
        assert str(service.get("user", "")).split(":")[0] not in ("root", "0"), name
    for name in shopfloor_services():
        raw = {**COMPOSE_RAW["x-shopfloor-env"], **(COMPOSE_RAW["services"][name].get("environment") or {})}
        for var, value in raw.items():
            if var in SECRET_ENV_NAMES:
                assert _VAR.fullmatch(str(value)), f"{name}: {var} is set literally in compose.yaml"
    for var, value in COMPOSE_ENV.items():
        if var.endswith(("PASSWORD", "SECRET_KEY")):
            assert value == "", f"compose.env.example ships a value for {var}"
    assert not [n for n, v in SHOPFLOOR_ENV.items() if n in SECRET_ENV_NAMES and v]
    # The GitHub App key is a docker secret, at the path the env file names, which the
    # agents' sandbox does not show.
    assert COMPOSE["secrets"]["github_app_private_key"]["file"].startswith("./secrets/")
    users = {name for name, s in COMPOSE["services"].items() if "github_app_private_key" in s.get("secrets", [])}
    assert users == {"worker"}, f"only workers talk to GitHub: {users}"
    key_file = SHOPFLOOR_ENV_COMMENTED["SHOPFLOOR_GITHUB_APP_PRIVATE_KEY_FILE"]
    assert key_file == "/run/secrets/github_app_private_key"
    assert not shown_by_default(key_file)
    ignored = (DEPLOY / ".gitignore").read_text().split()
    assert {".env", "shopfloor.env", "secrets/*"} <= set(ignored)


# --- Kubernetes -----------------------------------------------------------------------------------


@pytest.mark.fast
def test_k8s_manifests_are_complete_and_in_one_namespace() -> None:
    namespace = next(iter(k8s_objects("Namespace")))
    for filename, docs in K8S_DOCS.items():
        for doc in docs:
            if doc["kind"] not in ("Namespace", "Kustomization"):
                assert doc["metadata"]["namespace"] == namespace, f"{filename}: {doc['metadata']['name']}"
    kustomization = K8S_DOCS["kustomization.yaml"][0]
    assert kustomization["namespace"] == namespace
    assert all((K8S / r).is_file() for r in kustomization["resources"])
    assert "secret.example.yaml" not in kustomization["resources"], "apply -k would overwrite real secrets"
    images = {i["name"] for i in kustomization["images"]}
    for spec in pod_specs().values():
        for container in spec["containers"]:
            assert container["image"].split(":")[0] in images
    for name, deployment in k8s_objects("Deployment").items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items(), name


@pytest.mark.fast
def test_k8s_commands_settings_and_references_resolve() -> None:
    secrets = k8s_objects("Secret")
    for name, spec in pod_specs().items():
        for container in spec["containers"]:
            assert "command" not in container, f"{name}: keep the image's entrypoint"
            assert container["args"][0] in CLI_COMMANDS, f"{name}: shopfloor has no command {container['args'][0]!r}"
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in k8s_objects("ConfigMap")
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in secrets
            for var in container.get("env", []):
                assert var["name"] in ENV_NAMES or var["name"].startswith("AWS_"), var["name"]
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]]["stringData"], ref
            settings = settings_for(k8s_env(container))
            assert settings.temporal_address and re.fullmatch(r"[\w.-]+:\d+", settings.temporal_address)
    for name, value in configmap().items():
        assert name in ENV_NAMES or name.startswith("AWS_"), f"configmap.yaml: {name} is read by nothing"
        assert isinstance(value, str), f"configmap.yaml: {name} must be a string"


@pytest.mark.fast
def test_k8s_pods_run_as_the_image_user_without_privileges() -> None:
    uid = int(image_user().split(":")[0])
    for name, spec in pod_specs().items():
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == uid, name
        assert spec.get("automountServiceAccountToken") is False, name
        for container in spec["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and not sc.get("privileged"), name
            assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], name


@pytest.mark.fast
def test_k8s_worker_can_sandbox_and_shares_only_s3() -> None:
    worker = k8s_objects("Deployment")["shopfloor-worker"]
    spec = worker["spec"]["template"]["spec"]
    container = spec["containers"][0]
    settings = settings_for(k8s_env(container))
    assert settings.sandbox == "bwrap"
    assert spec["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    assert container["securityContext"]["procMount"] == "Unmasked" and spec["hostUsers"] is False
    # Health and metrics on the worker's metrics port, reachable from the kubelet and Prometheus.
    assert settings.worker_metrics_host == "0.0.0.0"
    assert named_port(container, "metrics") == settings.worker_metrics_port
    assert named_port(container, "sdk-metrics") == settings.worker_sdk_metrics_port
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert (named_port(container, get["port"]), get["path"]) == (settings.worker_metrics_port, path), probe
    annotations = worker["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == settings.worker_metrics_port
    if worker["spec"]["replicas"] > 1:
        assert (settings.blob_url or "").startswith("s3://"), "several workers need a shared (S3) blob store"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts[str(settings.data_dir)]], "each worker keeps its own workspaces"
    key_file = Path(str(settings.github_app_private_key_file))
    secret_volume = volumes[mounts[str(key_file.parent)]]["secret"]
    assert key_file.name in k8s_objects("Secret")[secret_volume["secretName"]]["stringData"]
    assert not shown_by_default(str(key_file))


@pytest.mark.fast
def test_k8s_webhook_port_probes_and_service_agree() -> None:
    deployment = k8s_objects("Deployment")["shopfloor-webhooks"]
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    settings = settings_for(k8s_env(container))
    assert settings.webhook_host == "0.0.0.0"
    assert [p["containerPort"] for p in container["ports"]] == [settings.webhook_port]
    routes = _get_routes()
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert named_port(container, get["port"]) == settings.webhook_port and get["path"] in routes, probe
    service = k8s_objects("Service")["shopfloor-webhooks"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert [named_port(container, p["targetPort"]) for p in service["spec"]["ports"]] == [settings.webhook_port]
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"


@pytest.mark.fast
def test_k8s_secrets_are_placeholders_and_stay_out_of_the_configmap() -> None:
    assert not SECRET_ENV_NAMES & set(configmap()), "a secret in the ConfigMap"
    secrets = k8s_objects("Secret")
    assert secrets
    for name, secret in secrets.items():
        assert "data" not in secret, f"{name}: use stringData placeholders"
        for key, value in secret["stringData"].items():
            assert "REPLACE_ME" in value, f"secret.example.yaml: {name}/{key} is not a placeholder"


def _seconds(duration: str | int) -> float:
    """A compose duration (`2m`, `90s`, `1m30s`) or a plain number of seconds."""
    if isinstance(duration, int):
        return float(duration)
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a duration: {duration!r}"
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


@pytest.mark.fast
def test_workers_finish_running_activities_before_the_orchestrator_kills_them() -> None:
    """The worker's shutdown grace must end before SIGKILL, or the cancelled activities are not
    reported and wait out their heartbeat timeouts instead of being retried at once."""
    worker = COMPOSE["services"]["worker"]
    grace = settings_for(compose_env(worker)).worker_shutdown_grace_seconds
    assert 0 < grace < _seconds(worker["stop_grace_period"])
    pod = pod_specs()["shopfloor-worker"]
    (container,) = pod["containers"]
    grace = settings_for(k8s_env(container)).worker_shutdown_grace_seconds
    assert 0 < grace < pod["terminationGracePeriodSeconds"]


# --- Kubernetes: Temporal connection, secrets, autoscaling, network policy ----------------------

K8S_MTLS = DEPLOY / "k8s-mtls"
# Every setting that shapes the connection to Temporal, from Settings itself (the UI's and the
# embedded dev server's ports are not part of it), plus the one queue everything shares.
TEMPORAL_CONNECTION = {
    env
    for env, field in ENV_NAMES.items()
    if field.startswith("temporal_") and field not in ("temporal_ui_url", "temporal_ui_port", "temporal_port")
} | {"SHOPFLOOR_TASK_QUEUE"}
TEMPORAL_TLS_SECRET = "shopfloor-temporal-tls"


def example_secrets() -> dict[str, set[str]]:
    """Secret name -> its keys, as secret.example.yaml documents them."""
    return {name: set(secret["stringData"]) for name, secret in k8s_objects("Secret").items()}


def env_sources(container: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Variable -> where the container gets it (the last source wins, as in Kubernetes):
    ("configMap", name, value), ("secret", name, key, optional) or ("value", value)."""
    maps, secrets = k8s_objects("ConfigMap"), example_secrets()
    sources: dict[str, tuple[str, ...]] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            sources.update({var: ("configMap", name, value) for var, value in maps[name]["data"].items()})
        if "secretRef" in source:
            name = source["secretRef"]["name"]
            sources.update({key: ("secret", name, key, "optional") for key in secrets[name]})
    for var in container.get("env", []):
        if "value" in var:
            sources[var["name"]] = ("value", var["value"])
        elif ref := var.get("valueFrom", {}).get("secretKeyRef"):
            sources[var["name"]] = ("secret", ref["name"], ref["key"], "optional" if ref.get("optional") else "")
    return sources


def secret_mounts(spec: dict[str, Any], container: dict[str, Any], secret: str) -> set[tuple[Any, ...]]:
    """(mount path, read-only, optional, mode) of each mount of Secret `secret` in the container."""
    volumes = {v["name"]: v["secret"] for v in spec.get("volumes", []) if "secret" in v}
    return {
        (m["mountPath"], m.get("readOnly"), volumes[m["name"]].get("optional"), volumes[m["name"]].get("defaultMode"))
        for m in container.get("volumeMounts", [])
        if m["name"] in volumes and volumes[m["name"]]["secretName"] == secret
    }


def temporal_clients() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """'pod/container' -> (pod spec, container) for every container that connects to Temporal."""
    return {
        f"{name}/{c['name']}": (spec, c)
        for name, spec in pod_specs().items()
        for c in spec["containers"]
        if "SHOPFLOOR_TEMPORAL_ADDRESS" in env_sources(c)
    }


def mtls_overlay_env() -> dict[str, str]:
    """What the overlay deploy/k8s-mtls merges into the ConfigMap."""
    kustomization = yaml.safe_load((K8S_MTLS / "kustomization.yaml").read_text())
    patches = [yaml.safe_load((K8S_MTLS / p).read_text()) for p in kustomization["patchesStrategicMerge"]]
    (patch,) = [p for p in patches if p["kind"] == "ConfigMap" and p["metadata"]["name"] == "shopfloor-config"]
    return patch["data"]


@pytest.mark.fast
def test_k8s_every_temporal_client_connects_the_same_way() -> None:
    clients = temporal_clients()
    assert {name.split("/")[0] for name in clients} >= {"shopfloor-worker", "shopfloor-webhooks", "shopfloor-setup"}
    connections = {
        name: (
            {var: src for var, src in env_sources(c).items() if var in TEMPORAL_CONNECTION},
            secret_mounts(spec, c, TEMPORAL_TLS_SECRET),
        )
        for name, (spec, c) in clients.items()
    }
    (first, (env, mounts)), *others = connections.items()
    for name, connection in others:
        assert connection == (env, mounts), f"{name} connects to Temporal unlike {first}"
    # What they share is the whole connection: the API key from the Secret, the TLS switch, and
    # the client certificate's Secret mounted (optionally, so pods start without mTLS).
    assert env["SHOPFLOOR_TEMPORAL_API_KEY"][:2] == ("secret", "shopfloor-env")
    assert {"SHOPFLOOR_TEMPORAL_ADDRESS", "SHOPFLOOR_TEMPORAL_NAMESPACE", "SHOPFLOOR_TEMPORAL_TLS"} <= set(env)
    ((mount_path, read_only, optional, _mode),) = mounts
    assert read_only and optional
    # The overlay points the certificate settings at that mount, at keys the Secret documents, and
    # the result validates (a client pair is complete).
    overlay = mtls_overlay_env()
    files = {var: Path(path) for var, path in overlay.items() if var.endswith("_FILE")}
    assert set(files) == {var for var in TEMPORAL_CONNECTION if var.startswith("SHOPFLOOR_TEMPORAL_TLS_")} - {
        "SHOPFLOOR_TEMPORAL_TLS"
    }
    assert {str(path.parent) for path in files.values()} == {mount_path}
    assert {path.name for path in files.values()} <= example_secrets()[TEMPORAL_TLS_SECRET]
    _, worker = clients["shopfloor-worker/worker"]
    settings = settings_for({**k8s_env(worker), **overlay})
    assert settings.temporal_tls_cert_file and settings.temporal_tls_key_file and settings.temporal_tls_ca_file
    # The agents' sandbox does not show the key to the commands it runs.
    assert not shown_by_default(str(settings.temporal_tls_key_file))


@pytest.mark.fast
def test_k8s_every_referenced_secret_is_in_the_example() -> None:
    """Every Secret name and key a manifest reads is in secret.example.yaml, so an operator who
    creates the Secrets it shows misses none; and a mounted Secret is readable by the pod's user."""
    secrets = example_secrets()
    referenced: set[tuple[str, str | None]] = set()
    for name, spec in pod_specs().items():
        secret_volumes = {v["name"]: v["secret"] for v in spec.get("volumes", []) if "secret" in v}
        for volume in secret_volumes.values():
            referenced.add((volume["secretName"], None))
            referenced.update((volume["secretName"], item["key"]) for item in volume.get("items", []))
            # Secret files are root's: the pod's user reads them through fsGroup.
            assert spec["securityContext"].get("fsGroup") == spec["securityContext"]["runAsGroup"], name
        for container in spec["containers"]:
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    referenced.add((source["secretRef"]["name"], None))
            for var in container.get("env", []):
                if ref := var.get("valueFrom", {}).get("secretKeyRef"):
                    referenced.add((ref["name"], ref["key"]))
    for auth in k8s_objects("TriggerAuthentication").values():
        referenced.update((ref["name"], ref["key"]) for ref in auth["spec"].get("secretTargetRef", []))
    missing = sorted(f"{s}/{k}" if k else s for s, k in referenced if s not in secrets or (k and k not in secrets[s]))
    assert not missing, f"referenced but not in deploy/k8s/secret.example.yaml: {missing}"
    assert {"shopfloor-env", "shopfloor-github-app", TEMPORAL_TLS_SECRET} <= {s for s, _ in referenced}


@pytest.mark.fast
def test_k8s_keda_scales_the_worker_on_its_own_task_queue() -> None:
    (scaled,) = k8s_objects("ScaledObject").values()
    worker = k8s_objects("Deployment")["shopfloor-worker"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert scaled["spec"]["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    assert scaled["metadata"]["labels"].items() <= worker["spec"]["template"]["metadata"]["labels"].items()
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    (trigger,) = scaled["spec"]["triggers"]
    meta = trigger["metadata"]
    settings = settings_for(k8s_env(worker["spec"]["template"]["spec"]["containers"][0]))
    assert trigger["type"] == "temporal"
    assert meta["endpoint"] == settings.temporal_address
    assert meta["namespace"] == settings.temporal_namespace and meta["taskQueue"] == settings.task_queue
    # One queue carries both kinds of task: both count as backlog.
    assert set(meta["queueTypes"].split(",")) == {"workflow", "activity"}
    assert int(meta["targetQueueSize"]) >= 1
    auth = k8s_objects("TriggerAuthentication")[trigger["authenticationRef"]["name"]]
    assert {ref["parameter"] for ref in auth["spec"]["secretTargetRef"]} == {"apiKey"}
    # KEDA's CRDs are not in every cluster: the default kustomization leaves it out.
    assert "autoscaling.yaml" not in K8S_DOCS["kustomization.yaml"][0]["resources"]


def _rule_ports(rule: dict[str, Any]) -> set[tuple[str, int | str]]:
    return {(p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports", [])}


@pytest.mark.fast
def test_k8s_network_policies_fit_the_pods_and_their_ports() -> None:
    policies = k8s_objects("NetworkPolicy")
    deployments = k8s_objects("Deployment")
    temporal_host, _, temporal_port = configmap()["SHOPFLOOR_TEMPORAL_ADDRESS"].rpartition(":")
    temporal_ns = temporal_host.split(".")[1]  # <service>.<namespace>
    for component, incoming in (("worker", {"metrics", "sdk-metrics"}), ("webhooks", {"http"})):
        deployment = deployments[f"shopfloor-{component}"]
        template = deployment["spec"]["template"]
        (policy,) = [
            p for p in policies.values() if p["spec"]["podSelector"]["matchLabels"] == template["metadata"]["labels"]
        ]
        assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        # In: only the named port, which the container has.
        container = template["spec"]["containers"][0]
        assert {port for rule in policy["spec"]["ingress"] for _, port in _rule_ports(rule)} == incoming
        assert all(named_port(container, port) for port in incoming)
        # Out: DNS, Temporal's namespace on its port, and public 443 without the metadata address.
        egress = policy["spec"]["egress"]
        assert any({("UDP", 53), ("TCP", 53)} <= _rule_ports(rule) for rule in egress), component
        to_temporal = [
            rule
            for rule in egress
            for peer in rule["to"]
            if peer.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name")
            == temporal_ns
        ]
        assert to_temporal and all(_rule_ports(r) == {("TCP", int(temporal_port))} for r in to_temporal), component
        public = [peer["ipBlock"] for rule in egress if ("TCP", 443) in _rule_ports(rule) for peer in rule["to"]]
        assert public and all("169.254.0.0/16" in block["except"] for block in public), component
    worker_policy = policies["shopfloor-worker"]
    (scrape,) = worker_policy["spec"]["ingress"]
    assert [peer["namespaceSelector"] for peer in scrape["from"]], "metrics only from the monitoring namespace"


def _kubectl() -> str:
    import shutil

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed: .ci/run installs it (apt-get install kubernetes-client)")
    return kubectl


def _kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([_kubectl(), "kustomize", str(directory)], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"kubectl kustomize {directory}:\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _ids(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def test_kubectl_kustomize_renders_every_object(tmp_path: Path) -> None:
    """The default kustomization, the mTLS overlay, and (in a copy) the KEDA objects render with
    the kubectl installed (CI: Debian's 1.20, whose kustomize is old), in one namespace."""
    kustomization = K8S_DOCS["kustomization.yaml"][0]
    listed = {i for r in kustomization["resources"] for i in _ids(K8S_DOCS[r])}
    rendered = _kustomize(K8S)
    assert _ids(rendered) == listed
    namespace = kustomization["namespace"]
    assert {d["metadata"].get("namespace") for d in rendered if d["kind"] != "Namespace"} == {namespace}
    image = f"{kustomization['images'][0]['newName']}:{kustomization['images'][0]['newTag']}"
    for doc in rendered:
        if doc["kind"] in ("Deployment", "Job"):
            assert {c["image"] for c in doc["spec"]["template"]["spec"]["containers"]} == {image}
    # The overlay: the same objects, the certificate settings merged into the ConfigMap.
    overlay = _kustomize(K8S_MTLS)
    assert _ids(overlay) == listed
    (config,) = [d for d in overlay if d["kind"] == "ConfigMap"]
    assert mtls_overlay_env().items() <= config["data"].items()
    assert configmap().keys() <= config["data"].keys()
    # KEDA's kinds are unknown to kustomize and still render (apply needs KEDA's CRDs).
    copy = tmp_path / "k8s"
    copy.mkdir()
    for path in K8S.glob("*.yaml"):
        (copy / path.name).write_text(path.read_text())
    kustomization = {**kustomization, "resources": [*kustomization["resources"], "autoscaling.yaml"]}
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    with_keda = _kustomize(copy)
    assert _ids(with_keda) == listed | _ids(K8S_DOCS["autoscaling.yaml"])
    assert {d["metadata"]["namespace"] for d in with_keda if d["kind"] != "Namespace"} == {namespace}
