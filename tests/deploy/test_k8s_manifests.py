"""The Kubernetes manifests (deploy/k8s): Kubernetes' JSON schemas offline, and the cross-references no schema sees.

The manifests are plain YAML listed by kustomization files, so the test loads them with PyYAML and applies
the two transforms the base uses (``namespace`` and ``images``); where kubectl is installed, it also checks
that ``kubectl kustomize`` renders exactly the same objects. Each check is shown to reject a broken copy.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
# the oldest release whose schemas know every field used (container appArmorProfile: 1.30), and the newest shipped
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
CLUSTER_SCOPED = {"Namespace"}
Doc = dict[str, Any]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("agentenvs_k8s_generate", K8S / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


def _pod_specs(doc: Doc) -> Iterator[Doc]:
    if doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
        yield doc["spec"]["template"]["spec"]


def _containers(doc: Doc) -> Iterator[Doc]:
    for pod in _pod_specs(doc):
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


def _retag(image: str, rules: list[Doc]) -> str:
    name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    for rule in rules:
        if rule["name"] == name:
            return f"{rule.get('newName', name)}:{rule.get('newTag', tag)}"
    return image


def load(folder: Path) -> list[Doc]:
    """The objects ``kubectl kustomize folder`` renders, for kustomizations made of resources, namespace and images."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))
    unknown = set(kustomization) - {"apiVersion", "kind", "resources", "namespace", "images"}
    assert not unknown, f"{folder}: the test's loader does not apply {sorted(unknown)}; extend load()"
    docs: list[Doc] = []
    for resource in kustomization["resources"]:
        path = folder / resource
        if path.is_dir():
            docs += load(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    namespace = kustomization.get("namespace")
    for doc in docs:
        if namespace and doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"]["namespace"] = namespace
        for container in _containers(doc):
            container["image"] = _retag(container["image"], kustomization.get("images", []))
    return docs


BASE = load(K8S)
ADAPTER = load(K8S / "prometheus-adapter")


def _key(doc: Doc) -> str:
    return f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"


def _named(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _quantity(value: str | int | float) -> float:
    """A Kubernetes quantity (``500m``, ``2``, ``4Gi``, ``512Mi``) as a number."""
    text = str(value)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text)
    assert match and (not match[2] or match[2] in suffixes), f"not a quantity: {text!r}"
    return float(match[1]) * suffixes.get(match[2], 1.0)


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def schema_errors(docs: list[Doc], version: str) -> list[str]:
    """Every object against Kubernetes ``version``'s strict JSON schema (unknown fields are errors)."""
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{_key(doc)}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{_key(doc)}: {exc.message}")
    return errors


SANDBOX = "agentenvs-shellops"  # bubblewrap's sandbox needs root and an unmasked /proc: privileged


def _serving_problems(where: str, container: Doc) -> list[str]:
    """A server container: probes on /healthz at its port (an env server's readiness on /readyz, which turns
    not-ready while no worker can take a session), the token from the Secret, a bind beyond loopback."""
    problems = []
    ports = {p["containerPort"] for p in container.get("ports", [])}
    names = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    env_server = container.get("command") == ["agentenvs", "serve"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container.get(probe, {}).get("httpGet")
        path = "/readyz" if env_server and probe == "readinessProbe" else "/healthz"
        if get is None:
            problems.append(f"{where}: no {probe} over HTTP")
        elif get.get("path") != path or names.get(get["port"], get["port"]) not in ports:
            problems.append(f"{where}: {probe} asks {get.get('path')} on {get['port']}, not {path} on its port")
    token = {e["name"]: e for e in container.get("env", [])}.get("AGENTENVS_TOKEN", {})
    ref = token.get("valueFrom", {}).get("secretKeyRef", {})
    if "value" in token or (ref.get("name"), ref.get("key")) != (GENERATE.TOKEN_SECRET, GENERATE.TOKEN_KEY):
        problems.append(f"{where}: AGENTENVS_TOKEN must come from the Secret {GENERATE.TOKEN_SECRET}")
    if "--token" in container.get("args", []):
        problems.append(f"{where}: a token on the command line is visible in the pod spec")
    if "0.0.0.0" not in container.get("args", []):
        problems.append(f"{where}: the server binds loopback by default; pass --host 0.0.0.0")
    return problems


def _limits_problems(where: str, container: Doc) -> list[str]:
    problems = []
    resources = container.get("resources", {})
    for kind in ("cpu", "memory"):
        request = resources.get("requests", {}).get(kind)
        limit = resources.get("limits", {}).get(kind)
        if request is None or limit is None:
            problems.append(f"{where}: {kind} needs a request and a limit")
        elif _quantity(request) > _quantity(limit):
            problems.append(f"{where}: {kind} request {request} over its limit {limit}")
    return problems


def _security_problems(where: str, pod: Doc, container: Doc, sandbox: bool) -> list[str]:
    problems = []
    context = container.get("securityContext", {})
    runs_as = {**pod.get("securityContext", {}), **context}
    if context.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: the root file system must be read-only")
    if sandbox:
        if context.get("privileged") is not True or runs_as.get("runAsUser") != 0:
            problems.append(f"{where}: the shellops sandbox needs root in a privileged container")
        return problems
    if context.get("privileged"):
        problems.append(f"{where}: only the shellops sandbox may be privileged")
    if "ALL" not in context.get("capabilities", {}).get("drop", []) or context.get("capabilities", {}).get("add"):
        problems.append(f"{where}: capabilities must drop ALL and add none")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: allowPrivilegeEscalation must be false")
    if not (runs_as.get("runAsNonRoot") and runs_as.get("runAsUser", 0) > 0):
        problems.append(f"{where}: must run as a non-root uid")
    if runs_as.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append(f"{where}: seccomp must be RuntimeDefault")
    return problems


def workload_problems(docs: list[Doc]) -> list[str]:
    """Probes, token, resources and security context of every container (init containers: no probes, token)."""
    problems = []
    privileged_namespace = any(
        d["kind"] == "Namespace" and d["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "privileged"
        for d in docs
    )
    for doc in docs:
        sandbox = doc["metadata"]["name"] == SANDBOX
        for pod in _pod_specs(doc):
            if pod.get("automountServiceAccountToken") is not False:
                problems.append(f"{_key(doc)}: the servers need no Kubernetes API token; do not mount one")
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                where = f"{_key(doc)} container {container['name']}"
                if container in pod["containers"]:
                    problems += _serving_problems(where, container)
                problems += _limits_problems(where, container)
                problems += _security_problems(where, pod, container, sandbox)
        if sandbox and not privileged_namespace:
            problems.append(f"{_key(doc)}: a privileged pod needs the namespace's Pod Security level 'privileged'")
    return problems


def reference_problems(docs: list[Doc]) -> list[str]:
    """Services, HPAs and the NetworkPolicy against the Deployments they point at."""
    problems = []
    deployments = _named(docs, "Deployment")
    pod_labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments.items()}
    for name, doc in deployments.items():
        if not _selects(doc["spec"]["selector"]["matchLabels"], pod_labels[name]):
            problems.append(f"Deployment {name}: its selector does not match its own pods")
    for name, service in _named(docs, "Service").items():
        chosen = [d for d, labels in pod_labels.items() if _selects(service["spec"].get("selector", {}), labels)]
        if len(chosen) != 1:
            problems.append(f"Service {name}: selects {chosen}, not exactly one Deployment's pods")
            continue
        container_ports = {
            key: p["containerPort"]
            for c in deployments[chosen[0]]["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
            for key in (p.get("name"), p["containerPort"])
        }
        for port in service["spec"]["ports"]:
            if port.get("targetPort", port["port"]) not in container_ports:
                problems.append(f"Service {name}: targetPort {port.get('targetPort')} is no port of {chosen[0]}")
    servers = {
        n for n, d in deployments.items() if d["metadata"]["labels"].get("app.kubernetes.io/component") == "env-server"
    }
    scaled = set()
    for name, hpa in _named(docs, "HorizontalPodAutoscaler").items():
        target = hpa["spec"]["scaleTargetRef"]
        if target["kind"] != "Deployment" or target["apiVersion"] != "apps/v1" or target["name"] not in deployments:
            problems.append(f"HPA {name}: targets {target}, which is not a Deployment here")
        scaled.add(target["name"])
        metrics = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
        if metrics != [GENERATE.METRIC]:
            problems.append(f"HPA {name}: scales on {metrics}, not the Pods metric {GENERATE.METRIC}")
    if servers - scaled:
        problems.append(f"no HPA for {sorted(servers - scaled)}")
    policies = _named(docs, "NetworkPolicy")
    policy = policies.pop("agentenvs-trainer-only", None)
    if policy is None:
        return [*problems, "no NetworkPolicy agentenvs-trainer-only"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    unselected = [d for d, labels in pod_labels.items() if not _selects(selector, labels)]
    if unselected:
        problems.append(f"NetworkPolicy agentenvs-trainer-only: does not select {unselected}")
    if policy["spec"].get("policyTypes") != ["Ingress"]:
        problems.append("NetworkPolicy agentenvs-trainer-only: must restrict Ingress")
    peers = [peer for rule in policy["spec"].get("ingress", []) for peer in rule.get("from", [])]
    allowed = {tuple(p.get("podSelector", {}).get("matchLabels", {}).items()) for p in peers}
    if (
        not peers
        or allowed - {(GENERATE.TRAINER_LABEL,), (GENERATE.SCRAPER_LABEL,)}
        or any("ipBlock" in p for p in peers)
    ):
        problems.append(f"NetworkPolicy agentenvs-trainer-only: admits {peers}, more than the trainer and the scraper")
    # any other policy only adds one server's pods as clients of another workload (searchqa -> retriever)
    for name, extra in policies.items():
        targets = [
            d for d, labels in pod_labels.items() if _selects(extra["spec"]["podSelector"]["matchLabels"], labels)
        ]
        sources = [
            d
            for rule in extra["spec"].get("ingress", [])
            for peer in rule.get("from", [])
            for d, labels in pod_labels.items()
            if set(peer) == {"podSelector"} and _selects(peer["podSelector"].get("matchLabels", {}), labels)
        ]
        peers = [peer for rule in extra["spec"].get("ingress", []) for peer in rule.get("from", [])]
        if len(targets) != 1 or len(sources) != len(peers) or not peers:
            problems.append(f"NetworkPolicy {name}: must admit named agentenvs pods to one workload, got {peers}")
    return problems


def test_generated_files_are_up_to_date() -> None:
    assert GENERATE.main(["--check"]) == 0, "run python deploy/k8s/generate.py and commit what it writes"


def test_every_environment_has_a_server() -> None:
    from agentenvs.envs import specs

    builtins = sorted(spec.name for spec in specs())  # the registry also holds what other tests register
    assert sorted(s.env for s in GENERATE.SERVERS) == builtins
    deployments = _named(BASE, "Deployment")
    assert set(deployments) == {f"agentenvs-{s.env}" for s in GENERATE.SERVERS} | {"agentenvs-retriever"}
    assert {"PersistentVolumeClaim", "Namespace", "NetworkPolicy"} <= {d["kind"] for d in BASE}
    for name, doc in deployments.items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"localhost/{name}:{GENERATE.VERSION}"
    assert len({_key(d) for d in BASE}) == len(BASE), "two objects share a kind, namespace and name"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_matches_the_kubernetes_schema(version: str) -> None:
    assert schema_errors(BASE + ADAPTER, version) == []


def test_workloads_and_references() -> None:
    assert workload_problems(BASE) == []
    assert reference_problems(BASE) == []


def test_the_adapter_rule_serves_the_metric_the_hpas_read() -> None:
    (config,) = _named(ADAPTER, "ConfigMap").values()
    (rule,) = yaml.safe_load(config["data"]["config.yaml"])["rules"]
    assert rule["name"]["as"] == GENERATE.METRIC and rule["seriesQuery"].startswith(GENERATE.METRIC + "{")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}, "a Pods metric needs namespace and pod labels"
    from agentenvs.servers.metrics import HELP

    assert HELP[GENERATE.METRIC][0] == "gauge"


def _deployment(docs: list[Doc], env: str = "sciworld") -> Doc:
    return _named(docs, "Deployment")[f"agentenvs-{env}"]


def _server(docs: list[Doc], env: str = "sciworld") -> Doc:
    return _deployment(docs, env)["spec"]["template"]["spec"]["containers"][0]


SCHEMA_BREAKS: dict[str, Callable[[list[Doc]], None]] = {
    "misspelt field": lambda d: _server(d).update(readinesProbe=_server(d).pop("readinessProbe")),
    "port as text": lambda d: _server(d)["ports"][0].update(containerPort="eight"),
    "HPA without maxReplicas": lambda d: _named(d, "HorizontalPodAutoscaler")["agentenvs-bandit"]["spec"].pop(
        "maxReplicas"
    ),
    "Service port as a name": lambda d: _named(d, "Service")["agentenvs-bandit"]["spec"]["ports"][0].update(
        port="http"
    ),
    "replicas as text": lambda d: _deployment(d, "bandit")["spec"].update(replicas="one"),
}

REFERENCE_BREAKS: dict[str, Callable[[list[Doc]], None]] = {
    "Service selects nothing": lambda d: _named(d, "Service")["agentenvs-webshop"]["spec"]["selector"].update(
        {"app.kubernetes.io/name": "agentenvs-webshp"}
    ),
    "Service to a missing port": lambda d: _named(d, "Service")["agentenvs-webshop-pods"]["spec"]["ports"][0].update(
        targetPort="metrics"
    ),
    "HPA on a missing Deployment": lambda d: _named(d, "HorizontalPodAutoscaler")["agentenvs-alfworld"]["spec"][
        "scaleTargetRef"
    ].update(name="agentenvs-alfwrld"),
    "HPA on another metric": lambda d: _named(d, "HorizontalPodAutoscaler")["agentenvs-alfworld"]["spec"]["metrics"][0][
        "pods"
    ]["metric"].update(name="cpu"),
    "NetworkPolicy misses the pods": lambda d: _named(d, "NetworkPolicy")["agentenvs-trainer-only"]["spec"][
        "podSelector"
    ].update(matchLabels={"app.kubernetes.io/part-of": "other"}),
    "NetworkPolicy open to all": lambda d: _named(d, "NetworkPolicy")["agentenvs-trainer-only"]["spec"]["ingress"][0][
        "from"
    ].append({"podSelector": {}}),
    "retriever open to a namespace": lambda d: _named(d, "NetworkPolicy")["agentenvs-retriever-from-searchqa"]["spec"][
        "ingress"
    ][0]["from"].append({"namespaceSelector": {}}),
    "retriever open to every pod": lambda d: _named(d, "NetworkPolicy")["agentenvs-retriever-from-searchqa"]["spec"][
        "ingress"
    ][0]["from"][0].update(podSelector={}),
}

WORKLOAD_BREAKS: dict[str, Callable[[list[Doc]], None]] = {
    "readiness on another path": lambda d: _server(d)["readinessProbe"]["httpGet"].update(path="/"),
    "liveness on another port": lambda d: _server(d)["livenessProbe"]["httpGet"].update(port=9999),
    "no memory limit": lambda d: _server(d)["resources"]["limits"].pop("memory"),
    "request over limit": lambda d: _server(d)["resources"]["requests"].update(cpu="8"),
    "runs as root": lambda d: _deployment(d)["spec"]["template"]["spec"]["securityContext"].update(runAsUser=0),
    "keeps capabilities": lambda d: _server(d)["securityContext"]["capabilities"].update(drop=[]),
    "adds a capability": lambda d: _server(d)["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
    "privileged": lambda d: _server(d)["securityContext"].update(privileged=True),
    "init container without limits": lambda d: _deployment(d, "retriever")["spec"]["template"]["spec"][
        "initContainers"
    ][0].pop("resources"),
    "writable root": lambda d: _server(d, "shellops")["securityContext"].update(readOnlyRootFilesystem=False),
    "restricted namespace": lambda d: _named(d, "Namespace")["agentenvs"]["metadata"]["labels"].update(
        {"pod-security.kubernetes.io/enforce": "restricted"}
    ),
    "token in plain text": lambda d: _server(d)["env"][0].update(value="secret", valueFrom={}),
    "binds loopback": lambda d: _server(d).update(args=[a for a in _server(d)["args"] if a != "0.0.0.0"]),
}


@pytest.mark.parametrize("name", list(SCHEMA_BREAKS))
def test_the_schema_check_rejects_a_broken_copy(name: str) -> None:
    broken = copy.deepcopy(BASE)
    SCHEMA_BREAKS[name](broken)
    assert schema_errors(broken, VERSIONS[-1])


@pytest.mark.parametrize("name", list(REFERENCE_BREAKS))
def test_the_reference_check_rejects_a_broken_copy(name: str) -> None:
    broken = copy.deepcopy(BASE)
    REFERENCE_BREAKS[name](broken)
    assert reference_problems(broken)


@pytest.mark.parametrize("name", list(WORKLOAD_BREAKS))
def test_the_workload_check_rejects_a_broken_copy(name: str) -> None:
    broken = copy.deepcopy(BASE)
    WORKLOAD_BREAKS[name](broken)
    assert workload_problems(broken)


def _kubectl(folder: Path) -> list[Doc]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed; the plain-YAML load above covers the manifests")
    done = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.parametrize("folder", ["", "prometheus-adapter", "overlays/registry"])
def test_kubectl_kustomize_renders_what_the_test_checked(folder: str) -> None:
    rendered = _kubectl(K8S / folder)
    expected = load(K8S / folder)
    assert sorted(rendered, key=_key) == sorted(expected, key=_key)
    if folder == "overlays/registry":
        images = {c["image"] for d in rendered for c in _containers(d)}
        assert images and all(i.startswith(GENERATE.EXAMPLE_REGISTRY + "/agentenvs-") for i in images)
