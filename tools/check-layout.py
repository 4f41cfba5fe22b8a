#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked (part of `just lint`).

Each rule is a promise the crate docs make; this script is how anyone sees it still
holds. It reads source text only (no build), so it runs in a second:

1. no import cycle between the modules of one crate;
2. no Redis key and no Lua script outside `crates/eg-store`;
3. no decision about an event's fate outside `crates/eg-core`: the reason names a
   delivery is dead-lettered or dropped with are spelled only there;
4. `bins/` holds exactly the programs a user deploys;
5. docs/architecture.md keeps up with the tree: every Lua script has its entry, every
   module of a program and of the test harness and every test area is named, no prose
   line is over 100 characters, and every link to a docs heading lands on one.

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


# ---- rule 5: docs/architecture.md keeps up with the tree ------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
# The sections of docs/behaviour.md are fixed (issue 26), so a link to one holds even
# before that file exists in a checkout.
BEHAVIOUR_ANCHORS = {
    "topics-and-publishing",
    "event-subscriptions",
    "a-delivery-attempt",
    "what-a-failure-leads-to",
    "retry-schedule-and-policy",
    "dead-lettering",
    "output-batching",
    "protecting-endpoints-and-the-system",
    "durability-promises",
    "namespace-topics",
    "metrics",
    "namespaces-as-their-clients-speak-them",
}
# The Markdown files whose links to a heading (`file.md#anchor`) must land on one.
LINKING_DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LONGEST_LINE = 100


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside code fences, numbered: a `#` in a code block is no heading."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def heading(line: str) -> tuple[int, str] | None:
    match = re.match(r"(#{1,6}) +(.*?) *#* *$", line)
    return (len(match.group(1)), match.group(2)) if match else None


def slugs(path: Path) -> list[str]:
    """The headings of a Markdown file as GitHub makes them anchors, in order: lower
    case, links reduced to their text, punctuation dropped, spaces made hyphens."""
    found = []
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        title = heading(line)
        if title:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title[1]).lower()
            found.append(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def anchors(path: Path) -> set[str]:
    """Every anchor of a file's headings; a repeated heading is numbered (`-1`, `-2`)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for slug in slugs(path):
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def repeated_headings(path: Path) -> list[str]:
    all_slugs = slugs(path)
    return sorted({slug for slug in all_slugs if all_slugs.count(slug) > 1})


def section(text: str, title: str) -> str | None:
    """The text under the heading `title`, up to the next heading of its level or above."""
    body, level = None, 0
    for _, line in prose_lines(text):
        found = heading(line)
        if body is None:
            if found and found[1] == title:
                body, level = [], found[0]
        elif found and found[0] <= level:
            break
        else:
            body.append(line)
    return None if body is None else "\n".join(body)


def named(text: str, name: str) -> bool:
    """`name`, `name.rs` or `name/`, backticked."""
    return re.search(r"`" + re.escape(name) + r"(?:\.rs|/)?`", text) is not None


def check_architecture() -> list[str]:
    """The inventories of docs/architecture.md that carry explanations are kept by hand;
    this fails when the tree grows past them: a Lua script without its entry, a module of
    a program or of the test harness, or a test area, not named where the document lists
    them. Also its line length, and every link to a docs heading landing on one."""
    doc = "docs/architecture.md"
    text = ARCHITECTURE.read_text(encoding="utf-8")
    problems = []

    def listed(title: str) -> str:
        body = section(text, title)
        if body is None:
            problems.append(f"{doc}: no section headed {title!r}")
        return body or ""

    scripts_dir = ROOT / "crates" / "eg-store" / "src" / "scripts"
    scripts = listed("Scripts and their guarantees")
    entries = set(re.findall(r"^- \*\*`([\w.]+\.lua)`\*\*", scripts, re.M))
    present = {p.name for p in scripts_dir.glob("*.lua")}
    for name in sorted(present - entries):
        problems.append(f"{doc}: the script {name} has no entry under 'Scripts and their guarantees' (a bullet starting - **`{name}`**)")
    for name in sorted(entries - present):
        problems.append(f"{doc}: 'Scripts and their guarantees' has an entry for {name}, which is not in {scripts_dir.relative_to(ROOT)}")

    for program in sorted(p for p in (ROOT / "bins").iterdir() if p.is_dir()):
        title = f"{program.name}, in pieces"
        pieces = listed(title)
        src = program / "src"
        for module in sorted({module_of(src, f) for f in rust_files(src)} - {""}):
            if not named(pieces, module):
                problems.append(f"{doc}: the module `{module}` of {src.relative_to(ROOT)} is not named under {title!r}")

    tests = listed("The system tests")
    harness = ROOT / "tests" / "src"
    modules = {module_of(harness, f) for f in rust_files(harness)} - {""}
    modules |= {f.stem for f in (harness / "system").glob("*.rs")} - {"mod"}
    for module in sorted(modules):
        if not named(tests, module):
            problems.append(f"{doc}: the harness module `{module}` of tests/src is not named under 'The system tests'")
    for area in sorted(p.stem for p in (ROOT / "tests" / "tests" / "system").glob("*.rs")):
        if area != "main" and not named(tests, area):
            problems.append(f"{doc}: the test area `{area}` (tests/tests/system/{area}.rs) is not named under 'The system tests'")

    for slug in repeated_headings(ARCHITECTURE):
        problems.append(f"{doc}: two headings share the anchor #{slug} (a link reaches only the first; name them apart)")

    for number, line in prose_lines(text):
        if len(line) > LONGEST_LINE and not line.lstrip().startswith("|"):
            problems.append(f"{doc}:{number}: a line of {len(line)} characters (wrap prose at {LONGEST_LINE}; only tables may be longer)")

    known: dict[Path, set[str]] = {}
    for source in LINKING_DOCS:
        if not source.is_file():
            continue
        for number, line in prose_lines(source.read_text(encoding="utf-8")):
            for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", line):
                if target and not target.endswith(".md"):
                    continue
                path = (source.parent / target).resolve() if target else source
                where = path.relative_to(ROOT) if ROOT in path.parents else target
                if path.name == "behaviour.md" and not path.is_file():
                    ok = anchor in BEHAVIOUR_ANCHORS
                elif not path.is_file():
                    problems.append(f"{source.relative_to(ROOT)}:{number}: the link to {where}#{anchor} names no file")
                    continue
                else:
                    ok = anchor in known.setdefault(path, anchors(path))
                if not ok:
                    problems.append(f"{source.relative_to(ROOT)}:{number}: the link to {where}#{anchor} names no heading of it")
    return problems


def main() -> int:
    rules = [
        ("no import cycle inside a crate", check_cycles),
        ("no Redis key or script outside eg-store", check_store_boundary),
        ("no fate decision outside eg-core", check_fate_boundary),
        ("bins/ holds only deployable programs", check_bins),
        ("docs/architecture.md keeps up with the tree", check_architecture),
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
