"""Gathers a device run's results into one summary.json (the device tool returns only a few files):
every warpfold report (`*.report.json`, and the profile-run `.err` tails), every transformers /
sentence-transformers JSON, the correctness checks, and each run's peak GPU memory from its
nvidia-smi samples (/tmp/smi-<run>.csv).

  collect.py OUT_DIR   ->   OUT_DIR/summary.json
"""
import glob
import json
import os
import sys


def last_json_line(path):
    for line in reversed(open(path).read().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def main(out):
    summary = {"warpfold": {}, "peers": {}, "checks": [], "nvidia_smi_peak_mib": {}}
    for p in sorted(glob.glob(os.path.join(out, "wf-*.report.json"))):
        summary["warpfold"][os.path.basename(p)[3:-len(".report.json")]] = last_json_line(p)
    for p in sorted(glob.glob(os.path.join(out, "wf-7b-stress-*.err"))):
        summary["warpfold"]["profile-script " + os.path.basename(p)[:-4]] = last_json_line(p)
    for p in sorted(glob.glob(os.path.join(out, "hf-*.json"))):
        summary["peers"][os.path.basename(p)[3:-5]] = json.load(open(p))
    if os.path.exists(os.path.join(out, "checks.jsonl")):
        summary["checks"] = [json.loads(l) for l in open(os.path.join(out, "checks.jsonl")) if l.strip()]
    for p in sorted(glob.glob("/tmp/smi-*.csv")):
        values = [int(l.split(",")[0]) for l in open(p) if l.strip() and l.split(",")[0].strip().isdigit()]
        if values:
            summary["nvidia_smi_peak_mib"][os.path.basename(p)[4:-4]] = max(values)
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
    print(f"{out}/summary.json: {len(summary['warpfold'])} warpfold runs, {len(summary['peers'])} peer runs, {len(summary['checks'])} checks")


if __name__ == "__main__":
    main(sys.argv[1])
