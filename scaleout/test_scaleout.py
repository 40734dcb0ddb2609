"""Scale-out tests: the Ray driver on a local two-node Ray cluster, and the Kubernetes manifests.

Run by scripts/test.sh as `.venv-ray/bin/python -m unittest scaleout/test_scaleout.py -v` after
`bash scripts/install-ray.sh` and the release build (the real `warpfold` binary and model).

The Ray test indexes a generated corpus once in a single process and once as 4 shard tasks on a
cluster of 2 worker nodes (one CPU slot each, joined through `--address` exactly as a real
cluster is), SIGKILLs the Ray worker running shard 1 once, after it has committed some documents
and before it is done, and checks that Ray's retry completes that shard from what it had
committed; then that the merged index equals the single-process one: documents, pages, chunks,
vectors within 1e-5, and search hits, and that searching the 4 shards together gives the merge's
hits.
"""

from __future__ import annotations

import array
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scaleout"))
from warpfold_ray import shard_of  # noqa: E402
BINARY = Path(os.environ.get("WARPFOLD_BIN", REPO / "target/release/warpfold"))
DRIVER = REPO / "scaleout/warpfold_ray.py"
SHARDS = 4
KILLED_SHARD = 1
QUERIES = [
    "which heron counted the lanterns",
    "amber fox near the harbour",
    "copper kettle recipe with thyme",
    "when should I pick tomatoes",
    "quarterly invoice total",
]

WORDS = (
    "river stone lantern heron amber fox harbour copper kettle thyme garden orchard ledger invoice "
    "meadow signal winter market bridge candle archive compass valley thunder marble quarter "
    "engine pepper saddle violet beacon tunnel cedar falcon granite harvest island journal "
    "kernel ladder mirror needle oyster pilgrim quiver rocket silver timber umbrella velvet"
).split()


def env() -> dict[str, str]:
    return {**os.environ, "WARPFOLD_MODELS_DIR": str(REPO / "models"), "WARPFOLD_LOG": "off"}


def warpfold(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BINARY), *args], capture_output=True, text=True, env=env(), timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"warpfold {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def make_corpus(root: Path, documents: int) -> None:
    """Seeded text and Markdown files in nested folders (some sharing paragraphs, so embeddings are
    shared between documents and shards), plus the bundled sample PDFs."""
    rng = random.Random(19)
    shared = [" ".join(rng.choice(WORDS) for _ in range(90)) + "." for _ in range(6)]
    for i in range(documents):
        folder = root / f"team-{i % 5}" / ("archive" if i % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 260))) + "." for _ in range(rng.randint(1, 3))]
        paragraphs.insert(rng.randint(0, len(paragraphs)), f"Note {i}: the {rng.choice(WORDS)} heron counted {i} lanterns by the {rng.choice(WORDS)}.")
        if i % 7 == 0:
            paragraphs.append(rng.choice(shared))
        suffix = ".md" if i % 2 else ".txt"
        (folder / f"doc-{i:04d}{suffix}").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    warpfold("make-samples", str(root / "samples"))


def rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def committed(db: Path) -> int:
    try:
        return rows(db, "SELECT count(*) FROM documents")[0][0]
    except sqlite3.Error:
        return 0


def proc_cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def proc_ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def alive(pid: int) -> bool:
    try:
        state = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:")]
    except OSError:
        return False
    return bool(state) and "Z" not in state[0].split()[1]


class Killer(threading.Thread):
    """Waits for the `warpfold index` of one shard (found by its own shard folder in /proc), lets
    it commit at least one document, and SIGKILLs the Ray worker process running that task, once.
    Only processes whose command line names this test's temporary shard folder are touched."""

    def __init__(self, shard_dir: Path, shard: int, total: int):
        super().__init__(daemon=True)
        self.shard_dir, self.flag, self.total = str(shard_dir), f"{shard}/{total}", total
        self.db = shard_dir / f"shard-{shard}-of-{total}.db"
        self.stop = threading.Event()
        self.killed_worker = self.warpfold_pid = None
        self.committed_before = 0
        self.seen_finished = False

    def find(self) -> int | None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            cmd = proc_cmdline(int(entry))
            if cmd and cmd[0] == str(BINARY) and "index" in cmd and self.flag in cmd and any(self.shard_dir in a for a in cmd):
                return int(entry)
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            pid = self.find()
            if pid is None:
                time.sleep(0.02)
                continue
            while not self.stop.is_set() and alive(pid):
                done = committed(self.db)
                if done >= 1:
                    worker = proc_ppid(pid)
                    title = " ".join(proc_cmdline(worker))
                    assert "ray" in title or "default_worker" in title, f"parent of warpfold is not a Ray worker: {title!r}"
                    os.kill(worker, signal.SIGKILL)
                    self.killed_worker, self.warpfold_pid, self.committed_before = worker, pid, done
                    return
                time.sleep(0.01)
            self.seen_finished = True
            return


