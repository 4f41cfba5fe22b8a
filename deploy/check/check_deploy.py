"""Checks every file in deploy/; run by deploy/check.sh, which installs the tools first.

- Every file parses: YAML and JSON (duplicate keys are errors), the Dockerfile
  (hadolint), shell scripts (bash -n), this checker, the CRD validator (node --check).
  A file of a kind nothing here checks is an error, so a new file cannot slip by.
- Kubernetes manifests match the API schemas bundled in kubernetes-validate, strictly
  (unknown fields are errors), for the oldest and the newest Kubernetes version we
  support. Custom resources (KEDA ScaledObject, PodMonitor, PrometheusRule) match the
  schemas bundled in @kubernetes-models (validate_crds.mjs). Kustomizations name files
  that exist and, when kubectl is installed, render, and what they render validates too.
- docker-compose.yml matches the compose specification (vendored in check-jsonschema).
- Prometheus configuration and alert rules pass promtool (Debian's prometheus package).
- The Grafana dashboard is well formed and its PromQL parses (promtool); every metric the
  dashboard and the alerts use is one eg exports (crates/eg-runtime/src/metrics.rs), with
  histogram suffixes only on histograms, and every label is one eg sets.
- Every EG__SECTION__KEY named anywhere in deploy/ is a real setting
  (crates/eg-runtime/src/settings.rs and its settings/ modules), and every value given
  to one has the right type. Named entries count too: EG__STORAGE__S3__MINIO__REGION is
  the field region of the S3 connection minio.
- The files agree with each other: listen ports, container ports, probes, Services,
  scrape targets; shutdown grace periods; the KEDA stream names, recomputed from the
  key prefix and partition count; the PrometheusRule and alerts.yml.

Prints one line per check and one per problem; exits 1 when anything is wrong.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import kubernetes_validate.utils as kv_utils
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SETTINGS_RS = ROOT / "crates/eg-runtime/src/settings.rs"
# The modules of settings.rs that hold sections of their own ([storage], [brokers]).
SETTINGS_DIR = ROOT / "crates/eg-runtime/src/settings"
METRICS_RS = ROOT / "crates/eg-runtime/src/metrics.rs"
KEYSPACE_RS = ROOT / "crates/eg-store/src/keyspace.rs"
SOURCES = [ROOT / "bins", ROOT / "crates"]

# Kubernetes versions the manifests must be valid for: the oldest we support
# (PodDisruptionBudget.unhealthyPodEvictionPolicy is on by default from 1.27) and the
# newest whose schemas kubernetes-validate bundles.
K8S_OLDEST = "1.27"
CRD_GROUPS = ("keda.sh/", "monitoring.coreos.com/")
TIERS = ("ingress", "scheduler", "sender", "deadletter")
SKIP_DIRS = {"__pycache__", "node_modules"}


class Report:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: object, message: str) -> None:
        self.problems.append(f"{rel(where)}: {message}")

    def done(self, what: str, problems_before: int) -> None:
        status = "ok  " if len(self.problems) == problems_before else "FAIL"
        print(f"{status} {what}")


def rel(path: object) -> str:
    if isinstance(path, Path):
        try:
            return str(path.relative_to(ROOT))
        except ValueError:
            return str(path)
    return str(path)


# ---------------------------------------------------------------- parsing


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently).
    Merge keys (`<<: *anchor`) may still be overridden, as compose files do."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    loader.flatten_mapping(node)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: Path) -> list:
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.load_all(f, Loader=StrictLoader) if doc is not None]


def load_json(path: Path):
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        dup = {k for k in keys if keys.count(k) > 1}
        if dup:
            raise ValueError(f"duplicate keys {sorted(dup)}")
        return dict(pairs)

    with path.open(encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=no_duplicates)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def output_of(proc: subprocess.CompletedProcess) -> str:
    return (proc.stdout + proc.stderr).strip()


class Deploy:
    """Every file of deploy/, parsed once."""

    def __init__(self, report: Report) -> None:
        self.files = sorted(
            p for p in DEPLOY.rglob("*")
            if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(DEPLOY).parts))
        self.yaml: dict[Path, list] = {}
        self.json: dict[Path, object] = {}
        self.report = report

    def k8s_docs(self) -> list[tuple[Path, dict]]:
        return [(p, d) for p, docs in self.yaml.items()
                if (DEPLOY / "kubernetes") in p.parents for d in docs]

    def find(self, kind: str, name: str | None = None) -> list[tuple[Path, dict]]:
        return [(p, d) for p, d in self.k8s_docs() if isinstance(d, dict) and d.get("kind") == kind
                and (name is None or d.get("metadata", {}).get("name") == name)]


def check_parse(deploy: Deploy, tools: Tools, report: Report) -> None:
    before = len(report.problems)
    for path in deploy.files:
        name = path.name
        try:
            if name.endswith((".yaml", ".yml")):
                deploy.yaml[path] = load_yaml(path)
            elif name.endswith(".json"):
                deploy.json[path] = load_json(path)
            elif name == "Dockerfile" or name.endswith(".Dockerfile"):
                proc = run([tools.hadolint, "--no-color", str(path)])
                if proc.returncode != 0:
                    report.fail(path, f"hadolint:\n{output_of(proc)}")
            elif name.endswith(".sh"):
                proc = run(["bash", "-n", str(path)])
                if proc.returncode != 0:
                    report.fail(path, f"bash -n: {output_of(proc)}")
            elif name.endswith(".py"):
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            elif name.endswith(".mjs"):
                proc = run([tools.node, "--check", str(path)])
                if proc.returncode != 0:
                    report.fail(path, f"node --check: {output_of(proc)}")
            elif name == "requirements.txt":
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    line = line.split("#", 1)[0].strip()
                    if line and not re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", line):
                        report.fail(path, f"line {n}: not a pinned requirement (name==version): {line}")
            elif name.endswith(".md"):
                pass  # prose; its EG__ names are checked with the settings
            else:
                report.fail(path, "no check knows this kind of file: add one to deploy/check/check_deploy.py")
        except (yaml.YAMLError, ValueError, SyntaxError) as e:
            report.fail(path, f"does not parse: {e}")
    report.done(f"parse: {len(deploy.files)} files (YAML, JSON, Dockerfile, shell, Python, JavaScript)", before)


# ---------------------------------------------------------------- tools


class Tools:
    def __init__(self, args: argparse.Namespace) -> None:
        bin_dir = Path(sys.executable).parent
        self.hadolint = str(bin_dir / "hadolint")
        self.check_jsonschema = str(bin_dir / "check-jsonschema")
        self.promtool = str(Path(args.promtool).resolve())
        self.node = shutil.which("node") or "node"
        self.node_dir = Path(args.node_dir).resolve()
        self.kubectl = shutil.which("kubectl")


# ---------------------------------------------------------------- kubernetes


@functools.lru_cache(maxsize=None)
def _schema_contents(filename: str, desired_version: str):
    return _original_schema_contents(filename, desired_version)


# kubernetes-validate reads its (large) schema files on every call; read each once.
_original_schema_contents = kv_utils.schema_contents
kv_utils.schema_contents = _schema_contents
K8S_NEWEST = kv_utils.latest_version()

KUSTOMIZATION_KEYS = {
    "apiVersion", "kind", "namespace", "resources", "images", "patches", "labels",
    "commonLabels", "commonAnnotations", "configMapGenerator", "secretGenerator",
    "generatorOptions", "components", "replicas", "namePrefix", "nameSuffix",
}


def validate_k8s(where: str, doc: dict, report: Report, crds: list, seen: set) -> None:
    api, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    if api.startswith(CRD_GROUPS):
        crds.append({"file": where, "doc": doc})
        return
    key = json.dumps(doc, sort_keys=True)
    if key in seen:
        return
    seen.add(key)
    name = f"{kind}/{doc.get('metadata', {}).get('name')}"
    for version in (K8S_OLDEST, K8S_NEWEST):
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path) or "."
            report.fail(where, f"{name} (Kubernetes {version}): {path}: {e.message}")
            return
        except kubernetes_validate.SchemaNotFoundError:
            report.fail(where, f"{name}: no schema for apiVersion {api} kind {kind} in Kubernetes {version}")
            return


def kustomization_resources(path: Path) -> list[dict]:
    """The documents a kustomization's resources hold (following nested kustomizations)."""
    docs = []
    for res in load_yaml(path)[0].get("resources", []):
        target = (path.parent / res).resolve()
        if (target / "kustomization.yaml").is_file():
            docs += kustomization_resources(target / "kustomization.yaml")
        elif target.is_file():
            docs += load_yaml(target)
    return docs


