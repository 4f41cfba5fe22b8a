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
   line is over 100 characters, and no two headings share an anchor.
6. every citation resolves: no tracked file cites the outside digest by section
   number (docs/behaviour.md is the project's own reference), and every
   `<name>.md#<anchor>` (or `(#<anchor>)` inside a Markdown file) names a file that
   exists and a heading of that file.

Exit status 1 with one line per finding, 0 when every rule holds.
"""

from __future__ import annotations

import re
import subprocess
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
    """The headings of a Markdown file as GitHub makes them anchors, in order (before
    a repeated one is numbered: see `anchors_of`)."""
    found = []
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        title = heading(line)
        if title:
            found.append(github_anchor(title[1]))
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

    return problems


# ---- rule 6: every citation resolves -----------------------------------------------

# The section sign, written as an escape so this file does not cite anything itself.
SECTION = "\u00a7"
# A citation of the outside digest: "spec" then the section sign, or the sign before a
# number. "RFC 8259 <sign>4" cites an RFC and stays.
DIGEST_CITATION = re.compile(r"(spec\s*)?" + SECTION + r"(\d+(?:\.\d+)*)?", re.IGNORECASE)
RFC_BEFORE = re.compile(r"RFC \d+ $")
# docs/architecture.md cites the digest until the arch-map branch (issue 26) converts it;
# drop this exception when that branch is merged. Its links are checked all the same.
# The files whose `<name>.md#<anchor>` citations are checked.
CITING_SUFFIXES = (".rs", ".lua", ".md", ".py", ".toml", ".yaml", ".yml", ".json")
CITING_NAMES = ("justfile",)
# A cited file and anchor: `docs/<name>.md#<anchor>`, `../docs/<name>.md#<anchor>`, `<name>.md#<anchor>`.
MD_ANCHOR = re.compile(r"((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.md)#([A-Za-z0-9_-]+)")
# A link to a heading of the same Markdown file: `[x](#anchor)`.
SAME_FILE_ANCHOR = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")


def tracked_text_files() -> list[tuple[str, str]]:
    """(path, text) of every file git tracks that is text (no NUL byte, valid UTF-8).
    Outside a git checkout (a source archive), every file but build output."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode == 0:
        names = [n for n in listed.stdout.decode().split("\0") if n]
    else:
        skip = {".git", "target", "node_modules"}
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    files = []
    for name in sorted(names):
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            files.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return files


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text (code spans and links reduced to
    their text), lower case, punctuation other than '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors_of(text: str) -> set[str]:
    """Every anchor a Markdown file has: one per heading outside code fences (a repeated
    heading gets `-1`, `-2`, … as on GitHub), and every explicit `<a name>` or `id`."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if re.match(r"\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            anchor = github_anchor(heading.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return found


def cited_file(citing: str, target: str) -> Path | None:
    """The file a citation names: relative to the citing file (a Markdown link), else to
    the repository root (`docs/architecture.md` in a Rust comment), else in docs/ (a bare
    `behaviour.md` in code)."""
    for base in (ROOT / Path(citing).parent, ROOT, ROOT / "docs"):
        candidate = (base / target).resolve()
        if candidate.is_file():
            return candidate
    return None


def check_citations() -> list[str]:
    problems = []
    anchors: dict[Path, set[str]] = {}
    for name, text in tracked_text_files():
        checks_links = name.endswith(CITING_SUFFIXES) or Path(name).name in CITING_NAMES
        for number, line in enumerate(text.splitlines(), 1):
            for match in DIGEST_CITATION.finditer(line):
                citation = match.group(1) or match.group(2)
                if not citation or RFC_BEFORE.search(line[: match.start()]):
                    continue
                problems.append(
                    f"{name}:{number}: {match.group(0)!r} cites the outside digest; cite a heading of "
                    "docs/behaviour.md instead (behaviour.md#<anchor>)"
                )
            if not checks_links:
                continue
            targets = [(m.group(1), m.group(2)) for m in MD_ANCHOR.finditer(line)]
            if name.endswith(".md"):
                targets += [(Path(name).name, a) for a in SAME_FILE_ANCHOR.findall(line)]
            for target, anchor in targets:
                path = cited_file(name, target)
                if path is None:
                    problems.append(f"{name}:{number}: cites {target}#{anchor}, but there is no file {target}")
                    continue
                if path not in anchors:
                    anchors[path] = anchors_of(path.read_text(encoding="utf-8"))
                if anchor not in anchors[path]:
                    problems.append(
                        f"{name}:{number}: cites {target}#{anchor}, but {path.relative_to(ROOT)} has no heading with that anchor"
                    )
    return problems


def main() -> int:
    rules = [
        ("no import cycle inside a crate", check_cycles),
        ("no Redis key or script outside eg-store", check_store_boundary),
        ("no fate decision outside eg-core", check_fate_boundary),
        ("bins/ holds only deployable programs", check_bins),
        ("docs/architecture.md keeps up with the tree", check_architecture),
        ("every citation names a file and a heading that exist", check_citations),
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
