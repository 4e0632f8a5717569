#!/usr/bin/env python3
"""Validates workloads against docs/workload.schema.json (a ctest case).

    check_schema.py SCHEMA --valid FILE... --invalid FILE...

Every --valid file must pass the schema, every --invalid one must fail it (so
the schema is known to reject structural errors: unknown keys, wrong types,
missing fields). Needs python3-jsonschema (scripts/install-deps).
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    sys.exit("check_schema.py: the jsonschema module is missing; install python3-jsonschema (scripts/install-deps)")


def main():
    schema_path = sys.argv[1]
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    mode, failures, counts = None, [], {"--valid": 0, "--invalid": 0}
    for arg in sys.argv[2:]:
        if arg in counts:
            mode = arg
            continue
        with open(arg) as f:
            document = json.load(f)
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        counts[mode] += 1
        if mode == "--valid" and errors:
            e = errors[0]
            failures.append(f"{arg}: /{'/'.join(map(str, e.absolute_path))}: {e.message}")
        if mode == "--invalid" and not errors:
            failures.append(f"{arg}: passes the schema but is not a valid workload")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"schema: {counts['--valid']} workloads valid, {counts['--invalid']} rejected as expected")


if __name__ == "__main__":
    main()
