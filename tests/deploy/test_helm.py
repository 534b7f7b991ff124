"""The Helm chart (deploy/helm/blackbox) lints, renders and validates offline, for its default values and
a production-like values file.

Rendered manifests are checked against the Kubernetes API's own schemas (the kubernetes-validate
package bundles them; strict: an unknown field fails) and against the project's invariants: every
container non-root on a read-only root filesystem with requests and limits, every service probed on
/healthz and /readyz, secrets only in Secrets, settings that the code reads, commands the CLI accepts.
helm is the pinned build deploy/local/test.sh installs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cli_args import cli_refuses, listening_problem
from helm_chart import CHART, PRODUCTION, ROOT, find_helm, helm_out, kinds, pod_specs, render

from consumers.app.settings import ServiceSettings

# The oldest Kubernetes the chart claims (Chart.yaml kubeVersion) and the newest the package knows.
KUBERNETES = ("1.27.0", kubernetes_validate.latest_version())
# What holds a credential: never in a ConfigMap (the chart refuses it; the test checks the output too).
SECRET_SETTINGS = frozenset(
    {
        "BLACKBOX_S3_ACCESS_KEY",
        "BLACKBOX_S3_SECRET_KEY",
        "BLACKBOX_CLICKHOUSE_URL",
        "BLACKBOX_QUERY_CLICKHOUSE_URL",
        "BLACKBOX_SIGNING_KEY_B64",
        "BLACKBOX_MODEL_API_KEY",
    }
)
SERVICES = {"serve", "ingest", "otlp"}
# Values the chart README documents as one row (maps handed to Kubernetes or to the settings as a whole).
WHOLE = re.compile(
    r"^(settings|secretEnv\.values|podSecurityContext|containerSecurityContext|probes\.\w+)$"
    r"|(^|\.)(resources|affinity|podAnnotations|annotations|labels|nodeSelector)$"
)


@pytest.fixture(scope="module")
def helm() -> Path:
    return find_helm()


@pytest.fixture(scope="module", params=["default", "production"])
def rendered(request: pytest.FixtureRequest, helm: Path) -> list[dict[str, Any]]:
    return render(helm, *([PRODUCTION] if request.param == "production" else []))


def invariant_violations(docs: list[dict[str, Any]]) -> list[str]:
    """What breaks the project's rules for a workload, one line each (empty: none)."""
    wrong: list[str] = []
    for component, template, _owner in pod_specs(docs):
        spec = template["spec"]
        pod_security = spec.get("securityContext", {})
        if not pod_security.get("runAsNonRoot") or not pod_security.get("runAsUser"):
            wrong.append(f"{component}: the pod does not run as a numeric non-root user")
        if spec.get("automountServiceAccountToken") is not False:
            wrong.append(f"{component}: mounts a service account token it never uses")
        for container in spec["containers"]:
            where = f"{component}/{container['name']}"
            security = container.get("securityContext", {})
            if security.get("readOnlyRootFilesystem") is not True:
                wrong.append(f"{where}: the root filesystem is writable")
            if security.get("allowPrivilegeEscalation") is not False:
                wrong.append(f"{where}: privilege escalation is allowed")
            if security.get("capabilities", {}).get("drop") != ["ALL"]:
                wrong.append(f"{where}: capabilities are not all dropped")
            resources = container.get("resources", {})
            for kind in ("requests", "limits"):
                if set(resources.get(kind, {})) != {"cpu", "memory"}:
                    wrong.append(f"{where}: no cpu and memory {kind}")
            if component in SERVICES:  # a long-running service is probed; a one-shot job is not
                ports = {p["name"] for p in container.get("ports", [])}
                for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                    get = container.get(probe, {}).get("httpGet", {})
                    if get.get("path") != path or get.get("port") not in ports:
                        wrong.append(f"{where}: no {probe} on {path} at a declared port")
    for name, config in kinds(docs, "ConfigMap").items():
        leaked = SECRET_SETTINGS & set(config.get("data") or {})
        if leaked:
            wrong.append(f"ConfigMap {name} holds secrets: {sorted(leaked)}")
    return wrong


