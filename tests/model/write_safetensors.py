#!/usr/bin/env python3
"""Writes a safetensors file with Python's struct and json only (not with the harness's writer), so
that tests/cpu/test_model_safetensors_reference.cpp reads a file another tool made. The values are
exact in every dtype; the test holds the same list. Usage: write_safetensors.py OUT"""
import json
import struct
import sys


def bf16(values):
    # bf16 is the upper half of a binary32; these values are exact in it.
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def main():
    tensors = [
        ("a.bf16", "BF16", [2, 3], bf16([1.0, -2.0, 0.5, 3.25, -0.125, 96.0])),
        ("b.f32", "F32", [4], struct.pack("<4f", 0.1, -1e-3, 12345.5, -7.0)),
        # e4m3 codes: 0x38 = 1.0, 0xC0 = -2.0, 0x30 = 0.5, 0x7E = 448; the scale 2^(130 - 127) = 8.
        ("layer.w.weight", "F8_E4M3", [2, 2], bytes([0x38, 0xC0, 0x30, 0x7E])),
        ("layer.w.scale", "F8_E8M0", [1, 1], bytes([130])),
        ("ids", "I32", [3], struct.pack("<3i", 0, 7, -5)),
    ]
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = {"format": "pt", "writer": "python struct"}
    text = json.dumps(header).encode()
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


if __name__ == "__main__":
    main()
