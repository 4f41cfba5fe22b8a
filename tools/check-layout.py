#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked (part of `just lint`).

Each rule is a promise the crate docs make; this script is how anyone sees it still
holds. It reads source text only (no build), so it runs in a second:

1. no import cycle between the modules of one crate;
2. no Redis key and no Lua script outside `crates/eg-store`;
3. no decision about an event's fate outside `crates/eg-core`: the reason names a
   delivery is dead-lettered or dropped with are spelled only there;
4. `bins/` holds exactly the programs a user deploys.

Exit status 1 with one line per finding, 0 when every rule holds.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOYABLE = {"eg-ingress", "eg-scheduler", "eg-sender", "eg-deadletter", "egctl"}

# The reasons eg-core decides with (eg_core::fate). A binary that spells one decides.
FATE_REASONS = [
    "NonRetriableFailure",
    "MaxDeliveryAttemptsExceeded",
    "TimeToLiveExceeded",
    "SubscriptionDeleted",
    "EventMissing",
    "EventUnrenderable",
    "DeadLetterDestinationUnavailable",
]

# What a Redis key of eg looks like in Rust source: a hash tag `{<prefix>:…}` built
# with format! (`{{{}:…}}`) or written out (`{eg:…}`), or a work-stream suffix; and a
# consumer group name handed to a stream command.
KEY_PATTERNS = [
    re.compile(r'"[^"\n]*\{\{\{\}:[^"\n]*"'),
    re.compile(r'"[^"\n]*\{eg:[^"\n]*"'),
    re.compile(r'"[^"\n]*:(?:ready|retry|deadletter|paused|history|catalog-version)(?::[^"\n]*)?"'),
    re.compile(r'(?:\.arg\(|X(?:PENDING|READGROUP|ACK|GROUP|CLAIM|AUTOCLAIM|INFO)\b.*)"(?:senders|deadletter)"'),
]
SCRIPT_PATTERNS = [re.compile(r"redis::Script"), re.compile(r'include_str!\([^)]*\.lua"\)')]


def rust_files(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.rs") if "target" not in p.parts)


def code_lines(path: Path) -> list[tuple[int, str]]:
    """Source lines without comments and without the trailing `#[cfg(test)]` module:
    doc links and test fixtures are not dependencies of the code."""
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#[cfg(test)]"):
            break
        if stripped.startswith("//"):
            continue
        lines.append((number, re.sub(r"//.*$", "", line)))
    return lines


def crates() -> list[Path]:
    found = []
    for group in ("crates", "bins", "tools"):
        for manifest in sorted((ROOT / group).glob("*/Cargo.toml")):
            found.append(manifest.parent)
    return found


# ---- rule 1: no import cycle inside a crate ----------------------------------------


def module_of(src: Path, file: Path) -> str:
    """The top-level module a file belongs to (`subscription` for
    `src/subscription/headers.rs`), or "" for the crate root."""
    rel = file.relative_to(src)
    if len(rel.parts) == 1:
        stem = rel.stem
        return "" if stem in ("lib", "main") else stem
    return rel.parts[0]


def import_graph(src: Path) -> dict[str, set[str]]:
    files = rust_files(src)
    modules = {module_of(src, f) for f in files} - {""}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    crate_ref = re.compile(r"\bcrate::(?:\{([^}]*)\}|(\w+))")
    for file in files:
        here = module_of(src, file)
        if not here:
            continue
        top_level_file = len(file.relative_to(src).parts) == 1
        for _, line in code_lines(file):
            targets = set()
            for group, single in crate_ref.findall(line):
                names = re.findall(r"\b(\w+)", group) if group else [single]
                targets.update(names)
            if top_level_file:
                targets.update(re.findall(r"\bsuper::(\w+)", line))
            for target in targets & modules:
                if target != here:
                    graph[here].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def check_cycles() -> list[str]:
    problems = []
    for crate in crates():
        graph = import_graph(crate / "src")
        for component in cycles(graph):
            edges = [f"{a} → {b}" for a in component for b in sorted(graph[a]) if b in component]
            problems.append(f"{crate.relative_to(ROOT)}: import cycle between modules {', '.join(component)} ({'; '.join(edges)})")
    return problems


# ---- rule 2: Redis keys and scripts live in eg-store --------------------------------


def check_store_boundary() -> list[str]:
    store = ROOT / "crates" / "eg-store"
    problems = []
    for lua in sorted(ROOT.rglob("*.lua")):
        if "target" in lua.parts or store in lua.parents:
            continue
        problems.append(f"{lua.relative_to(ROOT)}: a Lua script outside crates/eg-store")
    for crate in crates():
        if crate == store:
            continue
        for file in rust_files(crate):
            for number, line in code_lines(file):
                for pattern in SCRIPT_PATTERNS + KEY_PATTERNS:
                    match = pattern.search(line)
                    if match:
                        if pattern in SCRIPT_PATTERNS:
                            what = "a Redis script outside crates/eg-store (scripts live in crates/eg-store/src/scripts)"
                        else:
                            what = f"a Redis key or group name {match.group(0)} outside crates/eg-store (use eg_store::keyspace)"
                        problems.append(f"{file.relative_to(ROOT)}:{number}: {what}")
    return problems


# ---- rule 3: fate decisions live in eg-core ----------------------------------------


def check_fate_boundary() -> list[str]:
    """The product's crates and programs only: eg-chaos's oracle spells the reasons on
    purpose, to check what eg wrote without trusting eg's own code."""
    core = ROOT / "crates" / "eg-core"
    reason = re.compile(r'"(' + "|".join(FATE_REASONS) + r')"')
    problems = []
    for crate in crates():
        if crate == core or crate.parent.name == "tools":
            continue
        for file in rust_files(crate / "src"):
            for number, line in code_lines(file):
                match = reason.search(line)
                if match:
                    problems.append(
                        f"{file.relative_to(ROOT)}:{number}: the fate reason {match.group(0)} spelled outside crates/eg-core (use eg_core::fate)"
                    )
    return problems


# ---- rule 4: bins/ is what a user deploys --------------------------------------------


def check_bins() -> list[str]:
    present = {p.name for p in (ROOT / "bins").iterdir() if p.is_dir()}
    problems = [f"bins/{name}: not a deployable program (the project's own tools belong in tools/)" for name in sorted(present - DEPLOYABLE)]
    problems += [f"bins/{name}: a deployable program is missing" for name in sorted(DEPLOYABLE - present)]
    return problems


def main() -> int:
    rules = [
        ("no import cycle inside a crate", check_cycles),
        ("no Redis key or script outside eg-store", check_store_boundary),
        ("no fate decision outside eg-core", check_fate_boundary),
        ("bins/ holds only deployable programs", check_bins),
    ]
    failed = 0
    for name, rule in rules:
        problems = rule()
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for problem in problems:
            print(f"     {problem}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
