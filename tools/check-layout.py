#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked (part of `just lint`).

Each rule is a promise the crate docs make; this script is how anyone sees it still
holds. It reads source text only (no build), so it runs in a second:

1. no import circle between the modules of one crate, at any depth of its module tree
   (`check_cycles` says exactly what counts);
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
   exists and a heading of that file;
7. no Rust source file over 700 lines before its `#[cfg(test)]` test module (files that
   are tests throughout, under a `tests/` directory, are exempt);
8. a destination kind is one unit: its names (its `Target` variant and type, its
   `endpointType`, its settings section, its sender module) appear in product code only
   in its two modules, the two registrations, its connection settings and its egctl flag.

Each rule with known exceptions lists them in one commented allow-list
(`ALLOWED_CIRCLES`, `ALLOWED_LONG_FILES`); an entry that no longer matches fails too,
so the list only shrinks.

Exit status 1 with one line per finding, 0 when every rule holds.
"""

from __future__ import annotations

import functools
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


TEST_MODULE = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
TEST_MODULE_FILE = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;")


def test_module_start(lines: list[str]) -> int | None:
    """The index of the `#[cfg(test)]` line that opens the file's inline test module
    (`#[cfg(test)] mod tests {`), which runs to the end of the file by convention; `None`
    when there is none. A `#[cfg(test)]` on anything else (a helper, `mod x;`) is not it."""
    for index, line in enumerate(lines):
        if line.strip().startswith("#[cfg(test)]"):
            following = next((l for l in lines[index + 1 :] if not l.strip().startswith("#[")), "")
            if TEST_MODULE.match(following):
                return index
    return None


@functools.cache  # every rule reads the same files; read each once
def code_lines(path: Path) -> list[tuple[int, str]]:
    """Source lines without comments, without the trailing `#[cfg(test)]` module and
    without `#[cfg(test)] mod x;` declarations: doc links and test fixtures are not
    dependencies of the code. Other test-only items stay (they are rare and short)."""
    lines = path.read_text().splitlines()
    end = test_module_start(lines)
    kept, skip_next = [], False
    for number, line in enumerate(lines[:end], 1):
        stripped = line.strip()
        if skip_next and TEST_MODULE_FILE.match(line):
            skip_next = False
            continue
        skip_next = stripped.startswith("#[cfg(test)]") or (skip_next and stripped.startswith("#["))
        if stripped.startswith("//"):
            continue
        kept.append((number, re.sub(r"//.*$", "", line)))
    return kept


def crates() -> list[Path]:
    found = []
    for group in ("crates", "bins", "tools"):
        for manifest in sorted((ROOT / group).glob("*/Cargo.toml")):
            found.append(manifest.parent)
    return found


def module_of(src: Path, file: Path) -> str:
    """The top-level module a file belongs to (`subscription` for
    `src/subscription/headers.rs`), or "" for the crate root."""
    rel = file.relative_to(src)
    if len(rel.parts) == 1:
        stem = rel.stem
        return "" if stem in ("lib", "main") else stem
    return rel.parts[0]


# ---- rule 1: no import circle between the modules of a crate -------------------------

# Circles known today, each with the work that removes it. An entry is temporary: the
# rule fails once its circle is gone, so the entry is deleted with the fix.
ALLOWED_CIRCLES: dict[str, list[set[str]]] = {}

# A module by its path from the crate root: `("subscription", "resource")`; `()` is the root.
Module = tuple[str, ...]

USE_STATEMENT = re.compile(r"\buse\s+([^;]*);", re.S)
# A path written in code: `crate::a::b`, `super::super::x`, `self::x::f`.
ANCHORED_PATH = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")
MOD_DECLARATION = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
BARE_PATH = re.compile(r"(?<![\w:])(\w+)::\w+")


@functools.cache
def code_text(path: Path) -> str:
    """The file's code as one string, without comments and test module (`code_lines`)."""
    return "\n".join(line for _, line in code_lines(path))


def crate_roots(crate: Path) -> list[Path]:
    """Every crate root a package has: its library, its programs, its test and bench
    files (`tests/x.rs`, or `tests/x/main.rs` for a test split in modules)."""
    roots = [crate / "src" / "lib.rs", crate / "src" / "main.rs"]
    roots += sorted((crate / "src" / "bin").glob("*.rs"))
    for group in ("tests", "benches", "examples"):
        roots += sorted((crate / group).glob("*.rs"))
        roots += sorted((crate / group).glob("*/main.rs"))
    return [root for root in roots if root.is_file()]


