#!/usr/bin/env python3
"""Checks one `meshsim sweep` against `meshsim run` (a ctest case).

    check_sweep.py MESHSIM WORK_DIR [--plot] [--expect-bytes A,B,...] -- SWEEP_ARGS...

Runs `meshsim sweep SWEEP_ARGS --csv --json --workloads [--plot]` in WORK_DIR and
checks that
  - the CSV and JSON files exist and parse, with one row per point and op;
  - every point's workload (--workloads DIR/point_N.json) has the swept values;
  - every CSV row equals, field by field and exactly, what `meshsim run --json`
    reports for that point's workload, and the JSON embeds that same document;
  - the table on stdout has one line per row, with the same times;
  - with --expect-bytes: the points' sizes are exactly these, in order;
  - with --plot: the PNG is a PNG and the SVG is XML with an <svg> root, and the
    gnuplot script draws the closed-form terms and the knee.
Prints what differs and exits 1 on any failure.
"""
import csv
import json
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

failures = []


def fail(message):
    failures.append(message)


def main():
    args = sys.argv[1:]
    meshsim, work = args[0], args[1]
    options = args[2:args.index("--")]
    plot = "--plot" in options
    expect_bytes = None
    if "--expect-bytes" in options:
        expect_bytes = [int(b) for b in options[options.index("--expect-bytes") + 1].split(",")]
    sweep_args = args[args.index("--") + 1:]
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if os.path.isfile(path):
            os.remove(path)
    command = [meshsim, "sweep", *sweep_args, "--csv", "s.csv", "--json", "s.json", "--workloads", "points"]
    if plot:
        command += ["--plot", "s"]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or done.stderr:
        sys.exit(f"`{' '.join(command)}` exited {done.returncode}; stderr:\n{done.stderr}")
    table = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]

    with open(os.path.join(work, "s.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(work, "s.json")) as f:
        sweep = json.load(f)
    if sweep.get("format") != "meshsim-sweep":
        fail(f"s.json: format is {sweep.get('format')!r}, expected 'meshsim-sweep'")
    points = sweep["points"]
    if expect_bytes is not None and [p["bytes"] for p in points] != expect_bytes:
        fail(f"the points' bytes are {[p['bytes'] for p in points]}, expected {expect_bytes}")
    if len(table) != len(rows):
        fail(f"the table has {len(table)} rows, the CSV {len(rows)}")

    row = 0
    for p in points:
        i = p["point"]
        workload_path = os.path.join(work, "points", f"point_{i}.json")
        with open(workload_path) as f:
            workload = json.load(f)
        # The swept values are in the point's workload.
        if p["bytes"] is not None:
            for op in workload["ops"]:
                if "bytes" in op and op["bytes"] != p["bytes"]:
                    fail(f"point {i}: op bytes {op['bytes']} in its workload, expected {p['bytes']}")
        if p["preset"] is not None:
            hw = workload["hardware"]
            preset = hw if isinstance(hw, str) else hw["preset"]
            if preset != p["preset"]:
                fail(f"point {i}: preset {preset} in its workload, expected {p['preset']}")
        if p["mesh"] is not None and list(workload["mesh"].values()) != p["mesh"]:
            fail(f"point {i}: mesh {workload['mesh']} in its workload, expected {p['mesh']}")
        if p["algorithm"] not in (None, "auto"):
            for op in workload["ops"]:
                if op["kind"] in ("all_gather", "all_reduce", "reduce_scatter", "all_to_all") and \
                        op.get("algorithm") != p["algorithm"]:
                    fail(f"point {i}: algorithm {op.get('algorithm')} in its workload, expected {p['algorithm']}")

        run = subprocess.run([meshsim, "run", "-q", "--json", "-", os.path.join("points", f"point_{i}.json")],
                             cwd=work, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            fail(f"meshsim run on point {i} failed: {run.stderr}")
            continue
        expected = json.loads(run.stdout)
        # The same document but for the workload's name (the base file vs point_N.json).
        if {**p["run"], "workload": None} != {**expected, "workload": None}:
            fail(f"point {i}: the sweep JSON's run document differs from `meshsim run --json`")
        mesh = "x".join(str(m["size"]) for m in expected["mesh"])
        for op in expected["ops"]:
            if row >= len(rows):
                fail(f"the CSV ends before point {i} op {op['name']}")
                break
            r = rows[row]
            want = {
                "point": i, "preset": expected["hardware"]["preset"], "mesh": mesh, "op": op["name"],
                "kind": op["kind"], "axes": " ".join(op["mesh_axes"]), "bytes": op["bytes"],
                "time_ps": op["time_ps"], "closed_form_ps": op["closed_form_ps"],
                "latency_term_ps": op.get("latency_term_ps"), "bandwidth_term_ps": op.get("bandwidth_term_ps"),
                "ratio": op["ratio"], "bound": op["bound"], "algorithm": op.get("algorithm"),
                "algbw_bytes_per_s": op.get("algbw_bytes_per_s"), "busbw_bytes_per_s": op.get("busbw_bytes_per_s"),
                "transfers": op["transfers"], "link_bytes": op["link_bytes"], "start_ps": op["start_ps"],
                "end_ps": op["end_ps"],
            }
            for key, value in want.items():
                got = r.get(key)
                if value is None:
                    ok = got == ""
                elif isinstance(value, bool) or isinstance(value, str):
                    ok = got == str(value)
                elif isinstance(value, int):
                    ok = got is not None and got.lstrip("-").isdigit() and int(got) == value
                else:
                    ok = got not in (None, "") and float(got) == value
                if not ok:
                    fail(f"CSV row {row} (point {i}, op {op['name']}), {key}: got {got!r}, `meshsim run` gives {value!r}")
            # The table's time column (us, 3 decimals) is the same time.
            if row < len(table) and f"{op['time_ps'] / 1e6:.3f}" not in table[row].split():
                fail(f"table row {row}: time {op['time_ps'] / 1e6:.3f} us not found in: {table[row]}")
            row += 1
    if row != len(rows):
        fail(f"the CSV has {len(rows)} rows, the points' runs {row} ops")

    if plot:
        with open(os.path.join(work, "s.png"), "rb") as f:
            png = f.read()
        if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
            fail("s.png is not a PNG")
        else:
            width, height = struct.unpack(">II", png[16:24])
            if (width, height) != (1100, 1000) or len(png) < 20000:
                fail(f"s.png: {width}x{height}, {len(png)} bytes; expected 1100x1000 with a drawing")
        root = ET.parse(os.path.join(work, "s.svg")).getroot()
        if not root.tag.endswith("svg"):
            fail(f"s.svg: root element {root.tag}, expected svg")
        with open(os.path.join(work, "s.gp")) as f:
            script = f.read()
        for what in ("latency term", "bandwidth term", "closed form", "knee", "s.png", "s.svg"):
            if what not in script:
                fail(f"s.gp does not draw '{what}'")

    if failures:
        print("\n".join(failures[:50]))
        sys.exit(1)
    print(f"sweep: {len(points)} points, {len(rows)} CSV rows, all equal to `meshsim run`")


if __name__ == "__main__":
    main()
