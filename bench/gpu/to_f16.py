"""Rewrites a safetensors file with every F32 tensor as F16 (standard library only).

The GPU machine has no network and a call carries at most 64 MiB: all-MiniLM-L6-v2 is 91 MB in f32 and
45 MB in f16, which is the precision warpfold's FlashAttention path computes in anyway (loading f32 and
casting on the device gives the same f16 weights).
"""
import array
import json
import struct
import sys


def main(src, dst):
    data = open(src, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out_header, chunks, offset = {}, [], 0
    for name, info in header.items():
        if name == "__metadata__":
            out_header[name] = info
            continue
        start, end = info["data_offsets"]
        raw = body[start:end]
        dtype = info["dtype"]
        if dtype == "F32":
            floats = array.array("f")
            floats.frombytes(raw)
            raw = struct.pack(f"<{len(floats)}e", *floats)
            dtype = "F16"
        out_header[name] = {"dtype": dtype, "shape": info["shape"], "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(out_header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for c in chunks:
            f.write(c)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
