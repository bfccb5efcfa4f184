"""Before/after table from two aggregator_scale results.json files: mfumon ÷ bare app per size and database."""
import json, statistics, sys

def med(x):
    v = x["values"] if isinstance(x, dict) else x
    return statistics.median(v) if v else float("nan")

before, after = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda s: (s["db"], s["gpus"])
b = {key(s): s for s in before["sizes"]}
rows = [
    ("ingest, closed loop (median of 3 windows)", lambda s: f"{med(s['ratios']):.2f}"),
    ("per CPU-second of the server, deferred work included", lambda s: f"{med(s['cpu_ratios']):.2f}"),
    ("CPU per push, open loop at the same rate (bare ÷ mfumon)", lambda s: f"{med(s['cpu_ratio_at_open']):.2f}"),
    ("capacity, GPU-samples/s per process (open loop)", lambda s: f"{s['capacity'] * 8:,.0f}"),
    ("p99 at 80% of that capacity, ms", lambda s: f"{med(s['p99_at_cap_80']):.0f}"),
]
for db in ("sqlite", "postgres"):
    sizes = [s for s in after["sizes"] if s["db"] == db]
    print(f"\n{db}: before ({before['settings'].get('seconds')} s windows) → after, " + " / ".join(f"{s['gpus']:,}" for s in sizes) + " GPUs")
    print("| | " + " | ".join(f"{s['gpus']:,} GPUs" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label, fn in rows:
        cells = []
        for s in sizes:
            old = b.get(key(s))
            cells.append(f"{fn(old) if old else '-'} → **{fn(s)}**")
        print(f"| {label} | " + " | ".join(cells) + " |")
print()
for name, run in (("before", before), ("after", after)):
    print(name, "pushgateway", [(p["gpus"], p["ingest"]) for p in run["pushgateway"]], "minutes", round(run["minutes"]))