def json_pointer_exists(doc, pointer: str) -> bool:
    node = doc
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def check_kustomization(path: Path, doc: dict, report: Report) -> None:
    """What kubectl kustomize would refuse, without kubectl: unknown fields, resources
    that do not exist, patches whose target or path is not there."""
    unknown = set(doc) - KUSTOMIZATION_KEYS
    if unknown:
        report.fail(path, f"unknown kustomization fields {sorted(unknown)}")
    for res in doc.get("resources", []):
        target = (path.parent / res).resolve()
        if not (target.is_file() or (target / "kustomization.yaml").is_file()):
            report.fail(path, f"resource {res!r} is neither a file nor a kustomization directory")
            return
    docs = kustomization_resources(path)
    for patch in doc.get("patches", []):
        selector = patch.get("target", {})
        matches = [d for d in docs if isinstance(d, dict)
                   and all(d.get("kind") == v if k == "kind" else d.get("metadata", {}).get("name") == v
                           for k, v in selector.items() if k in ("kind", "name"))]
        if not matches:
            report.fail(path, f"patch target {selector} matches no resource")
            continue
        ops = yaml.safe_load(patch.get("patch", "")) if "patch" in patch else None
        for op in ops if isinstance(ops, list) else []:
            if op.get("op") in ("remove", "replace", "test", "move", "copy"):
                pointer = op.get("from") if op.get("op") in ("move", "copy") else op.get("path", "")
                for match in matches:
                    if not json_pointer_exists(match, pointer or ""):
                        report.fail(path, f"patch {op.get('op')} {pointer}: no such path in "
                                          f"{match.get('kind')}/{match.get('metadata', {}).get('name')}")


