"""Reference token ids and vectors for all-mpnet-base-v2 from sentence-transformers.

Writes crates/candle/tests/data/mpnet_reference.json, which crates/candle/tests/mpnet.rs compares
against: the ids must be equal and the vectors within cosine 0.9999 on the CPU (both in f32). It
also holds PyTorch's relative-position buckets (MPNetModel's own function) for every distance a
384-token sequence has, which crates/candle/src/mpnet.rs's bucket function must give.

The model folder is the one `warpfold models fetch all-mpnet-base-v2` installs (the same files,
checked against models/manifest.json); sentence-transformers reads it from disk, nothing from a hub.

    python3 -m venv .venv-st && .venv-st/bin/pip install sentence-transformers==6.3.0
    .venv-st/bin/python bench/mpnet/reference.py [models/all-mpnet-base-v2]
"""
import json
import os
import sys

import torch
from sentence_transformers import SentenceTransformer
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "models", "all-mpnet-base-v2")
OUT = os.path.join(HERE, "..", "..", "crates", "candle", "tests", "data", "mpnet_reference.json")

LONG = (
    "The tenant pays a security deposit of two months' rent, 2,900 euros, once, when the lease is signed. "
    "The landlord keeps it in a separate account and returns it within thirty days of the end of the lease, "
    "less the cost of any damage beyond ordinary wear. Rent is due on the first day of each month and is paid "
    "by bank transfer; a payment more than ten days late carries interest of 1% per month on the amount due. "
    "Either party may end the lease with three months' written notice, sent by registered letter. "
)

# Queries and passages: short and long (past 128 tokens, where the buckets stop growing), accents,
# a no-break space, digits and punctuation, and one text longer than the model's 384 tokens is not
# here: warpfold cuts texts into chunks before they reach the model.
TEXTS = [
    "how much is the security deposit",
    "The tenant pays a security deposit of 2,900 euros once.",
    "Mount Everest is the highest mountain above sea level, on the border of Nepal and China.",
    "open and possibly create a file",
    "Café au lait costs 3\u00a0€ in the café near the Hôtel de Ville; naïve résumés are déjà vu.",
    "Die Straßenbahn fährt täglich zwischen Köln und Düsseldorf.",
    "A",
    LONG,
    LONG * 2,
    LONG * 3,
]


def main():
    model = SentenceTransformer(MODEL, device="cpu")
    model.eval()
    tokenizer = model.tokenizer
    texts = []
    with torch.no_grad():
        vectors = model.encode(TEXTS, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    for text, vector in zip(TEXTS, vectors):
        ids = tokenizer(text, truncation=True, max_length=model.max_seq_length)["input_ids"]
        texts.append({"text": text, "ids": ids, "vector": [round(float(x), 7) for x in vector]})
    distances = list(range(-383, 384))
    bucket = MPNetEncoder.relative_position_bucket(torch.tensor(distances), num_buckets=32).tolist()
    out = {
        "model": os.path.basename(os.path.normpath(MODEL)),
        "made_with": {
            "sentence_transformers": __import__("sentence_transformers").__version__,
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
        },
        "max_seq_length": model.max_seq_length,
        "buckets": {"distances": distances, "buckets": bucket},
        "texts": texts,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}: {len(texts)} texts, token counts {[len(t['ids']) for t in texts]}")


if __name__ == "__main__":
    main()