# --- lint and render -------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ["default", "production"])
def test_the_chart_lints_strictly(helm: Path, values: str) -> None:
    extra: list[str | Path] = ["-f", PRODUCTION] if values == "production" else []
    out = helm_out(helm, "lint", "--strict", CHART, *extra)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_every_rendered_manifest_is_valid_against_the_kubernetes_api_schemas(rendered: list[dict]) -> None:
    kinds = sorted({d["kind"] for d in rendered})
    assert {"Deployment", "CronJob", "Service", "PodDisruptionBudget", "ConfigMap"} <= set(kinds)
    for doc in rendered:
        if doc["kind"] == "ServiceMonitor":  # a prometheus-operator CRD: checked on its own below
            continue
        for version in KUBERNETES:
            # strict: a misspelt or misplaced field is an error, not ignored
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validation_refuses_a_misplaced_field(rendered: list[dict]) -> None:
    (ingest,) = (
        d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-ingest")
    )
    broken = yaml.safe_load(yaml.safe_dump(ingest))
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {"httpGet": {"path": "/healthz"}}
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(broken, KUBERNETES[1], strict=True)


def test_every_workload_keeps_the_projects_invariants(rendered: list[dict]) -> None:
    assert invariant_violations(rendered) == []
    assert {c for c, _, _ in pod_specs(rendered)} == SERVICES | {"compaction"}


def test_the_invariant_check_names_what_is_broken(rendered: list[dict]) -> None:
    broken = yaml.safe_load_all(yaml.safe_dump_all(rendered))
    docs = [d for d in broken if d]
    for _component, template, _owner in pod_specs(docs):
        container = template["spec"]["containers"][0]
        container.pop("readinessProbe", None)
        del container["resources"]["limits"]
        container["securityContext"]["readOnlyRootFilesystem"] = False
    wrong = invariant_violations(docs)
    assert "ingest/ingest: no readinessProbe on /readyz at a declared port" in wrong
    assert "compaction/compaction: no cpu and memory limits" in wrong
    assert "serve/serve: the root filesystem is writable" in wrong


# --- what each part of the chart promises ----------------------------------------------------------