def check_kubernetes(deploy: Deploy, tools: Tools, report: Report) -> None:
    before = len(report.problems)
    crds: list = []
    seen: set = set()
    count = 0
    kustomizations = []
    for path, doc in deploy.k8s_docs():
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            report.fail(path, "a document without apiVersion and kind")
            continue
        count += 1
        if doc["kind"] == "Kustomization":
            check_kustomization(path, doc, report)
            kustomizations.append(path.parent)
        else:
            validate_k8s(rel(path), doc, report, crds, seen)

    rendered = "kubectl not found: kustomizations checked by structure only"
    if tools.kubectl:
        for directory in kustomizations:
            proc = run([tools.kubectl, "kustomize", str(directory)])
            if proc.returncode != 0:
                report.fail(directory, f"kubectl kustomize fails:\n{output_of(proc)}")
                continue
            for doc in yaml.safe_load_all(proc.stdout):
                if doc:
                    validate_k8s(f"{rel(directory)} (rendered)", doc, report, crds, seen)
        rendered = f"{len(kustomizations)} kustomizations rendered with kubectl and validated"

    if crds:
        script = tools.node_dir / "validate_crds.mjs"
        shutil.copyfile(DEPLOY / "check/validate_crds.mjs", script)
        proc = run([tools.node, str(script)], input=json.dumps(crds))
        if proc.returncode != 0:
            for line in output_of(proc).splitlines():
                report.problems.append(line)  # already "file: kind/name: problem"
    report.done(
        f"kubernetes: {count} manifests, strict schemas of Kubernetes {K8S_OLDEST} and {K8S_NEWEST} "
        f"(kubernetes-validate {kubernetes_validate.__version__}), {len(crds)} custom resources "
        f"(@kubernetes-models); {rendered}", before)


# ---------------------------------------------------------------- compose, prometheus


def check_compose(deploy: Deploy, tools: Tools, report: Report) -> None:
    before = len(report.problems)
    files = [p for p in deploy.files if p.name in ("docker-compose.yml", "docker-compose.yaml", "compose.yaml", "compose.yml")]
    if len(files) != 1:
        report.fail("deploy", f"expected one compose file, found {[rel(p) for p in files]}")
    for path in files:
        if path not in deploy.yaml:
            continue  # did not parse: reported already
        proc = run([tools.check_jsonschema, "--builtin-schema", "vendor.compose-spec", str(path)])
        if proc.returncode != 0:
            report.fail(path, f"does not match the compose specification:\n{output_of(proc)}")
        services = deploy.yaml[path][0].get("services", {})
        replicas = services.get("sender", {}).get("deploy", {}).get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 2:
            report.fail(path, f"services.sender.deploy.replicas should be above 1, is {replicas!r}")
    report.done("compose: docker-compose.yml matches the compose specification (check-jsonschema vendor.compose-spec)", before)


def check_prometheus(deploy: Deploy, tools: Tools, report: Report) -> None:
    before = len(report.problems)
    configs = rules = 0
    for path, docs in deploy.yaml.items():
        if (DEPLOY / "prometheus") not in path.parents:
            continue
        doc = docs[0] if docs else {}
        if "scrape_configs" in doc:
            proc = run([tools.promtool, "check", "config", path.name], cwd=path.parent)
            configs += 1
        elif "groups" in doc:
            proc = run([tools.promtool, "check", "rules", path.name], cwd=path.parent)
            rules += 1
        else:
            report.fail(path, "neither a Prometheus configuration (scrape_configs) nor rules (groups)")
            continue
        if proc.returncode != 0:
            report.fail(path, f"promtool:\n{output_of(proc)}")
    report.done(f"prometheus: {configs} configuration(s), {rules} rule file(s) pass promtool", before)


