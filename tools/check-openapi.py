#!/usr/bin/env python3
"""docs/openapi.yaml cannot drift from the code: every route a tier serves is a path
of the document with the same methods, every path of the document is served, and
every example validates against the schema it illustrates (jsonschema, the document's
own dialect, 2020-12). The routes come from check-docs.py's extraction, so both checks
read the code the same way. `just check-openapi` runs this and openapi-spec-validator."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "openapi.yaml"
METHODS = {"get", "put", "post", "delete", "patch"}


def missing(what: str) -> int:
    print(f"error: {what} is missing: pip install {what} (or `just check-openapi`, which installs it into target/openapi-check)", file=sys.stderr)
    return 1


def check_docs_module():
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "tools" / "check-docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_routes(document: dict, routes: dict[str, set[str]], normalize) -> list[str]:
    """Both directions: each served route documented with its methods, each documented
    path served with the methods it lists."""
    problems = []
    documented = {}
    for path, item in document.get("paths", {}).items():
        documented[normalize(path)] = (path, {m.upper() for m in item if m in METHODS})
    for route, methods in sorted(routes.items()):
        if route not in documented:
            problems.append(f"{'/'.join(sorted(methods))} {route} is served but is not a path of docs/openapi.yaml")
            continue
        path, listed = documented[route]
        for method in sorted(methods - listed):
            problems.append(f"{method} {path} is served but docs/openapi.yaml does not list {method} there")
    for route, (path, listed) in sorted(documented.items()):
        served = routes.get(route)
        if served is None:
            problems.append(f"docs/openapi.yaml: {path} is documented but no tier serves it")
            continue
        for method in sorted(listed - served):
            problems.append(f"docs/openapi.yaml: {method} {path} is documented but the route takes {', '.join(sorted(served))}")
    return problems


def examples(node, where: str):
    """(where, schema, example) for every `example` beside a `schema` or inside one."""
    if isinstance(node, dict):
        if "example" in node:
            if "schema" in node:
                yield where, node["schema"], node["example"]
            elif where.split("/")[-1] not in ("parameters",) and ("type" in node or "properties" in node or "$ref" in node):
                yield where, {k: v for k, v in node.items() if k != "example"}, node["example"]
        for key, value in node.items():
            yield from examples(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from examples(value, f"{where}/{i}")


def check_examples(document: dict) -> list[str]:
    import jsonschema

    problems = []
    for where, schema, example in examples(document, "#"):
        # Resolve `#/components/…` against the whole document.
        root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": document.get("components", {})}
        root.update(schema if isinstance(schema, dict) else {})
        try:
            jsonschema.Draft202012Validator(root).validate(example)
        except jsonschema.ValidationError as error:
            at = "/".join(str(p) for p in error.absolute_path) or "(root)"
            problems.append(f"docs/openapi.yaml {where}: the example does not match its schema at {at}: {error.message}")
    return problems


def check_operations(document: dict) -> list[str]:
    """Every operation has its own `operationId` (a generated client names its functions
    by it), and every JSON answer of an operation has a schema that says more than "an
    object": a client generated from the document can read each answer into a type."""
    problems = []
    seen: dict[str, str] = {}
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            where = f"{method.upper()} {path}"
            operation_id = operation.get("operationId")
            if not operation_id:
                problems.append(f"docs/openapi.yaml: {where} has no operationId")
            elif operation_id in seen:
                problems.append(f"docs/openapi.yaml: {where} reuses the operationId {operation_id} of {seen[operation_id]}")
            else:
                seen[operation_id] = where
            for status, answer in operation.get("responses", {}).items():
                answer = resolve(document, answer)
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if schema is not None and untyped(document, schema):
                    problems.append(f"docs/openapi.yaml: {where} answers {status} with JSON of no declared shape")
    return problems


def resolve(document: dict, node: dict) -> dict:
    """`node`, or what its `$ref` (`#/components/…`) names."""
    while isinstance(node, dict) and "$ref" in node:
        target = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def untyped(document: dict, schema: dict) -> bool:
    """A schema that declares no shape: no type, properties, items or combination."""
    schema = resolve(document, schema)
    shaped = ("type", "properties", "items", "allOf", "oneOf", "anyOf", "maxProperties")
    return not any(key in schema for key in shaped)


def main() -> int:
    try:
        import yaml
    except ImportError:
        return missing("pyyaml")
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return missing("jsonschema")
    document = yaml.safe_load(DOCUMENT.read_text(encoding="utf-8"))
    docs = check_docs_module()
    problems = (
        check_routes(document, docs.code_routes(), docs.normalize)
        + check_examples(document)
        + check_operations(document)
    )
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"openapi: {len(document['paths'])} paths, every route documented and served, every operation named and typed, every example valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
