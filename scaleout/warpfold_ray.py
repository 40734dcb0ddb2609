"""Index a corpus on a Ray cluster: N shard tasks running `warpfold index --shard I/N`, then one merge.

Why Ray and not a scheduler of our own: a team's corpus outgrows one machine, and a cluster
engine already places tasks on nodes, gives each one a GPU when there are GPUs, retries a task
whose process failed or whose node was lost, and runs the same code against a local cluster on a
laptop (the tests) and against a real cluster address. What warpfold adds is only what makes
retries safe: a shard's file set is fixed by a stable path hash (the same files on every attempt,
on whatever node it lands), and `warpfold index` commits document by document, so a retried
shard resumes from what its killed attempt committed instead of starting over.

What must be shared between the nodes (docs/scale-out.md): the corpus, at the same path on every
node, the `warpfold` binary and its model at the same paths, and the shard folder (`--shard-dir`),
where each task writes its shard index and the merge task reads them all.

    python scaleout/warpfold_ray.py --warpfold ./target/release/warpfold --shards 4 \
        --shard-dir /shared/shards --out /shared/team.db /shared/docs
    # against a running cluster: add --address ray://head:10001 (or host:6379, or auto)

Progress: each task returns its shard's `warpfold index --json` report, which the driver prints as
the task finishes (documents indexed, unchanged, failed, chunks, seconds, attempts); the last line
on stdout is one JSON object with every shard's report and the merge's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import ray

# A shard's attempts, one JSON line each, beside its index: how many times Ray ran it.
ATTEMPTS_SUFFIX = ".attempts.jsonl"


class ShardFailed(RuntimeError):
    """`warpfold index` (or merge) exited with an error; Ray retries the task."""


def shard_of(key: str, count: int) -> int:
    """The shard of a path key, as `warpfold index --shard` computes it (crates/index/src/shard.rs)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % count


def shard_db(shard_dir: Path, index: int, count: int) -> Path:
    return shard_dir / f"shard-{index}-of-{count}.db"


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the task's worker process dies, so a lost task
    leaves no `warpfold` writing its shard beside the retry (Linux; elsewhere nothing)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        pass