# ---------------------------------------------------------------- metrics and dashboard


def eg_metrics() -> dict[str, str]:
    """Metric name -> counter | gauge | histogram, from metrics.rs."""
    text = METRICS_RS.read_text(encoding="utf-8")
    consts = dict(re.findall(r'pub const (\w+): &str = "(\w+)";', text))
    kinds = {}
    for kind, const in re.findall(r"describe_(counter|gauge|histogram)!\(\s*(\w+)", text):
        if const in consts:
            kinds[consts[const]] = kind
    for name in consts.values():
        kinds.setdefault(name, "undescribed")
    return kinds


def eg_labels() -> set[str]:
    labels = set()
    for src in SOURCES:
        for f in src.rglob("*.rs"):
            if "target" in f.parts:
                continue
            labels.update(re.findall(r'"([a-z_]+)"\s*=>', f.read_text(encoding="utf-8")))
    # Prometheus' own and the ones scrape configurations attach.
    return labels | {"le", "job", "instance", "pod", "namespace"}


PROMQL_WORDS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def check_promql_names(where: str, expr: str, metrics: dict, labels: set, report: Report) -> None:
    for selector in re.findall(r"\{([^}]*)\}", expr):
        for label in MATCHER.findall(selector):
            if label not in labels and label != "__name__":
                report.fail(where, f"label {label!r} is not one eg sets ({expr})")
    for _, names in PROMQL_WORDS.findall(expr):
        for label in filter(None, (n.strip() for n in names.split(","))):
            if label not in labels:
                report.fail(where, f"label {label!r} is not one eg sets ({expr})")
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    for ident in IDENT.findall(bare):
        if not ident[0].isupper():
            continue  # PromQL functions, keywords and Prometheus' own metrics are lower case
        base, suffix = re.fullmatch(r"(.*?)(_bucket|_sum|_count|_total)?", ident).groups()
        if base not in metrics:
            report.fail(where, f"{ident} is not a metric eg exports (crates/eg-runtime/src/metrics.rs)")
        elif suffix == "_total":
            report.fail(where, f"{ident}: eg's counters are exported without a _total suffix ({base})")
        elif suffix and metrics[base] != "histogram":
            report.fail(where, f"{ident}: {base} is a {metrics[base]}, not a histogram")
        elif not suffix and metrics[base] == "histogram":
            report.fail(where, f"{ident} is a histogram: use {ident}_bucket, _sum or _count")


GRAFANA_VARS = {
    "$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h",
    "${__rate_interval}": "5m", "${__interval}": "1m", "${__range}": "1h",
}


def promql_for_promtool(expr: str) -> str:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    # Template variables stand in label values (regular expressions).
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(?::[a-z]+)?\}?", ".*", expr)


def dashboard_panels(panels: list) -> list[dict]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(dashboard_panels(panel.get("panels", [])))
    return out