class RayShardsTest(unittest.TestCase):
    def test_ray_shards_with_a_killed_task_merge_to_the_single_process_index(self):
        self.assertTrue(BINARY.exists(), f"{BINARY} is missing: build it first (cargo build --release --locked)")
        import ray  # noqa: F401  (a missing install fails here, loudly: run scripts/install-ray.sh)
        from ray.cluster_utils import Cluster

        with tempfile.TemporaryDirectory(prefix="wf-ray-") as tmp:
            tmp = Path(tmp)
            corpus, shard_dir = tmp / "corpus", tmp / "shards"
            make_corpus(corpus, documents=240)
            single = tmp / "single.db"
            started = time.time()
            warpfold("index", str(corpus), "--db", str(single), "--json")
            print(f"single process: {time.time() - started:.1f} s", file=sys.stderr)

            store = 100 * 1024 * 1024
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, "object_store_memory": store})
            try:
                cluster.add_node(num_cpus=1, object_store_memory=store)
                cluster.wait_for_nodes()
                killer = Killer(shard_dir, KILLED_SHARD, SHARDS)
                killer.start()
                started = time.time()
                merged = tmp / "merged.db"
                driver = subprocess.run(
                    [sys.executable, str(DRIVER), str(corpus), "--warpfold", str(BINARY), "--shards", str(SHARDS),
                     "--shard-dir", str(shard_dir), "--out", str(merged), "--address", cluster.address, "--max-retries", "2"],
                    capture_output=True, text=True, env=env(), timeout=900,
                )
                killer.stop.set()
                killer.join(5)
                print(f"ray driver: {time.time() - started:.1f} s\n{driver.stderr[-3000:]}", file=sys.stderr)
            finally:
                cluster.shutdown()
            self.assertEqual(driver.returncode, 0, driver.stderr[-5000:])
            result = json.loads(driver.stdout.strip().splitlines()[-1])

            # The kill happened mid-run, the orphaned warpfold went with its worker, and Ray's retry
            # resumed from the committed documents.
            self.assertIsNotNone(killer.killed_worker, "the test never killed shard 1 mid-run (it finished first?)")
            time.sleep(0.5)
            self.assertFalse(alive(killer.warpfold_pid), "the killed task's warpfold outlived its worker")
            reports = {r["shard"]["index"]: r for r in result["shards"]}
            self.assertEqual(sorted(reports), list(range(SHARDS)))
            killed = reports[KILLED_SHARD]
            self.assertGreaterEqual(killed["attempts"], 2, killed)
            self.assertGreaterEqual(killed["documents_skipped"], killer.committed_before, "the retry re-did committed work")
            self.assertTrue(all(r["attempts"] == 1 for i, r in reports.items() if i != KILLED_SHARD), reports)
            files_all = reports[0]["shard"]["files_all"]
            self.assertEqual(sum(r["shard"]["files"] for r in reports.values()), files_all, "the shards partition the corpus")
            self.assertTrue(all(r["shard"]["files"] > 0 for r in reports.values()))
            # The driver's shard_of is warpfold's: the same split computed in Python.
            keys = [p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file()]
            self.assertEqual(len(keys), files_all)
            for i, r in reports.items():
                self.assertEqual(sum(1 for k in keys if shard_of(k, SHARDS) == i), r["shard"]["files"], f"shard {i}")
            self.assertEqual(len({r["ray_node_id"] for r in reports.values()}), 2, "the tasks ran on both worker nodes")

            self.assert_same_index(single, merged)
            for query in QUERIES:
                one = json.loads(warpfold("search", query, "--db", str(single), "-k", "8", "--json").stdout)
                both = json.loads(warpfold("search", query, "--db", str(merged), "-k", "8", "--json").stdout)
                self.assertEqual(hit_view(one), hit_view(both), query)
                shard_args = [a for i in range(SHARDS) for a in ("--db", str(shard_dir / f"shard-{i}-of-{SHARDS}.db"))]
                across = json.loads(warpfold("search", query, *shard_args, "-k", "8", "--json").stdout)
                self.assertEqual(hit_view(across, exact=True), hit_view(both, exact=True), f"shards searched together: {query}")

    def assert_same_index(self, single: Path, merged: Path) -> None:
        doc_sql = "SELECT path, content_hash, size, status, error, page_count FROM documents ORDER BY path"
        self.assertEqual(rows(single, doc_sql), rows(merged, doc_sql))
        self.assertGreater(len(rows(single, doc_sql)), 240)
        page_sql = "SELECT d.path, p.page, p.text, p.ocr FROM pages p JOIN documents d ON d.id = p.document_id ORDER BY d.path, p.page"
        self.assertEqual(rows(single, page_sql), rows(merged, page_sql))
        chunk_sql = (
            "SELECT d.path, c.ordinal, c.text, hex(c.text_hash), c.page_start, c.page_end, c.page_breaks, c.char_start, c.char_end, c.tokens "
            "FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY d.path, c.ordinal"
        )
        self.assertEqual(rows(single, chunk_sql), rows(merged, chunk_sql))
        meta_sql = "SELECT key, value FROM meta WHERE key IN ('model', 'dimension', 'schema_version') ORDER BY key"
        self.assertEqual(rows(single, meta_sql), rows(merged, meta_sql))
        self.assertEqual(rows(single, "SELECT count(*) FROM embeddings"), rows(merged, "SELECT count(*) FROM embeddings"))
        vec_sql = "SELECT d.path, c.ordinal, e.vector FROM chunks c JOIN documents d ON d.id = c.document_id JOIN embeddings e ON e.text_hash = c.text_hash ORDER BY d.path, c.ordinal"
        a, b = rows(single, vec_sql), rows(merged, vec_sql)
        self.assertEqual([r[:2] for r in a], [r[:2] for r in b], "every chunk has its vector in both")
        worst = 0.0
        for (_, _, va), (_, _, vb) in zip(a, b):
            x, y = array.array("f", va), array.array("f", vb)
            self.assertEqual(len(x), 384)
            worst = max(worst, max(abs(p - q) for p, q in zip(x, y)))
        self.assertLess(worst, 1e-5, f"largest vector difference {worst}")
        # The full-text index holds every merged chunk.
        self.assertEqual(rows(merged, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'lanterns'"),
                         rows(single, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'lanterns'"))


def hit_view(hits: list[dict], exact: bool = False) -> list[tuple]:
    """What a hit shows, without its row id (which differs between indexes). Vectors embedded in
    other bins differ in the last bits, so scores compare by rank fusion's value (ranks), and
    cosines to 1e-5 unless `exact`."""
    view = []
    for h in hits:
        cosine = h["cosine"] if exact or h["cosine"] is None else round(h["cosine"], 5)
        view.append((h["path"], h["page"], h["text"], h["chunk"], h["score"], h["semantic_rank"], h["keyword_rank"], cosine))
    return view


class KubernetesManifestTest(unittest.TestCase):
    """The manifests cannot run here (no cluster); they must parse and say what docs/scale-out.md says."""

    def test_the_indexed_job_maps_its_completion_index_to_a_shard_and_the_merge_job_reads_them_all(self):
        import yaml

        docs = [d for name in ("index-job.yaml", "merge-job.yaml") for d in yaml.safe_load_all((REPO / "deploy/k8s" / name).read_text()) if d]
        jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
        index, merge = jobs["warpfold-index"], jobs["warpfold-merge"]
        spec = index["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        self.assertEqual(spec["completions"], 4)
        self.assertGreaterEqual(spec["backoffLimitPerIndex"], 1, "a failed pod is retried for its own index")
        container = spec["template"]["spec"]["containers"][0]
        script = " ".join(container["command"] + container.get("args", []))
        self.assertIn("--shard ${JOB_COMPLETION_INDEX}/4", script)
        self.assertIn("--db /shards/shard-${JOB_COMPLETION_INDEX}-of-4.db", script)
        self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")
        merge_container = merge["spec"]["template"]["spec"]["containers"][0]
        merge_script = " ".join(merge_container["command"] + merge_container.get("args", []))
        self.assertIn("warpfold merge", merge_script)
        for i in range(4):
            self.assertIn(f"/shards/shard-{i}-of-4.db", merge_script)
        claims = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
        self.assertEqual(claims[0]["spec"]["accessModes"], ["ReadWriteMany"], "every pod writes the shared shard volume")


if __name__ == "__main__":
    unittest.main()
