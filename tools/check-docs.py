#!/usr/bin/env python3
"""Every setting, metric and HTTP route the code has is documented, and every one the
docs name exists in the code (part of `just lint`).

The docs are README.md, every docs/*.md and deploy/README.md, read as one text: where a
thing is documented may move between them. The code is read as source text (no build):

- settings: every `EG__SECTION__KEY` of `crates/eg-runtime/src/settings.rs` and its
  `settings/` modules (a map of named entries gives `EG__STORAGE__S3__<NAME>__REGION`);
- metrics: every name of `crates/eg-runtime/src/metrics.rs`, the one place they are listed;
- routes: every `.route("…", …)` of `bins/*/src` and `crates/eg-runtime/src`, under the
  prefix its router is nested at (`.nest("/admin", admin::router(…))`).

A documented setting is any `EG__…` name in the docs; a documented metric any
backticked CamelCase word ending like eg's metrics do (`…Count`, `…Depth`, `…InMs`,
`…Seconds`); a documented route a backticked `METHOD /path` (`GET /admin/queues`). A
route counts as documented by its path alone too (`/healthz`), and a path may stand for
a parameter with any name (`{t}`, `<topic>`, an example value), shorten its start with
`…/` or its end with `/…`, and list alternatives as `{pause,resume}`.

Exit status 1 with one line per finding, 0 when code and docs agree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy/README.md"]
SETTINGS_RS = ROOT / "crates/eg-runtime/src/settings.rs"
SETTINGS_DIR = ROOT / "crates/eg-runtime/src/settings"
METRICS_RS = ROOT / "crates/eg-runtime/src/metrics.rs"
ROUTE_SOURCES = [*sorted((ROOT / "bins").glob("*/src")), ROOT / "crates/eg-runtime/src"]

# Where a setting name stands for a named entry (an account, a connection).
NAMED = "<NAME>"
# `EG__…` words in the docs that are no setting but talk about settings.
SETTING_PLACEHOLDERS = {"EG__SECTION__KEY", "EG__<SECTION>__<KEY>"}
# Settings the docs name on purpose that the code does not have: docs/destinations.md's
# guide to adding a destination kind shows the settings a new kind would bring.
NOT_YET_SETTINGS = ("EG__BROKERS__KAFKA__", "EG__BROKERS__SQS__")
# Paths the docs name on purpose that no tier serves: docs/bad-input.md's unknown path.
NOT_ROUTES = {"/nothing"}
# What a metric name ends with: a backticked word like this in the docs is a metric.
METRIC_WORD = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]*)*(?:Count|Depth|InMs|Seconds)")
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")


# ---- the docs -----------------------------------------------------------------------


class Docs:
    def __init__(self) -> None:
        self.lines: list[tuple[str, int, str]] = []
        for path in DOCS:
            if path.is_file():
                name = str(path.relative_to(ROOT))
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    self.lines.append((name, number, line))
        self.text = "\n".join(line for _, _, line in self.lines)

    def spans(self):
        """Every backticked span, with where it is."""
        for name, number, line in self.lines:
            for span in re.findall(r"`([^`]+)`", line):
                yield f"{name}:{number}", span


# ---- settings -----------------------------------------------------------------------


def code_settings() -> dict[str, str]:
    """EG__SECTION__KEY -> Rust type (the same reading as deploy/check/check_deploy.py,
    which checks the names used in deploy/). A section field that maps names to entries
    (`s3: BTreeMap<String, S3ConnectionSettings>`) gives one setting per field of the
    entry: EG__STORAGE__S3__<NAME>__REGION."""
    sources = [SETTINGS_RS, *sorted(SETTINGS_DIR.glob("*.rs"))]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    structs = {name: body for name, body in re.findall(r"pub struct (\w+) \{(.*?)\n\}", text, re.S)}

    def fields(body: str) -> list[tuple[str, str]]:
        return re.findall(r"^\s*pub (\w+): (.+),\s*$", body, re.M)

    settings = {}
    for section, section_type in fields(structs.get("Settings", "")):
        # A section that is itself a map of named entries (`identities`):
        # EG__IDENTITIES__<NAME>__CLIENT_ID.
        named = re.fullmatch(r"BTreeMap<String, (\w+)>", section_type.strip())
        if named:
            for field, field_type in fields(structs.get(named.group(1), "")):
                settings[f"EG__{section.upper()}__{NAMED}__{field.upper()}"] = field_type.strip()
            continue
        for key, rust_type in fields(structs.get(section_type.strip(), "")):
            name = f"EG__{section.upper()}__{key.upper()}"
            entry = re.fullmatch(r"BTreeMap<String, (\w+)>", rust_type.strip())
            if entry:
                for field, field_type in fields(structs.get(entry.group(1), "")):
                    settings[f"{name}__{NAMED}__{field.upper()}"] = field_type.strip()
            else:
                settings[name] = rust_type.strip()
    return settings


def setting_pattern(setting: str) -> re.Pattern:
    """How the docs may write `setting`: a named entry's name as any placeholder
    (`<NAME>`, `<ACCOUNT>`, `{NAME}`) or an example name (`MAIN`)."""
    prefix, _, field = setting.partition(f"__{NAMED}__")
    if not field:
        return re.compile(rf"\b{re.escape(setting)}\b")
    entry = r"(?:<[A-Za-z_]+>|\{[A-Za-z_]+\}|[A-Z0-9]+(?:_[A-Z0-9]+)*|…)"
    return re.compile(rf"\b{re.escape(prefix)}__{entry}__{re.escape(field)}\b")


def shortened(setting: str, docs: Docs) -> bool:
    """Whether a line names `setting` by its last part after another of its group:
    "`EG__BROKERS__NATS__<NAME>__USER` / `__PASSWORD`"."""
    group, _, key = setting.rpartition("__")
    group_pattern = setting_pattern(group)
    return any(f"`__{key}`" in line and group_pattern.search(line) for _, _, line in docs.lines)


def check_settings(docs: Docs) -> list[str]:
    settings = code_settings()
    problems = []
    for setting in sorted(settings):
        if not setting_pattern(setting).search(docs.text) and not shortened(setting, docs):
            problems.append(f"{setting} is a setting (crates/eg-runtime/src/settings.rs) that no doc mentions")
    patterns = [setting_pattern(s) for s in settings]
    for name, number, line in docs.lines:
        for word in re.findall(r"\bEG__[A-Za-z0-9_<>{}…]*[A-Za-z0-9>}…]", line):
            if word in SETTING_PLACEHOLDERS or word.endswith("__…") or word.startswith(NOT_YET_SETTINGS):
                continue
            if not any(p.fullmatch(word) for p in patterns):
                problems.append(f"{name}:{number}: {word} is documented as a setting, but the code has none such")
    return problems


# ---- metrics ------------------------------------------------------------------------


def code_metrics() -> set[str]:
    text = METRICS_RS.read_text(encoding="utf-8")
    return set(re.findall(r'pub const \w+: &str = "(\w+)";', text))


def check_metrics(docs: Docs) -> list[str]:
    metrics = code_metrics()
    problems = []
    for metric in sorted(metrics):
        if not re.search(rf"\b{metric}\b", docs.text):
            problems.append(f"{metric} is a metric (crates/eg-runtime/src/metrics.rs) that no doc mentions")
    for where, span in docs.spans():
        # `DroppedEventCount{reason="…"}`, `Matched`/`UnmatchedEventCount`: the name first.
        word = re.match(r"\w+", span)
        if word and METRIC_WORD.fullmatch(word.group()) and word.group() not in metrics:
            problems.append(f"{where}: {word.group()} is documented as a metric, but metrics.rs has none such")
    return problems


# ---- routes -------------------------------------------------------------------------


def code_text(path: Path) -> str:
    """A source file without its trailing test module and without comments."""
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("#[cfg(test)]"):
            break
        kept.append(re.sub(r"^\s*//.*$", "", line))
    return "\n".join(kept)


def closing(text: str, start: int) -> int:
    """The index just past the parenthesis closing the one open before `start`."""
    depth = 1
    quoted = False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and c == "(":
            depth += 1
        elif not quoted and c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def code_routes() -> dict[str, set[str]]:
    """Route path (parameters as `{}`) -> the methods it takes, over every tier."""
    routes: dict[str, set[str]] = {}
    for src in ROUTE_SOURCES:
        files = [f for f in sorted(src.rglob("*.rs")) if not f.name.endswith("tests.rs")]
        texts = {f: code_text(f) for f in files}
        # `.nest("/admin", admin::router(…))`: the routes of module `admin` go under /admin.
        nested = {}
        for text in texts.values():
            for prefix, module in re.findall(r'\.nest\(\s*"([^"]*)"\s*,\s*(\w+)::router\(', text):
                nested[module] = prefix
        for f, text in texts.items():
            module = f.relative_to(src).parts[0].removesuffix(".rs")
            prefix = nested.get(module, "")
            for found in re.finditer(r'\.route\(\s*"([^"]*)"\s*,', text):
                handlers = text[found.end() : closing(text, found.end())]
                methods = {m.upper() for m in re.findall(r"\b(get|post|put|delete|patch)\(", handlers)}
                path = normalize(prefix + found.group(1)) if found.group(1) != "/" or not prefix else prefix
                routes.setdefault(path, set()).update(methods)
    return routes


def normalize(path: str) -> str:
    """Parameters, whatever their name, as `{}`; a segment that holds one is one."""
    segments = [("{}" if ("{" in s or "<" in s) else s) for s in path.strip("/").split("/")]
    return "/" + "/".join(s for s in segments if s)


def documented_paths(path: str) -> list[str]:
    """What a documented path stands for: its query dropped, `{a,b}` alternatives
    expanded, parameters as `{}`; `…` kept at its start or end."""
    path = re.split(r"\[?\?", path, maxsplit=1)[0].rstrip(".,;:)")
    alternatives = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if alternatives:
        expanded = []
        for choice in alternatives.group(1).split(","):
            expanded += documented_paths(path[: alternatives.start()] + choice.strip() + path[alternatives.end() :])
        return expanded
    head = "…" if path.startswith("…") else ""
    tail = "…" if path.endswith("…") and not head else ""
    core = path.strip("…")
    return [head + normalize(core) + tail]


def matches(documented: str, route: str) -> bool:
    """Whether a documented path names `route` (a code path, parameters as `{}`)."""
    doc = documented.strip("…").strip("/").split("/")
    code = route.strip("/").split("/")
    doc = [s for s in doc if s]
    code = [s for s in code if s]
    if documented.startswith("…"):
        code = code[len(code) - len(doc) :] if len(code) >= len(doc) else []
    elif documented.endswith("…"):
        code = code[: len(doc)] if len(code) > len(doc) else []
    if len(doc) != len(code):
        return False
    return all(c == "{}" or c == d for d, c in zip(doc, code))


ROUTE_SPAN = re.compile(rf"(?:^|\s)((?:(?:{'|'.join(METHODS)})(?:\s*[|,/]\s*(?:{'|'.join(METHODS)}))*)\s+)?(…?/[^\s`]*)")


def check_routes(docs: Docs) -> list[str]:
    routes = code_routes()
    mentioned: list[str] = []
    claimed: list[tuple[str, set[str], str, str]] = []
    for where, span in docs.spans():
        for methods, path in ROUTE_SPAN.findall(span):
            # A path alone counts only as the whole span (`/healthz`), and `/` never: a
            # lone slash is a separator more often than the root route.
            if not methods and (path != span.strip() or path == "/"):
                continue
            for documented in documented_paths(path):
                if documented in NOT_ROUTES:
                    continue
                mentioned.append(documented)
                if methods:
                    claimed.append((where, set(re.findall("|".join(METHODS), methods)), documented, path))
    problems = []
    for route in sorted(routes):
        if not any(matches(documented, route) for documented in mentioned):
            shown = "/".join(routes[route] and sorted(routes[route]))
            problems.append(f"{shown} {route} is a route the code serves that no doc mentions")
    for where, methods, documented, path in claimed:
        served = [r for r in routes if matches(documented, r)]
        if not served:
            problems.append(f"{where}: {' '.join(sorted(methods))} {path} is documented as a route, but no tier serves it")
            continue
        taken = set().union(*(routes[r] for r in served))
        for method in sorted(methods - taken):
            problems.append(f"{where}: {method} {path} is documented, but the route takes {', '.join(sorted(taken))}")
    return problems


def main() -> int:
    docs = Docs()
    checks = [
        ("every setting documented, every documented setting real", check_settings),
        ("every metric documented, every documented metric real", check_metrics),
        ("every route documented, every documented route served", check_routes),
    ]
    failed = 0
    for name, check in checks:
        problems = check(docs)
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for problem in problems:
            print(f"     {problem}")
        failed += len(problems)
    if failed:
        print(
            f"check-docs: {failed} finding(s). Document what the code has in README.md, docs/*.md or "
            "deploy/README.md, or correct what the docs name (tools/check-docs.py)",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