def check_dashboards(deploy: Deploy, tools: Tools, report: Report) -> None:
    before = len(report.problems)
    metrics, labels = eg_metrics(), eg_labels()
    exprs: list[tuple[str, str]] = []
    dashboards = [p for p in deploy.json if (DEPLOY / "grafana") in p.parents]
    for path in dashboards:
        dash = deploy.json[path]
        for key in ("title", "uid", "panels", "schemaVersion", "templating"):
            if key not in dash:
                report.fail(path, f"missing {key!r}")
        variables = {v.get("name") for v in dash.get("templating", {}).get("list", [])}
        ids = set()
        for panel in dashboard_panels(dash.get("panels", [])):
            title = panel.get("title", "?")
            where = f"{rel(path)}: panel {title!r}"
            if panel.get("id") in ids or not isinstance(panel.get("id"), int):
                report.fail(where, f"panel id {panel.get('id')!r} missing or not unique")
            ids.add(panel.get("id"))
            grid = panel.get("gridPos", {})
            if not all(isinstance(grid.get(k), int) for k in ("h", "w", "x", "y")) or grid.get("x", 0) + grid.get("w", 0) > 24:
                report.fail(where, f"gridPos {grid} is not within the 24-column grid")
            if panel.get("type") in ("row", "text"):
                continue
            ds = panel.get("datasource", {})
            if ds.get("uid") != "${datasource}":
                report.fail(where, 'datasource must be {"type": "prometheus", "uid": "${datasource}"}')
            targets = panel.get("targets", [])
            if not targets:
                report.fail(where, "no targets")
            for target in targets:
                expr = target.get("expr", "")
                if not expr or not target.get("refId"):
                    report.fail(where, "a target without expr or refId")
                    continue
                for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expr):
                    if not var.startswith("__") and var not in variables:
                        report.fail(where, f"${var} is not a dashboard variable")
                exprs.append((where, expr))
        for var in dash.get("templating", {}).get("list", []):
            if var.get("type") == "query":
                query = var.get("query")
                query = query.get("query", "") if isinstance(query, dict) else query or ""
                found = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
                if not found:
                    report.fail(path, f"variable {var.get('name')}: expected label_values(<selector>, <label>), got {query!r}")
                    continue
                selector, label = found.groups()
                check_promql_names(f"{rel(path)}: variable {var.get('name')}", f"{selector} by ({label})",
                                   metrics, labels, report)

    # The alerts: Prometheus rule files and the PrometheusRule resource.
    for path, docs in deploy.yaml.items():
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "PrometheusRule":
                groups = doc.get("spec", {}).get("groups")
            else:
                groups = doc.get("groups")
            for group in groups or []:
                for rule in group.get("rules", []):
                    check_promql_names(f"{rel(path)}: rule {rule.get('alert') or rule.get('record')}",
                                       rule.get("expr", ""), metrics, labels, report)
    for where, expr in exprs:
        check_promql_names(where, expr, metrics, labels, report)

    # PromQL syntax: every dashboard query as a recording rule, through promtool.
    if exprs:
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query:{i}", "expr": promql_for_promtool(e)} for i, (_, e) in enumerate(exprs)]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(rules, f)
        proc = run([tools.promtool, "check", "rules", f.name])
        Path(f.name).unlink()
        if proc.returncode != 0:
            # Find the culprits one by one (only when something is wrong).
            for where, expr in exprs:
                one = {"groups": [{"name": "q", "rules": [{"record": "q:q", "expr": promql_for_promtool(expr)}]}]}
                with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
                    yaml.safe_dump(one, f)
                single = run([tools.promtool, "check", "rules", f.name])
                Path(f.name).unlink()
                if single.returncode != 0:
                    error = output_of(single).splitlines()[-1].strip()
                    report.fail(where, f"PromQL does not parse: {expr}\n    {error}")
    for path, docs in deploy.yaml.items():
        if (DEPLOY / "grafana/provisioning") in path.parents:
            doc = docs[0] if docs else {}
            if doc.get("apiVersion") != 1 or not ({"datasources", "providers"} & set(doc)):
                report.fail(path, "a Grafana provisioning file has apiVersion: 1 and datasources or providers")
    report.done(f"grafana: {len(dashboards)} dashboard(s), {len(exprs)} queries parse and use eg's "
                f"{len(metrics)} metrics and labels only (alerts too)", before)


# ---------------------------------------------------------------- settings


# Where a name stands for a named entry (an account, a connection) in a setting of eg_settings.
NAMED = "<NAME>"


def eg_settings() -> dict[str, str]:
    """EG__SECTION__KEY -> Rust type, from settings.rs and its modules. A section field
    that maps names to entries (`s3: BTreeMap<String, S3ConnectionSettings>`) gives one
    setting per field of the entry: EG__STORAGE__S3__<NAME>__REGION."""
    sources = [SETTINGS_RS, *sorted(SETTINGS_DIR.glob("*.rs"))]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    structs = {name: body for name, body in re.findall(r"pub struct (\w+) \{(.*?)\n\}", text, re.S)}
    fields = lambda body: re.findall(r"^\s*pub (\w+): (.+),\s*$", body, re.M)  # noqa: E731
    settings = {}
    for section, section_type in fields(structs.get("Settings", "")):
        for key, rust_type in fields(structs.get(section_type.strip(), "")):
            name = f"EG__{section.upper()}__{key.upper()}"
            entry = re.fullmatch(r"BTreeMap<String, (\w+)>", rust_type.strip())
            if entry:
                for field, field_type in fields(structs.get(entry.group(1), "")):
                    settings[f"{name}__{NAMED}__{field.upper()}"] = field_type.strip()
            else:
                settings[name] = rust_type.strip()
    return settings


def setting_type(settings: dict[str, str], name: str) -> str | None:
    """The Rust type of the setting `name`, None when it is not one. An entry's name is
    what the code allows (lower-case letters, digits, '_'), upper-cased; a double '_'
    would be read as one more level."""
    if name in settings:
        return settings[name]
    for setting, rust_type in settings.items():
        prefix, _, field = setting.partition(f"__{NAMED}__")
        if field and re.fullmatch(rf"{prefix}__[A-Z0-9]+(_[A-Z0-9]+)*__{field}", name):
            return rust_type
    return None