def test_ingest_runs_several_replicas_under_a_disruption_budget(rendered: list[dict]) -> None:
    deployments = kinds(rendered, "Deployment")
    ingest = deployments["evidence-blackbox-ingest"]
    assert ingest["spec"]["replicas"] > 1
    (budget,) = kinds(rendered, "PodDisruptionBudget").values()
    assert budget["spec"]["selector"] == ingest["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1


def test_compaction_is_a_cron_job_that_never_overlaps(rendered: list[dict]) -> None:
    (job,) = kinds(rendered, "CronJob").values()
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    template = job["spec"]["jobTemplate"]["spec"]["template"]
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["spec"]["containers"][0]["args"][0] == "compact"


def test_the_cli_check_refuses_a_flag_the_command_lacks() -> None:
    assert cli_refuses(["consume", "--listen", "0.0.0.0:9464"]) == (
        "blackbox consume --listen 0.0.0.0:9464: No such option: --listen (Possible options: --metrics-listen)"
    )
    assert cli_refuses(["ingest"]) == "no command ingest"
    assert listening_problem(["otlp", "--listen", "0.0.0.0:4318"]) == (
        "blackbox otlp --listen 0.0.0.0:4318 listens beyond loopback without --allow-remote"
    )


def test_every_command_and_flag_is_one_the_cli_accepts(rendered: list[dict]) -> None:
    for component, template, _ in pod_specs(rendered):
        (container,) = template["spec"]["containers"]
        args = [str(a) for a in container["args"]]
        assert cli_refuses(args) is None
        assert listening_problem(args) is None
        listen = [a for a in args if re.fullmatch(r"0\.0\.0\.0:\d+", a)]
        if component in SERVICES:
            # the service listens where its probes, its Service and its scrape annotation point
            (address,) = listen
            (port,) = container["ports"]
            assert address == f"0.0.0.0:{port['containerPort']}"


def test_settings_come_from_a_config_map_and_secrets_from_secrets(rendered: list[dict]) -> None:
    fields = {f"BLACKBOX_{name.upper()}" for name in ServiceSettings.model_fields}
    configs = kinds(rendered, "ConfigMap")
    settings = configs["evidence-blackbox-settings"]["data"]
    assert set(settings) <= fields, set(settings) - fields
    assert not SECRET_SETTINGS & set(settings)
    secrets = kinds(rendered, "Secret")
    for secret in secrets.values():
        assert set(secret.get("stringData") or {}) <= fields
    for component, template, _ in pod_specs(rendered):
        (container,) = template["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert set(env) <= fields, f"{component} sets variables no setting reads: {set(env) - fields}"
        # the evidence keys are files of a Secret mounted read-only, never created in the pod
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        for variable in ("BLACKBOX_KEK_FILE", "BLACKBOX_INDEX_ID_KEY_FILE", "BLACKBOX_TLOG_KEY"):
            assert env[variable].startswith("/etc/blackbox/keys/")
        assert mounts["/etc/blackbox/keys"]["readOnly"] is True
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert "secret" in volumes[mounts["/etc/blackbox/keys"]["name"]]
        assert {"configMapRef", "secretRef"} == {next(iter(s)) for s in container["envFrom"]}
        # only the OTLP receiver seals captures: only its pod holds a signing key, from its own Secret
        assert ("BLACKBOX_SIGNING_KEY" in env) == (component == "otlp"), component
        if component == "otlp":
            assert env["BLACKBOX_SIGNING_KEY"].startswith(mounts["/etc/blackbox/signing"]["mountPath"])
            assert "secret" in volumes[mounts["/etc/blackbox/signing"]["name"]]


def test_the_configuration_files_are_ones_the_code_loads(helm: Path, tmp_path: Path) -> None:
    from consumers.retention.policy import load_policy
    from producers.evidence import TrustStore
    from producers.pacts.book import parse_pacts

    docs = render(helm, PRODUCTION)
    files = kinds(docs, "ConfigMap")["evidence-blackbox-files"]["data"]
    assert set(files) == {"trust.toml", "retention.toml", "pacts.toml"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    trusted = TrustStore.load(tmp_path / "trust.toml")
    key_id = "sha256:56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c"
    assert (record := trusted.get(key_id)) is not None and record.note == "support agents, eu1"
    assert load_policy(tmp_path / "retention.toml").name == "acme-2026"
    assert [rule.name for rule in parse_pacts(files["pacts.toml"]).rules] == ["refund_within_disputed_charge"]
    deployments = kinds(docs, "Deployment")
    env = {
        e["name"]: e["value"]
        for e in deployments["evidence-blackbox-ingest"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["BLACKBOX_TRUST_STORE"] == "/etc/blackbox/config/trust.toml"
    assert env["BLACKBOX_RETENTION_POLICY"] == "/etc/blackbox/config/retention.toml"
    assert env["BLACKBOX_PACTS"] == "/etc/blackbox/config/pacts.toml"


def test_a_secret_put_among_the_settings_is_refused_naming_it(helm: Path) -> None:
    proc = subprocess.run(
        [helm, "template", "evidence", CHART, "--set", "settings.BLACKBOX_S3_SECRET_KEY=oops"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "settings.BLACKBOX_S3_SECRET_KEY holds a secret: put it in secretEnv.values" in proc.stderr


def test_metrics_are_announced_for_scraping_and_by_an_optional_service_monitor(helm: Path) -> None:
    default = render(helm)
    for component, template, _ in pod_specs(default):
        annotations = template["metadata"]["annotations"]
        if component in SERVICES:
            (port,) = template["spec"]["containers"][0]["ports"]
            assert annotations["prometheus.io/scrape"] == "true"
            assert annotations["prometheus.io/port"] == str(port["containerPort"])
            assert annotations["prometheus.io/path"] == "/metrics"
        else:
            assert "prometheus.io/scrape" not in annotations
    assert not kinds(default, "ServiceMonitor")

    production = render(helm, PRODUCTION)
    (monitor,) = kinds(production, "ServiceMonitor").values()
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = kinds(production, "Service")
    selected = {name for name, s in services.items() if selector.items() <= s["metadata"]["labels"].items()}
    assert selected == {f"evidence-blackbox-{c}" for c in SERVICES}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert all(endpoint["port"] in {p["name"] for p in s["spec"]["ports"]} for s in services.values())


def test_services_and_the_ingress_reach_the_pods_they_name(helm: Path) -> None:
    docs = render(helm, PRODUCTION)
    deployments = kinds(docs, "Deployment")
    for name, service in kinds(docs, "Service").items():
        pods = deployments[name]["spec"]["template"]
        assert service["spec"]["selector"].items() <= pods["metadata"]["labels"].items()
        ports = {p["name"] for p in pods["spec"]["containers"][0]["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    (ingress,) = kinds(docs, "Ingress").values()
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert path["backend"]["service"] == {"name": "evidence-blackbox-serve", "port": {"name": "http"}}
    assert ingress["spec"]["tls"][0]["hosts"] == [rule["host"]]


def test_serve_keeps_its_grants_on_a_volume_and_refuses_a_second_replica(helm: Path) -> None:
    docs = render(helm)
    serve = kinds(docs, "Deployment")["evidence-blackbox-serve"]
    assert serve["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in serve["spec"]["template"]["spec"]["volumes"]}
    (claim,) = kinds(docs, "PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
    proc = subprocess.run(
        [helm, "template", "evidence", CHART, "--set", "serve.replicas=2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and "so serve.replicas must be 1" in proc.stderr, proc.stderr


def test_the_chart_readme_documents_every_value(helm: Path) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    documented = set(
        re.findall(r"^\| `([\w.]+)` \|", (CHART / "README.md").read_text(encoding="utf-8"), re.M)
    )

    def leaves(node: Any, prefix: str) -> Iterator[str]:
        if isinstance(node, dict) and node and not WHOLE.search(prefix):
            for key, value in node.items():
                yield from leaves(value, f"{prefix}.{key}" if prefix else key)
        else:
            yield prefix

    assert set(leaves(values, "")) == documented


def test_the_key_commands_the_chart_readme_shows_make_keys_the_services_load(tmp_path: Path) -> None:
    from consumers.tlog.checkpoints import load_log_signer
    from producers.evidence import TrustStore, load_signer
    from producers.privacy.keys import read_or_create_key_file

    readme = (CHART / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```bash\n(.*?)```", readme, flags=re.DOTALL)
    # the lines that make the keys; kubectl and helm need a cluster
    making = [line for line in block.splitlines() if line and not line.startswith(("#", "kubectl", "helm"))]
    assert len(making) == 3, making
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    env["BLACKBOX_DATA_DIR"] = str(tmp_path / "data")
    subprocess.run(["bash", "-euc", "\n".join(making)], cwd=tmp_path, env=env, check=True, timeout=120)
    keys = tmp_path / "keys"
    assert sorted(p.name for p in keys.iterdir()) == ["index_id.key", "kek.key", "tlog.key"]
    for name in ("kek.key", "index_id.key"):
        assert len(read_or_create_key_file(keys / name)) == 32
    signer = load_log_signer(keys / "tlog.key", "evidence.acme.example/log", create=False)
    assert signer.origin == "evidence.acme.example/log"
    assert "kubectl create secret generic blackbox-keys --from-file=keys/" in block
    # the receiver's key: one private key, the one the trust store now trusts
    (private,) = (tmp_path / "otlp-key").glob("*.key")
    signing = load_signer(private)
    record = TrustStore.load(tmp_path / "data" / "trust.toml").get(signing.key_id)
    assert record is not None and record.note == "OTLP receiver"
    assert (
        'kubectl create secret generic blackbox-otlp-signing-key --from-file=signing.key="$(ls otlp-key/*.key)"'
        in block
    )


def test_the_readmes_install_command_installs_as_a_client_side_dry_run(helm: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = re.findall(r"`(helm install [^`]+)`", readme)
    words = shlex.split(line)
    assert words[:4] == ["helm", "install", "evidence", "deploy/helm/blackbox"] and words[4] == "-f"
    # the README's own values file stands for the production-like one; no cluster: a client dry run
    args: list[str | Path] = [*words[1:3], ROOT / words[3], "-f", PRODUCTION, *words[6:], "--dry-run=client"]
    out = helm_out(helm, *args)
    assert "STATUS: pending-install" in out and "DESCRIPTION: Dry run complete" in out
    assert "The pods start once the Secret blackbox-evidence-keys" in out


@pytest.mark.parametrize(
    ("assignment", "named"),
    [
        ("ingest.replicaz=3", "additional properties 'replicaz' not allowed"),
        ("ingest.replicas=0", "/ingest/replicas': minimum: got 0, want 1"),
        ("settings.blackbox_topic=x", "invalid propertyName 'blackbox_topic'"),
        ("keys.existingSecret=", "/keys/existingSecret': minLength: got 0, want 1"),
    ],
)
def test_the_values_schema_refuses_a_wrong_value_naming_it(helm: Path, assignment: str, named: str) -> None:
    proc = subprocess.run(
        [helm, "template", "evidence", CHART, "--set", assignment],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and named in proc.stderr, proc.stderr
