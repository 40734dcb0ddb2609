"""Summarises one `warpfold index --json` run over a folder of real files (bench/realfiles/run.sh):
counts by status and reason, Poppler fallbacks, OCR, and the word recall of the indexed text of
each PDF with a text layer against Poppler's pdftotext."""
import collections
import json
import re
import sqlite3
import statistics
import subprocess
import sys

folder, db, report_path, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
report = json.load(open(report_path))
word = re.compile(r"\w{3,}")


def words(text):
    return {w.lower() for w in word.findall(text)}


def reason(error):
    # the reason's kind, without its page numbers and file-specific detail
    error = re.sub(r"\d+", "N", error)
    return error.split(":")[0] if not error.startswith("no text") else error[:90]


statuses = collections.Counter()
reasons = collections.Counter()
for failure in report["failures"]:
    statuses[failure["status"]] += 1
    reasons[(failure["status"], reason(failure["error"]))] += 1
indexed = report["documents_indexed"]
warnings = collections.defaultdict(list)
for w in report["warnings"]:
    warnings[w["path"]].append(w["error"])
poppler = sorted(p for p, ws in warnings.items() if any(x.startswith("read by Poppler") for x in ws))
ocr = sorted(p for p, ws in warnings.items() if any("read by OCR" in x for x in ws))
conn = sqlite3.connect(db)
recalls = []
for path, status in conn.execute("SELECT path, status FROM documents WHERE status = 'indexed' AND path LIKE '%.pdf'"):
    if path in ocr:
        continue
    ours = "\n".join(t for (t,) in conn.execute(
        "SELECT text FROM pages WHERE document_id = (SELECT id FROM documents WHERE path = ?) ORDER BY page", (path,)))
    theirs = subprocess.run(["pdftotext", "-enc", "UTF-8", path, "-"], capture_output=True, text=True, errors="replace").stdout
    want = words(theirs)
    if len(want) >= 20:
        recalls.append((len(words(ours) & want) / len(want), path))
recalls.sort()
print(f"## {folder}: {report['documents_total']} files in {seconds:.0f} s")
print(f"- indexed {indexed} (OCR {len(ocr)}, read by Poppler's pdftotext {len(poppler)}), "
      + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
for (status, why), n in sorted(reasons.items()):
    print(f"  - {status} x{n}: {why}")
for p in poppler:
    print(f"  - pdftotext: {p.rsplit('/', 1)[-1]}: {[x for x in warnings[p] if x.startswith('read by Poppler')][0][:120]}")
if recalls:
    values = [r for r, _ in recalls]
    print(f"- word recall against pdftotext over {len(values)} PDFs with a text layer: median {statistics.median(values):.3f}, "
          f"p10 {values[len(values) // 10]:.3f}, min {values[0]:.3f} ({recalls[0][1].rsplit('/', 1)[-1]})")
    for r, p in recalls[:5]:
        print(f"  - lowest: {r:.3f} {p.rsplit('/', 1)[-1]}")
