#!/usr/bin/env python3
"""Issue 17's acceptance: on every TPU shape of the list, AllGather, ReduceScatter
and AllReduce over all axes finish within 5 % of their lower bound in the
bandwidth regime, and never below it.

For each shape the message size is the smallest whose bandwidth term (the
per-chip ingress bound) is 100x the latency floor (hops to the farthest chip x
the hop latency): the edge of the bandwidth regime, where the schedules'
per-stage latencies weigh most. Shapes: v4 and v5p with sides in
{4, 8, ..., 28} up to 16x20x28 (sorted sides; every one is whole cubes, so a
torus), v5e and v6e {4, 8, 16} x {4, 8, 16} (only axes of 16 wrap), and the
twisted v4 tori among the v4 shapes (k x k x 2k and k x 2k x 2k).

usage: check_bound_shapes.py MESHSIM WORK_DIR [--presets p,q] [--schedule balanced|equal]
Prints one line per shape and the worst ratio; exits 1 on any failure."""
import argparse
import itertools
import json
import math
import os
import subprocess
import sys

LIMIT = 1.05


def shapes(preset):
    """(shape, twisted) pairs."""
    if preset in ("tpu-v4", "tpu-v5p"):
        sides = [4, 8, 12, 16, 20, 24, 28]
        plain = [s for s in itertools.combinations_with_replacement(sides, 3) if s[0] <= 16 and s[1] <= 20]
        twisted = [s for s in plain if preset == "tpu-v4" and (2 * s[0] == 2 * s[1] == s[2] or 2 * s[0] == s[1] == s[2])]
        return [(s, False) for s in plain] + [(s, True) for s in twisted]
    return [((a, b), False) for a in (4, 8, 16) for b in (4, 8, 16)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("meshsim")
    ap.add_argument("work")
    ap.add_argument("--presets", default="tpu-v4,tpu-v5p,tpu-v5e,tpu-v6e")
    ap.add_argument("--schedule", default=None)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures, worst, count = [], (0.0, ""), 0
    for preset in args.presets.split(","):
        for shape, twisted in shapes(preset):
            names = "XYZ"[: len(shape)]
            # Wraparound by the preset's rule; the topology output says which.
            topology = {"shape": list(shape)}
            if twisted:
                topology["twisted"] = True
            probe = {"hardware": preset, "topology": topology, "mesh": dict(zip(names, shape)),
                     "ops": [{"name": "probe", "kind": "all_gather", "bytes": 1, "axes": list(names)}]}
            name = "x".join(map(str, shape)) + (" twisted" if twisted else "")
            path = os.path.join(args.work, f"{preset}_{name.replace(' ', '_')}.json")
            with open(path, "w") as f:
                json.dump(probe, f)
            out = subprocess.run([args.meshsim, "run", path, "--json", "-", "-q"], capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{path}: {out.stderr.strip()}")
            run = json.loads(out.stdout)
            hw = run["hardware"]
            b, alpha = hw["ici_bandwidth_one_way_bytes_per_s"], hw["hop_latency_ps"] * 1e-12
            wrap = run["topology"]["wraparound"]
            p = math.prod(shape)
            links = sum(2 if w else 1 for w in wrap)
            diameter = sum(x // 2 if w else x - 1 for x, w in zip(shape, wrap))
            if twisted:  # the farthest chip, as meshsim measures it (the bound's latency term)
                diameter = run["ops"][0]["lower_bound_ps"] / (hw["hop_latency_ps"])
            v = math.ceil(100 * diameter * alpha * links * b * p / (p - 1))
            ops = []
            for kind in ("all_gather", "reduce_scatter", "all_reduce"):
                op = {"name": kind, "kind": kind, "bytes": v, "axes": list(names)}
                if args.schedule:
                    op["algorithm"] = args.schedule
                if ops:
                    op["after"] = [ops[-1]["name"]]
                ops.append(op)
            probe["ops"] = ops
            with open(path, "w") as f:
                json.dump(probe, f)
            out = subprocess.run([args.meshsim, "run", path, "--json", "-", "-q", "--max-transfers", "67108864"],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{path}: {out.stderr.strip()}")
            row = []
            for op in json.loads(out.stdout)["ops"]:
                count += 1
                bound = op["lower_bound_ps"]
                ratio = op["time_ps"] / bound
                row.append(f"{op['kind']} {ratio:.4f}")
                label = f"{preset} {name} {op['kind']}"
                if ratio > worst[0]:
                    worst = (ratio, label)
                if bound < 100 * diameter * alpha * 1e12 * (2 if op["kind"] == "all_reduce" else 1) * (1 - 1e-9):
                    failures.append(f"{label}: not in the bandwidth regime (bound {bound} ps)")
                if ratio < 1 - 1e-9:
                    failures.append(f"{label}: time {op['time_ps']} ps below the lower bound {bound} ps")
                if ratio > LIMIT:
                    failures.append(f"{label}: time / bound = {ratio:.4f} > {LIMIT}")
            print(f"{preset:8} {name:17} wrap {''.join('1' if w else '0' for w in wrap)} "
                  f"V={v:>11}  " + "  ".join(row), flush=True)
    print(f"{count} collectives; worst time / bound {worst[0]:.4f} ({worst[1]})")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
