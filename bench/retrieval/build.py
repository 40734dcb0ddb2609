#!/usr/bin/env python3
"""Build known-item retrieval sets from real text installed on this machine.

Prerequisite (run once, as root; this script installs nothing):
    apt-get install -y manpages manpages-dev man-db groff-base debian-handbook

Sets (see README.md next to this file):
  manpages         Debian's `manpages` + `manpages-dev`: one document per real page
                   (symlinks and `.so` alias stubs skipped), rendered with man-db/groff.
                   Query = the NAME line's description (text after " - ");
                   relevant document = that page with its NAME section removed.
  debian-handbook  Debian's `debian-handbook` (en-US HTML), split into one document per
                   chapter/section/subsection (each unit's own text, nested subsections
                   are their own documents). Query = the section title (numbering
                   stripped); relevant document = the section body without its title.

Output (per set, into OUT, default /tmp/retrieval/<set>):
  corpus.jsonl   {"id", "title", "text"}   title never contains the query text:
                 "open(2)" for man pages, "" for the handbook.
  queries.jsonl  {"id", "text"}
  qrels.tsv      query-id <TAB> 0 <TAB> doc-id <TAB> 1
  stats.json     counts and the rules' drop counts

Rules (both sets):
  * every usable document stays in the corpus (pages without a usable query are distractors);
  * a query is dropped when it is empty or shorter than 3 whitespace-separated words;
  * queries equal after lower-casing and whitespace collapsing are merged into ONE query
    whose qrels list every document carrying it (each relevance 1): they are
    indistinguishable by the query, so any of them is a correct answer.

Usage:
  python3 bench/retrieval/build.py                       # both sets, default folders
  python3 bench/retrieval/build.py manpages [OUT]
  python3 bench/retrieval/build.py debian-handbook [OUT]
"""
import gzip
import json
import os
import re
import subprocess
import sys
import time
from collections import OrderedDict
from html.parser import HTMLParser

MIN_QUERY_WORDS = 3
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# A CJK query has no spaces to count words by: this many characters stand in for 3 words.
MIN_CJK_QUERY_CHARS = 6
HANDBOOK_DIR = "/usr/share/doc/debian-handbook/html/en-US"


def norm_key(q):
    return " ".join(q.lower().split())


def write_set(out, docs, cand):
    """docs: list of (id, title, text); cand: list of (doc_id, query_text or None)."""
    os.makedirs(out, exist_ok=True)
    stats = {"documents": len(docs), "candidates": len(cand)}
    dropped_empty = dropped_short = 0
    groups = OrderedDict()  # norm query -> (query text, [doc ids])
    for did, q in cand:
        q = " ".join((q or "").split())
        if not q:
            dropped_empty += 1
            continue
        if len(q.split()) < MIN_QUERY_WORDS and len(CJK.findall(q)) < MIN_CJK_QUERY_CHARS:
            dropped_short += 1
            continue
        k = norm_key(q)
        if k in groups:
            groups[k][1].append(did)
        else:
            groups[k] = (q, [did])
    with open(os.path.join(out, "corpus.jsonl"), "w") as f:
        for did, title, text in docs:
            f.write(json.dumps({"id": did, "title": title, "text": text}, ensure_ascii=False) + "\n")
    nq = nrel = multi = 0
    with open(os.path.join(out, "queries.jsonl"), "w") as fq, open(os.path.join(out, "qrels.tsv"), "w") as fr:
        for q, dids in groups.values():
            qid = "q:" + dids[0]
            fq.write(json.dumps({"id": qid, "text": q}, ensure_ascii=False) + "\n")
            for d in dids:
                fr.write(f"{qid}\t0\t{d}\t1\n")
            nq += 1
            nrel += len(dids)
            multi += len(dids) > 1
    stats.update(
        queries=nq,
        qrels=nrel,
        dropped_empty_query=dropped_empty,
        dropped_short_query=dropped_short,
        merged_duplicate_queries=multi,
        docs_in_merged_queries=sum(len(d) for _, d in groups.values() if len(d) > 1),
    )
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    return stats


# ---------------------------------------------------------------- man pages