def module_tree(root: Path) -> dict[Module, Path]:
    """The modules a crate root declares with `mod x;` (outside its tests), by path
    from the root (`("subscription", "resource")`), each with its file."""
    tree: dict[Module, Path] = {(): root}
    pending = [((), root, True)]
    while pending:
        path, file, owns_dir = pending.pop()
        base = file.parent if owns_dir else file.parent / file.stem
        for child in MOD_DECLARATION.findall(code_text(file)):
            for candidate, is_dir in ((base / f"{child}.rs", False), (base / child / "mod.rs", True)):
                if candidate.is_file():
                    tree[path + (child,)] = candidate
                    pending.append((path + (child,), candidate, is_dir))
                    break
    return tree


def expand_use(tree: str) -> list[str]:
    """The paths one `use` tree names: `crate::{a::X, b::{Y as W, Z}}` gives
    `crate::a::X`, `crate::b::Y@W`, `crate::b::Z` (`@` marks the name it is used by)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+(\w+)", r"@\1", tree))
    brace = tree.find("{")
    if brace < 0:
        return [tree] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [prefix + path for part in parts if part for path in expand_use(part)]


PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", re.S)


def written_paths(text: str) -> list[str]:
    """Every path the code writes: each leaf of its `use` trees, and each `a::b` in code."""
    paths = [p for statement in USE_STATEMENT.findall(text) for p in expand_use(statement)]
    code = USE_STATEMENT.sub("", text)
    return paths + ANCHORED_PATH.findall(code) + [m.group(0) for m in BARE_PATH.finditer(code)]


def reexports(tree: dict[Module, Path]) -> dict[tuple[Module, str], Module]:
    """Where a name a module re-exports (`pub use subscription::Subscription;` in lib.rs)
    is defined, so `crate::Subscription` counts as naming `subscription`. Followed
    through re-exports of re-exports; a glob (`pub use x::*`) is not followed."""
    found: dict[tuple[Module, str], Module] = {}
    modules = set(tree)
    statements = [(here, written) for here, file in tree.items() for s in PUB_USE.findall(code_text(file)) for written in expand_use(s)]
    for _ in range(8):  # deeper chains than this do not occur
        before = dict(found)
        for here, written in statements:
            name = re.split(r"@|::", written)[-1]
            target = resolve(here, written, modules, before)
            if target is not None and name not in ("*", "self"):
                found[(here, name)] = target
        if found == before:
            break
    return found


def resolve(here: Module, written: str, modules: set[Module], exported: dict[tuple[Module, str], Module]) -> Module | None:
    """The module whose item a path written in module `here` names: the longest known
    module the path starts with, or the module that module re-exports the next name
    from. `None` for a path outside the crate (`std::…`, another crate)."""
    parts = [p for p in written.split("@")[0].split("::") if p]
    if not parts:
        return None
    if parts[0] == "crate":
        absolute = parts[1:]
    elif parts[0] in ("super", "self"):
        base = list(here)
        while parts and parts[0] in ("super", "self"):
            if parts.pop(0) == "super" and base:
                base.pop()
        absolute = base + parts
    elif here + (parts[0],) in modules:
        absolute = list(here) + parts
    else:
        return None
    for length in range(len(absolute), -1, -1):
        module = tuple(absolute[:length])
        if module in modules:
            if length < len(absolute):
                return exported.get((module, absolute[length]), module)
            return module
    return None


def referenced_modules(here: Module, text: str, modules: set[Module], exported: dict[tuple[Module, str], Module]) -> set[Module]:
    """The modules whose items the code of module `here` names, through `crate::`,
    `super::`, `self::` or `child::` paths and the re-exports they pass."""
    found = {resolve(here, written, modules, exported) for written in written_paths(text)}
    return {module for module in found if module is not None}


def sibling_edges(tree: dict[Module, Path]) -> dict[Module, dict[str, dict[str, str]]]:
    """For each module that has children, the graph of its children: an edge `a → b`
    (with one file that makes it) when anything inside `a` names anything inside `b`."""
    levels: dict[Module, dict[str, dict[str, str]]] = {}
    modules = set(tree)
    exported = reexports(tree)
    for here, file in tree.items():
        for there in referenced_modules(here, code_text(file), modules, exported):
            common = 0
            while common < min(len(here), len(there)) and here[common] == there[common]:
                common += 1
            if common in (len(here), len(there)):
                continue  # a module and one of its own descendants
            parent, a, b = here[:common], here[common], there[common]
            edges = levels.setdefault(parent, {}).setdefault(a, {})
            edges.setdefault(b, str(file.relative_to(ROOT)))
    return levels


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
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


def find_circles() -> list[tuple[str, set[str], str]]:
    """Every import circle: (package, its modules by path, what makes each edge)."""
    found = []
    for crate in crates() + [ROOT / "tests"]:
        package = str(crate.relative_to(ROOT))
        for root in crate_roots(crate):
            tree = module_tree(root)
            for parent, graph in sorted(sibling_edges(tree).items()):
                for component in circles({a: set(edges) for a, edges in graph.items()}):
                    named = {"::".join(parent + (m,)) for m in component}
                    edges = "; ".join(
                        f"{a} → {b} in {graph[a][b]}" for a in component for b in sorted(graph[a]) if b in component
                    )
                    found.append((package, named, edges))
    return found


def check_cycles() -> list[str]:
    """No import circle between the modules of a crate, at any depth of its module tree.

    A node is a module together with everything under it. Two modules with the same
    parent (the crate root's modules, or the children of one `mod.rs`) are compared:
    `a → b` when code anywhere inside `a` names an item anywhere inside `b`, through a
    `use` or a path in code (`crate::…`, `super::…`, `self::…`, or `child::…` for a
    declared child), a re-exported name counting for the module that defines it
    (`crate::Settings` names `settings`). A circle is a strongly connected set of such
    siblings: each reaches the others and is reached back.

    A module and its own descendants are never compared: a parent declaring and
    re-exporting its children while they `use super::` its shared types is how one
    module is built from parts, not a circle. The test module (`#[cfg(test)] mod … {`
    to the end of the file), `#[cfg(test)] mod x;` files and comments do not count.
    Every target of a package is a crate root: library, programs, test and bench
    files, and the workspace's `tests/` package."""
    problems = []
    seen_allowed = set()
    for package, named, edges in find_circles():
        allowed = [entry for entry in ALLOWED_CIRCLES.get(package, []) if entry == named]
        if allowed:
            seen_allowed.add((package, frozenset(named)))
            continue
        problems.append(f"{package}: import circle between modules {', '.join(sorted(named))} ({edges})")
    for package, entries in ALLOWED_CIRCLES.items():
        for entry in entries:
            if (package, frozenset(entry)) not in seen_allowed:
                problems.append(
                    f"{package}: the allowed circle {', '.join(sorted(entry))} is gone; delete its ALLOWED_CIRCLES entry"
                )
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


# ---- rule 7: no source file over 700 lines before its tests ------------------------

LONGEST_SOURCE = 700

# Files allowed past the limit for now, each with the work that brings it under. An
# entry is temporary: the rule fails once its file fits, so the entry goes with the fix.
ALLOWED_LONG_FILES: set[str] = set()


def is_test_file(path: Path) -> bool:
    """A file whose whole content is tests: under a package's `tests/` directory, or in
    the workspace's `tests/` (the system tests and their harness)."""
    rel = path.relative_to(ROOT).parts
    return rel[0] == "tests" or (len(rel) > 2 and rel[0] in ("crates", "bins", "tools") and rel[2] == "tests")


def lines_before_tests(path: Path) -> int:
    """The lines of a file up to its inline test module (`#[cfg(test)] mod tests {`)."""
    lines = path.read_text().splitlines()
    end = test_module_start(lines)
    return len(lines) if end is None else end


def check_file_sizes() -> list[str]:
    """Every Rust file of the packages, but the files that are tests throughout, counted
    up to its `#[cfg(test)]` test module: a file past the limit holds more than one idea."""
    problems = []
    counted = set()
    for crate in crates():
        for file in rust_files(crate):
            name = str(file.relative_to(ROOT))
            if is_test_file(file):
                continue
            counted.add(name)
            size = lines_before_tests(file)
            if size > LONGEST_SOURCE and name not in ALLOWED_LONG_FILES:
                problems.append(
                    f"{name}: {size} lines before its tests (at most {LONGEST_SOURCE}; split it into modules with one "
                    "purpose each; files under a tests/ directory are exempt)"
                )
            if size <= LONGEST_SOURCE and name in ALLOWED_LONG_FILES:
                problems.append(f"{name}: {size} lines now; delete its ALLOWED_LONG_FILES entry")
    for name in sorted(ALLOWED_LONG_FILES - counted):
        problems.append(f"{name}: in ALLOWED_LONG_FILES but not a counted source file; delete its entry")
    return problems


# ---- rule 8: a destination kind is one unit -----------------------------------------

CORE_DESTINATIONS = ROOT / "crates/eg-core/src/destination"
SENDER_DESTINATIONS = ROOT / "bins/eg-sender/src/destinations"

# Where a kind may be named besides its modules and the two registrations (`targets!` in
# eg-core, `destinations!` in the sender): its connection settings, its egctl flag, and
# the test servers of eg-testkit.
KIND_NAMED_ALSO = (
    "crates/eg-runtime/src/settings/brokers.rs",
    "bins/egctl/src/endpoints.rs",
    "crates/eg-testkit/",
)

REGISTERED_TARGET = re.compile(r"^\s*(\w+)\((\w+)\) stored as \"\w+\",", re.M)
ENDPOINT_TYPE = re.compile(r'const ENDPOINT_TYPE: &\'static str = "(\w+)";')
SETTINGS_SECTION = re.compile(r'pub const CONNECTIONS: &str = "(\w+)";')


def destination_kinds() -> dict[str, set[str]]:
    """Each registered kind but the webhook (the destination every subscription had
    before kinds existed, named throughout) with the names that mean it: the variant and
    type of `targets!`, the `endpointType` and settings section of its module, and the
    sender module delivering to it (`destinations!`)."""
    registration = (CORE_DESTINATIONS / "mod.rs").read_text()
    sender = (SENDER_DESTINATIONS / "mod.rs").read_text()
    kinds = {}
    for variant, kind in REGISTERED_TARGET.findall(registration):
        if variant == "WebHook":
            continue
        names = {variant, kind}
        for module in CORE_DESTINATIONS.glob("*.rs"):
            text = module.read_text()
            if re.search(rf"\bpub struct {kind}\b", text):
                names |= set(ENDPOINT_TYPE.findall(text)) | set(SETTINGS_SECTION.findall(text))
        for module, sender_kind in re.findall(rf"{variant} => \w+: (\w+)::(\w+),", sender):
            names |= {module, sender_kind}
        kinds[variant] = names
    return kinds


def check_destination_units() -> list[str]:
    """Product code of crates/ and bins/ (comments and test modules left out) names a
    destination kind only where adding a kind has to: so adding one is its two modules,
    two registration lines, its settings and its flag."""
    problems = []
    kinds = destination_kinds()
    if not kinds:
        return [f"no destination kinds found in {CORE_DESTINATIONS.relative_to(ROOT)}/mod.rs (`targets!`)"]
    allowed = [str(CORE_DESTINATIONS.relative_to(ROOT)) + "/", str(SENDER_DESTINATIONS.relative_to(ROOT)) + "/"]
    allowed += KIND_NAMED_ALSO
    for group in ("crates", "bins"):
        for file in rust_files(ROOT / group):
            name = str(file.relative_to(ROOT))
            if is_test_file(file) or any(name.startswith(a) for a in allowed):
                continue
            for number, line in code_lines(file):
                for variant, names in kinds.items():
                    hit = next((n for n in sorted(names) if re.search(rf"\b{n}\b", line)), None)
                    if hit:
                        problems.append(
                            f"{name}:{number}: names the {variant} destination ({hit}); a kind lives in "
                            "crates/eg-core/src/destination/ and bins/eg-sender/src/destinations/"
                        )
    return problems


def main() -> int:
    rules = [
        ("no import circle between the modules of a crate", check_cycles),
        ("no Redis key or script outside eg-store", check_store_boundary),
        ("no fate decision outside eg-core", check_fate_boundary),
        ("bins/ holds only deployable programs", check_bins),
        ("docs/architecture.md keeps up with the tree", check_architecture),
        ("every citation names a file and a heading that exist", check_citations),
        (f"no source file over {LONGEST_SOURCE} lines before its tests", check_file_sizes),
        ("a destination kind is named only in its modules and registrations", check_destination_units),
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
