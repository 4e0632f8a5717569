#!/usr/bin/env python3
"""A sweep under mpirun gives the same files as one process (a ctest case).

    check_sweep_mpi.py MPIEXEC MESHSIM WORK_DIR RANKS -- SWEEP_ARGS...

Runs `meshsim sweep SWEEP_ARGS --csv --json` once alone and once under
`MPIEXEC --allow-run-as-root --oversubscribe -n RANKS`, then compares the CSV
and JSON files byte for byte.
"""
import os
import subprocess
import sys


def sweep(prefix, work, meshsim, args, launcher):
    command = [*launcher, meshsim, "sweep", "-q", *args, "--csv", prefix + ".csv", "--json", prefix + ".json"]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    out = {}
    for ext in ("csv", "json"):
        with open(os.path.join(work, f"{prefix}.{ext}"), "rb") as f:
            out[ext] = f.read()
    return out


def main():
    mpiexec, meshsim, work, ranks = sys.argv[1:5]
    args = sys.argv[sys.argv.index("--") + 1:]
    os.makedirs(work, exist_ok=True)
    one = sweep("one", work, meshsim, args, [])
    many = sweep(f"ranks{ranks}", work, meshsim, args, [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", ranks])
    failures = [f"{ext}: {ranks} ranks differ from one process" for ext in one if one[ext] != many[ext]]
    if one["csv"].count(b"\n") < 2:
        failures.append("the sweep wrote no rows")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"mpirun -n {ranks}: CSV ({len(one['csv'])} bytes) and JSON ({len(one['json'])} bytes) identical to one process")


if __name__ == "__main__":
    main()
