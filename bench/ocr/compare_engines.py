#!/usr/bin/env python3
"""OCR engines side by side on the same page images: RapidOCR (the PaddleOCR PP-OCRv4 detection and
recognition models as ONNX, run by ONNX Runtime) and Tesseract (the `tesseract` command, the same
library and English data warpfold loads through its C API).

The pages come from the ocr_accuracy example:

    cargo run --release -p warpfold-index --example ocr_accuracy -- 6 --write /tmp/ocr-pages
    python3 bench/ocr/compare_engines.py /tmp/ocr-pages > results.jsonl

Each setting directory holds page-N.png (the page image as the extraction worker gets it out of the
PDF), page-N.txt (the typeset text), page-N.planted (the planted sentence) and `dpi`. Both engines
run on one thread; the engines take turns page by page (the first engine alternates) so that other
load on the machine falls on both alike. Prints one JSON line per engine and setting (character accuracy as
scangen::character_accuracy computes it, the same with all white space removed, planted sentences
found, wall and CPU seconds a page), then one line
describing the engines (versions, what each needs installed and its size).
"""

import os

# One thread everywhere, before numpy / OpenCV / ONNX Runtime are imported.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_THREAD_LIMIT"):
    os.environ[var] = "1"

import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def fold(text):
    """Runs of white space folded to one space, as scangen::character_accuracy does."""
    return " ".join(text.split())


def edit_distance(a, b):
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        row = [i + 1] + [0] * len(b)
        for j, cb in enumerate(b):
            row[j + 1] = min(previous[j] + (ca != cb), previous[j + 1] + 1, row[j] + 1)
        previous = row
    return previous[len(b)]


def character_accuracy(recognized, truth):
    """1 - edit distance / characters of the truth, both folded (scangen::character_accuracy)."""
    a, b = fold(recognized), fold(truth)
    if not b:
        return 1.0 if not a else 0.0
    return 1.0 - edit_distance(a, b) / len(b)


def letter_accuracy(recognized, truth):
    """The same with all white space taken out of both: the letters alone, so that words run
    together (spaces dropped) are told apart from letters misread."""
    a, b = "".join(recognized.split()), "".join(truth.split())
    if not b:
        return 1.0 if not a else 0.0
    return 1.0 - edit_distance(a, b) / len(b)


def boxes_to_text(result):
    """RapidOCR's boxes in reading order: grouped into lines top to bottom (a box joins the line
    whose vertical centre is within half a box height of its own), each line left to right."""
    if not result:
        return ""
    items = []
    for box, text, _score in result:
        ys = [p[1] for p in box]
        xs = [p[0] for p in box]
        items.append(((min(ys) + max(ys)) / 2, max(ys) - min(ys), min(xs), text))
    items.sort(key=lambda item: item[0])
    lines = []
    for item in items:
        if lines and abs(item[0] - lines[-1]["centre"]) < max(item[1], lines[-1]["height"]) / 2:
            lines[-1]["items"].append(item)
        else:
            lines.append({"centre": item[0], "height": item[1], "items": [item]})
    return "\n".join(" ".join(i[3] for i in sorted(line["items"], key=lambda i: i[2])) for line in lines)


class Rapid:
    name = "rapidocr"

    def __init__(self):
        import cv2

        cv2.setNumThreads(1)
        started = time.perf_counter()
        from rapidocr_onnxruntime import RapidOCR

        self.engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
        self.load_seconds = time.perf_counter() - started

    def read(self, png, dpi):
        cpu = time.process_time()
        wall = time.perf_counter()
        result, _elapsed = self.engine(str(png))
        text = boxes_to_text(result)
        return text, time.perf_counter() - wall, time.process_time() - cpu


class Tesseract:
    name = "tesseract"

    def __init__(self):
        self.env = dict(os.environ, OMP_THREAD_LIMIT="1")

    def read(self, png, dpi):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        done = subprocess.run(
            ["tesseract", str(png), "-", "--dpi", str(dpi), "-l", "eng"],
            env=self.env,
            capture_output=True,
            check=True,
        )
        seconds = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return done.stdout.decode("utf-8"), seconds, cpu


