"""Start-up cost of the command line: CPU seconds of short commands, each in a fresh process.

    python bench/startup.py [--repeat 5]

Runs ``extrap --help``, ``extrap pe list`` and ``extrap theory alibi`` (a built-in scheme,
so the theory engine's work is included) ``--repeat`` times each, interleaved, as
``python -m extrap.cli ...``.  CPU time is the child's user + system time, which a busy
machine inflates less than wall time.  Prints one line per command (median and best CPU
seconds, median wall seconds, and the heavy libraries the command imported) and ends with
ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "--help": ["--help"],
    "pe list": ["pe", "list"],
    "theory alibi": ["theory", "alibi"],
}
HEAVY = ("torch", "sympy", "mpmath", "numpy", "scipy", "matplotlib", "jinja2", "transformers")

# Runs the command in-process and reports which heavy libraries it loaded, on stderr's last line.
PROBE = (
    "import sys\n"
    "from extrap.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    f"print('loaded:', ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


def cpu_of(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh ``python -m extrap.cli`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "extrap.cli", *argv], capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"extrap {' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def loaded(argv: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return [m for m in last.removeprefix("loaded:").strip().split(",") if m]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per command (default 5)")
    args = ap.parse_args()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(max(1, args.repeat)):
        for name, argv in COMMANDS.items():  # interleaved: a burst of load hits every command alike
            samples[name].append(cpu_of(argv))
    results = {}
    for name, argv in COMMANDS.items():
        cpu = [c for c, _ in samples[name]]
        wall = [w for _, w in samples[name]]
        results[name] = {
            "cpu_s_median": round(statistics.median(cpu), 3),
            "cpu_s_min": round(min(cpu), 3),
            "wall_s_median": round(statistics.median(wall), 3),
            "imports": loaded(argv),
        }
        r = results[name]
        print(
            f"extrap {name:<13} CPU {r['cpu_s_median']:.3f} s median, {r['cpu_s_min']:.3f} s best, "
            f"wall {r['wall_s_median']:.3f} s; loads {', '.join(r['imports']) or 'none of ' + '/'.join(HEAVY)}"
        )
    print(
        json.dumps(
            {
                "bench": "startup",
                "repeat": args.repeat,
                "commands": results,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