DURATION = re.compile(
    r"(\s*\d+\s*(ns|nsec|us|usec|µs|ms|msec|s|sec|secs|second|seconds|m|min|mins|minute|minutes|"
    r"h|hr|hrs|hour|hours|d|day|days|w|week|weeks))+\s*")


def check_setting_value(where: str, name: str, value: object, rust_type: str, report: Report) -> None:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    rust_type = re.sub(r"^Option<(.*)>$", r"\1", rust_type)
    ok = True
    if rust_type == "Duration":
        ok = bool(DURATION.fullmatch(text))
    elif rust_type in ("u16", "u32", "u64", "usize"):
        bits = {"u16": 16, "u32": 32, "u64": 64, "usize": 64}[rust_type]
        ok = text.isdigit() and int(text) < 2 ** bits
    elif rust_type == "bool":
        ok = text in ("true", "false")
    if not ok:
        report.fail(where, f"{name}={text!r} is not a valid {rust_type}")


def env_pairs(node, out: list) -> None:
    """Every (name, value) an EG__ variable gets in a parsed YAML/JSON document: mapping
    keys (ConfigMap data, compose environment), {name, value} entries (container env),
    NAME=value strings (compose environment lists)."""
    if isinstance(node, dict):
        if isinstance(node.get("name"), str) and node["name"].startswith("EG__"):
            out.append((node["name"], node.get("value")))
        for k, v in node.items():
            if isinstance(k, str) and k.startswith("EG__"):
                out.append((k, v))
            env_pairs(v, out)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, str) and re.match(r"EG__\w+=", item):
                k, v = item.split("=", 1)
                out.append((k, v))
            else:
                env_pairs(item, out)


def dockerfile_env(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    pairs = []
    for line in text.splitlines():
        if line.strip().upper().startswith("ENV "):
            pairs += re.findall(r"(EG__\w+)=(\S+)", line)
    return pairs


def check_settings(deploy: Deploy, report: Report) -> None:
    before = len(report.problems)
    settings = eg_settings()
    if len(settings) < 20:
        report.fail(SETTINGS_RS, f"found only {len(settings)} settings: has the file's layout changed?")
    values = named = 0
    for path in deploy.files:
        pairs: list = []
        if path in deploy.yaml:
            for doc in deploy.yaml[path]:
                env_pairs(doc, pairs)
        elif path.name == "Dockerfile":
            pairs = dockerfile_env(path)
        for name, value in pairs:
            values += 1
            rust_type = setting_type(settings, name)
            if rust_type is None:
                report.fail(path, f"{name} is not a setting (crates/eg-runtime/src/settings.rs)")
            elif value is not None and not (isinstance(value, str) and "${" in value):
                check_setting_value(rel(path), name, value, rust_type, report)
        # Names in prose and comments too: a stale one misleads as much as a wrong value.
        if path.suffix in (".md", ".yaml", ".yml", ".sh", "") or path.name == "Dockerfile":
            for name in set(re.findall(r"\bEG__[A-Z0-9]+__[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8"))):
                named += 1
                if setting_type(settings, name) is None and name != "EG__SECTION__KEY":
                    report.fail(path, f"names {name}, which is not a setting")
    report.done(f"settings: {values} EG__ values and {named} names are real settings of the right type "
                f"({len(settings)} settings in settings.rs and settings/)", before)


# ---------------------------------------------------------------- consistency


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+)\s*(ms|s|m|h)", str(duration)):
        total += int(number) * units[unit]
    return total


def crc16_xmodem(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def cluster_slot(key: str) -> int:
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16_xmodem(key.encode()) % 16384


def partition_tag(prefix: str, index: int, partitions: int) -> str:
    """Mirrors eg_store::keyspace::partition_tag: the smallest k whose slot lies in the
    middle half of the partition's equal share of the 16,384 slots."""
    share = 16384 // max(partitions, 1)
    low = index * share + share // 4
    high = low + max(share // 2, 1)
    for k in range(1, 1_000_000):
        tag = f"{prefix}:p{index}.{k}"
        if low <= cluster_slot(tag) < high:
            return tag
    return f"{prefix}:p{index}"


def container(doc: dict) -> dict:
    containers = doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])
    return containers[0] if containers else {}