def du(path):
    total = 0
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def describe_engines():
    """Versions and what each engine needs on disk."""
    import importlib.metadata as md

    import onnxruntime

    site = Path(onnxruntime.__file__).parent.parent
    python = {}
    for dist in md.distributions():
        if dist.metadata["Name"] in ("pip", "setuptools"):  # the venv's own, not needed to run
            continue
        files = [site / f for f in (dist.files or []) if (site / f).is_file()]
        python[dist.metadata["Name"]] = {"version": dist.version, "bytes": sum(f.stat().st_size for f in files)}
    models = Path(__import__("rapidocr_onnxruntime").__file__).parent / "models"
    rapid = {
        "onnxruntime": onnxruntime.__version__,
        "providers": onnxruntime.get_available_providers(),
        "models": {p.name: p.stat().st_size for p in sorted(models.glob("*.onnx"))},
        "python_packages": python,
        "python_packages_bytes": sum(p["bytes"] for p in python.values()),
    }
    debian = {}
    for package in ("tesseract-ocr", "libtesseract5", "tesseract-ocr-eng", "tesseract-ocr-osd", "liblept5"):
        try:
            out = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version} ${Installed-Size}", package], capture_output=True, text=True, check=True
            ).stdout.split()
            debian[package] = {"version": out[0], "installed_kib": int(out[1])}
        except (subprocess.CalledProcessError, FileNotFoundError, IndexError):
            debian[package] = None
    version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    languages = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True).stdout.splitlines()[1:]
    return {
        "rapidocr": rapid,
        "tesseract": {"version": version, "debian_packages": debian, "languages_installed": languages},
    }


def tesseract_startup(png):
    """The CLI's fixed cost a page (process start, loading the English model), which warpfold's C
    API pays once: the median of 5 runs on a blank strip cut from a page."""
    import cv2

    strip = cv2.imread(str(png), cv2.IMREAD_GRAYSCALE)[:40, :200]
    strip[:] = 255
    path = Path("/tmp") / f"compare-engines-blank-{os.getpid()}.png"
    cv2.imwrite(str(path), strip)
    engine = Tesseract()
    times = sorted(engine.read(path, 300)[1] for _ in range(5))
    path.unlink()
    return times[2]


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ocr-pages")
    settings = sorted(d for d in root.iterdir() if (d / "dpi").is_file())
    if not settings:
        sys.exit(f"no setting directories under {root}: run the ocr_accuracy example with --write {root}")
    if shutil.which("tesseract") is None:
        sys.exit("no tesseract command (Debian: apt install tesseract-ocr tesseract-ocr-eng)")
    rapid = Rapid()
    tesseract = Tesseract()
    engines = [rapid, tesseract]
    # Warm both once (ONNX Runtime's first run allocates and optimizes), untimed.
    first = sorted(settings[0].glob("page-*.png"))[0]
    for engine in engines:
        engine.read(first, int((settings[0] / "dpi").read_text()))
    turn = 0
    for setting in settings:
        dpi = int((setting / "dpi").read_text())
        pages = sorted(setting.glob("page-*.png"), key=lambda p: int(p.stem.split("-")[1]))
        rows = {e.name: {"accuracy": [], "letters": [], "seconds": [], "cpu_seconds": [], "planted_found": 0} for e in engines}
        for png in pages:
            truth = png.with_suffix(".txt").read_text()
            planted = png.with_suffix(".planted").read_text()
            order = engines if turn % 2 == 0 else engines[::-1]
            turn += 1
            for engine in order:
                text, seconds, cpu = engine.read(png, dpi)
                row = rows[engine.name]
                row["accuracy"].append(character_accuracy(text, truth))
                row["letters"].append(letter_accuracy(text, truth))
                row["seconds"].append(seconds)
                row["cpu_seconds"].append(cpu)
                row["planted_found"] += int(planted in fold(text))
        for name, row in rows.items():
            n = len(row["accuracy"])
            print(
                json.dumps(
                    {
                        "engine": name,
                        "setting": setting.name,
                        "dpi": dpi,
                        "pages": n,
                        "accuracy_mean": round(sum(row["accuracy"]) / n, 4),
                        "accuracy_worst": round(min(row["accuracy"]), 4),
                        "letters_accuracy_mean": round(sum(row["letters"]) / n, 4),
                        "planted_found": row["planted_found"],
                        "seconds_per_page": round(sum(row["seconds"]) / n, 3),
                        "cpu_seconds_per_page": round(sum(row["cpu_seconds"]) / n, 3),
                    }
                ),
                flush=True,
            )
    print(
        json.dumps(
            {
                "engines": describe_engines(),
                "rapidocr_load_seconds": round(rapid.load_seconds, 3),
                "tesseract_cli_startup_seconds": round(tesseract_startup(first), 3),
                "load_average": os.getloadavg(),
                "cpus": os.cpu_count(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