def manpage_files(packages=("manpages", "manpages-dev"), folder=r"/usr/share/man/man\d/"):
    lst = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=True).stdout
    files = []
    for p in sorted(set(lst.split("\n"))):
        if not re.match("^" + folder, p) or os.path.islink(p) or not os.path.isfile(p):
            continue
        raw = gzip.open(p, "rt", errors="replace").read() if p.endswith(".gz") else open(p, errors="replace").read()
        lines = [l for l in raw.split("\n") if l.strip() and not l.startswith('.\\"') and not l.startswith("'\\\"")]
        if lines and lines[0].startswith(".so "):
            continue  # alias stub pointing at another page
        files.append(p)
    return files


def render_man(path):
    env = dict(os.environ, MANWIDTH="80", LANG="C.UTF-8", LC_ALL="C.UTF-8")
    env.pop("MAN_KEEP_FORMATTING", None)  # man-db keeps formatting whenever this is set at all
    # --nh/--nj: no hyphenation, no justification (no words split across lines).
    # A time limit: one zh_CN page (df.1) leaves groff waiting forever.
    man = subprocess.Popen(["timeout", "60", "man", "--nh", "--nj", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    txt = subprocess.run(["col", "-bx"], stdin=man.stdout, capture_output=True, env=env).stdout
    man.wait()
    return txt.decode("utf-8", "replace")


SEP = re.compile(r"\s[-\u2010\u2011\u2012\u2013\u2014\u2212]\s")


def split_manpage(txt, name_heading="NAME"):
    """Return (description or None, text without header/footer and NAME section).

    `name_heading` is the NAME section's heading; None takes the page's first heading, whatever
    its language calls it (BEZEICHNUNG, NOM, ИМЯ, 名前, 名称, ...)."""
    lines = [l.rstrip() for l in txt.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    # Page header "open(2)   System Calls Manual   open(2)" and footer "Linux man-pages 6.03 ... open(2)".
    if lines and re.match(r"^\S+\(\w+\)\s{2,}.*\S+\(\w+\)$", lines[0]):
        lines.pop(0)
    if lines and re.search(r"\S+\(\w+\)$", lines[-1]) and re.match(r"^\S", lines[-1]):
        lines.pop()
    desc = None
    out = []
    i = 0
    while i < len(lines):
        heading = lines[i].strip() and not lines[i].startswith(" ")
        if heading and name_heading is None and desc is None and not "".join(out).strip():
            name_heading = lines[i].strip()
        if heading and lines[i].strip() == name_heading:
            j = i + 1
            body = []
            while j < len(lines) and (not lines[j] or lines[j].startswith(" ")):
                body.append(lines[j])
                j += 1
            name = " ".join(" ".join(body).split())
            m = SEP.search(" " + name + " ")
            if m and desc is None:
                desc = (" " + name + " ")[m.end():].strip()
            i = j
            continue
        out.append(lines[i])
        i += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")
    return desc, text


def build_manpages(out):
    docs, cand = [], []
    for p in manpage_files():
        base = os.path.basename(p)
        did = base[:-3] if base.endswith(".gz") else base  # e.g. open.2
        name, _, sec = did.rpartition(".")
        desc, text = split_manpage(render_man(p))
        if len(text.split()) < 10:
            continue
        docs.append((did, f"{name}({sec})", text))
        cand.append((did, desc))
    return write_set(out, docs, cand)


# ------------------------------------------------------ translated man pages

# Debian's translations of man pages (manpages-l10n and the Japanese and Chinese projects): the
# same known-item task in the language people read. Queries are the translated NAME lines.
TRANSLATIONS = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "it": "it", "ja": "ja", "zh": "zh_CN"}


def build_translated(lang, out):
    locale = TRANSLATIONS[lang]
    docs, cand = [], []
    for p in manpage_files((f"manpages-{lang}",), rf"/usr/share/man/{locale}/man\d/"):
        base = os.path.basename(p)
        did = base[:-3] if base.endswith(".gz") else base
        name, _, sec = did.rpartition(".")
        desc, text = split_manpage(render_man(p), name_heading=None)
        if len(text.split()) < 10 and len(CJK.findall(text)) < 30:
            continue
        docs.append((did, f"{name}({sec})", text))
        cand.append((did, desc))
    return write_set(out, docs, cand)


# ---------------------------------------------------------- debian-handbook

UNIT_CLASSES = {"section", "chapter", "appendix", "preface"}
SKIP = {("div", "toc"), ("ul", "docnav"), ("div", "banner"), ("p", "title-banner")}
BLOCK = {"div", "p", "br", "li", "dt", "dd", "pre", "tr", "table", "ul", "ol", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"}
VOID = {"br", "img", "meta", "link", "hr", "input", "area", "col", "base", "wbr"}


class Unit:
    def __init__(self, anchor):
        self.anchor = anchor
        self.title = []
        self.body = []


class HandbookParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, kind) kind in {"unit", "skip", "titlepage", "heading", "pre", None}
        self.units = []  # finished, in document order of start
        self.open_units = []
        self.skip = 0
        self.pre = 0
        self.in_heading = None  # unit whose title is being collected
        self.last_anchor = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = set((a.get("class") or "").split())
        kind = None
        if tag in ("head", "script", "style") or (tag == "div" and "toc" in cls) or (tag == "ul" and "docnav" in cls) \
                or a.get("id") in ("banner", "title") or (tag == "div" and "book" in cls):
            kind = "skip"
            self.skip += 1
        elif tag == "div" and cls & UNIT_CLASSES and not self.skip:
            u = Unit(None)
            self.units.append(u)
            self.open_units.append(u)
            u.fresh = True
            kind = "unit"
        elif re.fullmatch(r"h[1-6]", tag) and "title" in cls and self.open_units and getattr(self.open_units[-1], "fresh", False) and not self.skip:
            self.in_heading = self.open_units[-1]
            self.open_units[-1].fresh = False
            kind = "heading"
        elif tag == "pre":
            self.pre += 1
            kind = "pre"
        if tag == "a" and a.get("id") and self.in_heading is not None and self.in_heading.anchor is None:
            self.in_heading.anchor = a["id"]
        if tag in BLOCK:
            self._emit("\n")
        if tag not in VOID:
            self.stack.append((tag, kind))

    def handle_endtag(self, tag):
        # pop to the matching tag (the files are well-formed XHTML)
        while self.stack:
            t, kind = self.stack.pop()
            if kind == "skip":
                self.skip -= 1
            elif kind == "unit":
                self.open_units.pop()
            elif kind == "heading":
                self.in_heading = None
            elif kind == "pre":
                self.pre -= 1
            if t == tag:
                break
        if tag in BLOCK:
            self._emit("\n")

    def handle_data(self, data):
        if self.skip or not self.open_units:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
        self._emit(data)

    def _emit(self, s):
        if self.skip or not self.open_units:
            return
        if self.in_heading is not None:
            self.in_heading.title.append(s)
        else:
            self.open_units[-1].body.append(s)


NUM = re.compile(r"^(Chapter \d+\.|Appendix [A-Z]\.|[A-Z0-9]+(\.\d+)+\.|\d+\.|[A-Z]\.)\s+")


def clean_block_text(parts):
    s = "".join(parts)
    lines = [l.rstrip() for l in s.split("\n")]
    out = []
    for l in lines:
        if l.strip() == "" and (not out or out[-1] == ""):
            continue
        out.append(l if l.startswith("  ") else l.strip())
    return "\n".join(out).strip()


def build_handbook(out):
    docs, cand = [], []
    files = sorted(f for f in os.listdir(HANDBOOK_DIR) if f.endswith(".html") and f != "index.html")
    for fn in files:
        p = HandbookParser()
        p.feed(open(os.path.join(HANDBOOK_DIR, fn), encoding="utf-8").read())
        p.close()
        for k, u in enumerate(p.units):
            title = " ".join("".join(u.title).split())
            title = NUM.sub("", title)
            text = clean_block_text(u.body)
            if len(text.split()) < 10:
                continue  # heading-only unit (its text lives in its subsections)
            did = f"{fn[:-5]}#{u.anchor or k}"
            docs.append((did, "", text))
            cand.append((did, title))
    return write_set(out, docs, cand)


BUILDERS = {"manpages": build_manpages, "debian-handbook": build_handbook}
BUILDERS.update({f"manpages-{lang}": (lambda out, lang=lang: build_translated(lang, out)) for lang in TRANSLATIONS})


def main(argv):
    sets = [argv[1]] if len(argv) > 1 else list(BUILDERS)
    for s in sets:
        if s not in BUILDERS:
            sys.exit(f"unknown set {s!r}; choose from {', '.join(BUILDERS)}")
        out = argv[2] if len(argv) > 2 else f"/tmp/retrieval/{s}"
        t0 = time.time()
        stats = BUILDERS[s](out)
        stats["build_seconds"] = round(time.time() - t0, 1)
        with open(os.path.join(out, "stats.json"), "w") as f:
            json.dump(stats, f, indent=2)
        print(s, out, json.dumps(stats))


if __name__ == "__main__":
    main(sys.argv)