def check_consistency(deploy: Deploy, report: Report) -> None:
    before = len(report.problems)
    defaults = {"EG__SHUTDOWN__GRACE": "40s", "EG__DELIVERY__TIMEOUT": "30s"}
    # The mirror of partition_tag must agree with the Rust unit test's value.
    if cluster_slot("{eg:p0.12}:ready") != 2763:
        report.fail("deploy/check/check_deploy.py", "cluster_slot disagrees with Redis (CLUSTER KEYSLOT)")

    # ---- Kubernetes
    config = {}
    for path, doc in deploy.find("ConfigMap", "eg"):
        config = doc.get("data", {})
    env = {**defaults, **config}
    if seconds(env["EG__SHUTDOWN__GRACE"]) <= seconds(env["EG__DELIVERY__TIMEOUT"]):
        report.fail("deploy/kubernetes", "EG__SHUTDOWN__GRACE must exceed EG__DELIVERY__TIMEOUT, or senders are cut off mid-attempt")
    services = {d["metadata"]["name"]: d for _, d in deploy.find("Service")}
    for tier in TIERS:
        found = deploy.find("Deployment", f"eg-{tier}")
        if len(found) != 1:
            report.fail("deploy/kubernetes", f"expected one Deployment eg-{tier}, found {len(found)}")
            continue
        path, doc = found[0]
        labels = doc["spec"]["template"]["metadata"].get("labels", {})
        if labels.get("app") != f"eg-{tier}" or doc["spec"]["selector"].get("matchLabels") != {"app": f"eg-{tier}"}:
            report.fail(path, f"eg-{tier}: pods must carry app: eg-{tier} and the selector must be exactly that label")
        c = container(doc)
        listen = env.get(f"EG__{tier.upper()}__LISTEN", "")
        port = int(listen.rsplit(":", 1)[1]) if ":" in listen else None
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
        if port not in ports.values():
            report.fail(path, f"eg-{tier} listens on {listen} (ConfigMap eg) but declares container ports {ports}")
        annotation = doc["spec"]["template"]["metadata"].get("annotations", {}).get("prometheus.io/port")
        if annotation != str(port):
            report.fail(path, f"eg-{tier}: prometheus.io/port {annotation!r} is not the listen port {port}")
        for probe, path_wanted in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = c.get(probe, {}).get("httpGet", {})
            if get.get("path") != path_wanted or (get.get("port") not in ports and get.get("port") not in ports.values()):
                report.fail(path, f"eg-{tier}: {probe} must GET {path_wanted} on a declared port, has {get}")
        service = services.get(f"eg-{tier}")
        if not service:
            report.fail(path, f"no Service eg-{tier}")
        else:
            for sp in service["spec"].get("ports", []):
                if sp.get("targetPort") not in ports and sp.get("targetPort") not in ports.values():
                    report.fail(path, f"Service eg-{tier} targets port {sp.get('targetPort')!r}, not one of {ports}")
        pod = doc["spec"]["template"]["spec"]
        stop = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        pre_stop = int(stop[1]) if len(stop) == 2 and stop[0] == "sleep" and stop[1].isdigit() else 0
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if grace <= seconds(env["EG__SHUTDOWN__GRACE"]) + pre_stop:
            report.fail(path, f"eg-{tier}: terminationGracePeriodSeconds {grace} must exceed the preStop pause "
                              f"({pre_stop} s) plus EG__SHUTDOWN__GRACE ({env['EG__SHUTDOWN__GRACE']})")
        if c.get("image") != "eg":
            report.fail(path, f"eg-{tier}: image {c.get('image')!r}: use \"eg\", which the kustomization's images rewrite")
        if not deploy.find("PodDisruptionBudget", f"eg-{tier}"):
            report.fail(path, f"no PodDisruptionBudget eg-{tier}")

    # ---- KEDA: one lag and one pending trigger per partition stream, names recomputed.
    prefix = env.get("EG__REDIS__PREFIX", "eg")
    partitions = int(env.get("EG__REDIS__PARTITIONS", "4"))
    streams = {f"{{{partition_tag(prefix, i, partitions)}}}:ready" for i in range(partitions)}
    group = re.search(r'SENDERS_GROUP: &str = "(\w+)"', KEYSPACE_RS.read_text(encoding="utf-8"))
    group = group.group(1) if group else "senders"
    redis_services = {name for name in services}
    for path, so in deploy.find("ScaledObject"):
        spec = so.get("spec", {})
        if spec.get("scaleTargetRef", {}).get("name") != "eg-sender":
            report.fail(path, "the ScaledObject must scale the Deployment eg-sender")
        triggers = spec.get("triggers", [])
        for kind, field in (("lag", "lagCount"), ("pending", "pendingEntriesCount")):
            covered = {t.get("metadata", {}).get("stream") for t in triggers if field in t.get("metadata", {})}
            if covered != streams:
                report.fail(path, f"{kind} triggers watch {sorted(covered)}, but with prefix {prefix!r} and "
                                  f"{partitions} partitions the ready streams are {sorted(streams)}")
        for t in triggers:
            meta = t.get("metadata", {})
            if t.get("type") not in ("redis-streams", "redis-cluster-streams"):
                report.fail(path, f"trigger {t.get('name')}: type {t.get('type')!r} is not KEDA's Redis Streams scaler")
            if meta.get("consumerGroup") != group:
                report.fail(path, f"trigger {t.get('name')}: consumerGroup must be {group!r} (eg_store::keyspace::SENDERS_GROUP)")
            host = meta.get("address", "").split(".")[0]
            if host and host not in redis_services:
                report.fail(path, f"trigger {t.get('name')}: address {meta.get('address')} names no Service in deploy/kubernetes")
        formula = spec.get("advanced", {}).get("scalingModifiers", {}).get("formula")
        if formula is not None:
            used = set(re.findall(r"[A-Za-z_]\w*", formula))
            names = {t.get("name") for t in triggers}
            if used != names:
                report.fail(path, f"the formula uses {sorted(used)} but the triggers are {sorted(names)}")

    # ---- The PrometheusRule carries alerts.yml's groups unchanged.
    alerts = DEPLOY / "prometheus/alerts.yml"
    for path, rule in deploy.find("PrometheusRule"):
        if alerts in deploy.yaml and rule.get("spec", {}).get("groups") != deploy.yaml[alerts][0].get("groups"):
            report.fail(path, "spec.groups differs from deploy/prometheus/alerts.yml: keep them identical")

    # ---- Compose: ports, health checks, scrape targets, grace periods.
    compose = next((p for p in deploy.yaml if p.name == "docker-compose.yml"), None)
    prometheus = deploy.yaml.get(DEPLOY / "prometheus/prometheus.yml", [{}])[0]
    if compose:
        services = deploy.yaml[compose][0].get("services", {})
        jobs = {j.get("job_name"): j for j in prometheus.get("scrape_configs", [])}
        for tier in TIERS:
            svc = services.get(tier)
            if not svc:
                report.fail(compose, f"no service {tier}")
                continue
            env = {**defaults, **{k: str(v) for k, v in (svc.get("environment") or {}).items()}}
            listen = env.get(f"EG__{tier.upper()}__LISTEN", "")
            port = listen.rsplit(":", 1)[-1]
            test = svc.get("healthcheck", {}).get("test", [])
            if port not in test:
                report.fail(compose, f"{tier}: the health check {test} does not probe the listen port {port}")
            if seconds(svc.get("stop_grace_period", "10s")) <= seconds(env["EG__SHUTDOWN__GRACE"]):
                report.fail(compose, f"{tier}: stop_grace_period {svc.get('stop_grace_period', '10s')} must exceed "
                                     f"EG__SHUTDOWN__GRACE ({env['EG__SHUTDOWN__GRACE']})")
            job = jobs.get(f"eg-{tier}", {})
            targets = [(n, str(sd.get("port"))) for sd in job.get("dns_sd_configs", []) for n in sd.get("names", [])]
            if targets != [(tier, port)]:
                report.fail(DEPLOY / "prometheus/prometheus.yml",
                            f"job eg-{tier} should scrape {tier}:{port} (compose service, listen port), scrapes {targets}")
    report.done("consistency: ports, probes, Services, scrape targets, grace periods, KEDA streams "
                f"({', '.join(sorted(streams))}), PrometheusRule = alerts.yml", before)


def guarded(check, report: Report, *args) -> None:
    """Runs one check; a file too malformed for it is a failure, not a crash."""
    before = len(report.problems)
    try:
        check(*args)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        report.fail("deploy", f"{check.__name__} stopped at a malformed file ({type(e).__name__}: {e}); "
                              "the problems above, if any, are the likely cause")
        report.done(f"{check.__name__.removeprefix('check_')}: stopped", before)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--promtool", required=True)
    parser.add_argument("--node-dir", required=True, help="directory holding node_modules with @kubernetes-models")
    args = parser.parse_args()
    report = Report()
    tools = Tools(args)
    deploy = Deploy(report)
    check_parse(deploy, tools, report)
    for check in (check_kubernetes, check_compose, check_prometheus, check_dashboards):
        guarded(check, report, deploy, tools, report)
    for check in (check_settings, check_consistency):
        guarded(check, report, deploy, report)
    if report.problems:
        print(f"\ndeploy/ has {len(report.problems)} problem(s):", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