def run_warpfold(command: list[str], env: dict[str, str], timeout: float | None) -> dict:
    """Runs one warpfold command that prints a JSON report; raises ShardFailed on failure."""
    proc = subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        preexec_fn=_die_with_parent,
        timeout=timeout,
    )
    if proc.returncode != 0:
        reason = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        raise ShardFailed(f"{' '.join(command[:2])} ... failed ({reason}): {proc.stderr.strip()[-2000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise ShardFailed(f"{' '.join(command[:2])} printed no report")
    return json.loads(lines[-1])


def index_shard(
    warpfold: str,
    paths: list[str],
    shard_dir: str,
    index: int,
    count: int,
    device: str,
    extra: list[str],
    env: dict[str, str],
    timeout: float | None,
) -> dict:
    """One shard (a Ray task's body): index the shard's files into its own index, return the report."""
    db = shard_db(Path(shard_dir), index, count)
    attempt = {"node": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    with open(str(db) + ATTEMPTS_SUFFIX, "a", encoding="utf-8") as log:
        log.write(json.dumps(attempt) + "\n")
    command = [warpfold, "--device", device, "index", *paths, "--db", str(db), "--shard", f"{index}/{count}", "--json", *extra]
    report = run_warpfold(command, env, timeout)
    with open(str(db) + ATTEMPTS_SUFFIX, encoding="utf-8") as log:
        report["attempts"] = sum(1 for line in log if line.strip())
    report["db"] = str(db)
    report["node"] = attempt["node"]
    report["ray_node_id"] = ray.get_runtime_context().get_node_id()
    return report


def merge_shards(warpfold: str, out: str, dbs: list[str], force: bool, env: dict[str, str], timeout: float | None) -> dict:
    """The merge (a Ray task's body): `warpfold merge OUT SHARD...`; safe to retry (it writes a
    temporary file and renames it into place)."""
    command = [warpfold, "merge", out, *dbs, "--json"] + (["--force"] if force else [])
    return run_warpfold(command, env, timeout)


def describe(report: dict) -> str:
    shard = report.get("shard", {})
    return (
        f"shard {shard.get('index')}/{shard.get('count')} on {report.get('node')}: "
        f"{shard.get('files')} of {shard.get('files_all')} files; {report['documents_indexed']} indexed, "
        f"{report['documents_skipped']} unchanged, {report['documents_failed']} failed; "
        f"{report['chunks']} chunks ({report['chunks_embedded']} embedded) in {report['seconds']:.1f} s; "
        f"attempt {report.get('attempts')}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="files and folders to index (the same paths on every node)")
    p.add_argument("--warpfold", required=True, help="the warpfold binary (the same path on every node)")
    p.add_argument("--shards", type=int, required=True, help="how many shards (tasks) to split the corpus into")
    p.add_argument("--shard-dir", required=True, help="shared folder for the shard indexes (every node reads and writes it)")
    p.add_argument("--out", required=True, help="the merged index to write")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--address", default=None, help="a running Ray cluster (host:port, ray://host:10001, auto); default: start a local one")
    p.add_argument("--local-cpus", type=int, default=None, help="CPUs of the local cluster started without --address")
    p.add_argument("--gpus", choices=["auto", "on", "off"], default="auto", help="one GPU per task: when the cluster has GPUs (auto), always, never")
    p.add_argument("--cpus-per-task", type=float, default=1, help="CPUs each task reserves (and its extraction workers, --jobs)")
    p.add_argument("--max-retries", type=int, default=3, help="Ray retries of a failed or lost shard task")
    p.add_argument("--task-timeout", type=float, default=None, help="seconds one warpfold run may take before the attempt fails")
    p.add_argument("--index-arg", action="append", default=[], help="one more argument for `warpfold index` (repeatable)")
    args = p.parse_args(argv)
    if args.shards < 1:
        p.error("--shards must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shard_dir = Path(args.shard_dir).resolve()
    shard_dir.mkdir(parents=True, exist_ok=True)
    paths = [str(Path(p).resolve()) for p in args.paths]
    warpfold = str(Path(args.warpfold).resolve())
    # What the tasks need of this environment (the model folder, logging), passed explicitly: a
    # task on another node does not inherit the driver's environment.
    env = {k: v for k, v in os.environ.items() if k.startswith("WARPFOLD_")}
    for index in range(args.shards):
        Path(str(shard_db(shard_dir, index, args.shards)) + ATTEMPTS_SUFFIX).unlink(missing_ok=True)

    if args.address:
        ray.init(address=args.address, logging_level="WARNING")
    else:
        ray.init(num_cpus=args.local_cpus, include_dashboard=False, logging_level="WARNING")
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        use_gpu = args.gpus == "on" or (args.gpus == "auto" and gpus >= 1)
        # Ray sets CUDA_VISIBLE_DEVICES for a task with a GPU: its one GPU is cuda:0.
        device = "cuda:0" if use_gpu else "cpu"
        jobs = max(1, int(args.cpus_per_task))
        extra = ["--jobs", str(jobs), *args.index_arg]
        task = ray.remote(index_shard).options(
            num_cpus=args.cpus_per_task,
            num_gpus=1 if use_gpu else 0,
            max_retries=args.max_retries,
            retry_exceptions=[ShardFailed],
            scheduling_strategy="SPREAD",
        )
        print(f"{args.shards} shard task(s) on {'1 GPU' if use_gpu else f'{args.cpus_per_task:g} CPU'} each; cluster: {ray.cluster_resources()}", file=sys.stderr)
        pending = {
            task.remote(warpfold, paths, str(shard_dir), i, args.shards, device, extra, env, args.task_timeout): i for i in range(args.shards)
        }
        reports: dict[int, dict] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(done[0])
            reports[index] = ray.get(done[0])
            print(describe(reports[index]), file=sys.stderr, flush=True)
        dbs = [str(shard_db(shard_dir, i, args.shards)) for i in range(args.shards)]
        merge = ray.remote(merge_shards).options(num_cpus=1, max_retries=args.max_retries, retry_exceptions=[ShardFailed])
        merged = ray.get(merge.remote(warpfold, str(Path(args.out).resolve()), dbs, args.force, env, args.task_timeout))
        print(
            f"merged {merged['documents']} documents, {merged['chunks']} chunks, {merged['embeddings']} embeddings -> {merged['output']}",
            file=sys.stderr,
        )
        print(json.dumps({"shards": [reports[i] for i in range(args.shards)], "merge": merged}))
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
