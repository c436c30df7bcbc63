"""Zero, in a shared library's CUDA fat binaries, the payload of every image except the SASS for one architecture.

libcuvs.so carries its kernels for sm_75, 80, 86, 90, 100 and 120 (and PTX for 120): 212 MB of its 291. The
headers stay as they are, so the library's layout, symbols and kernel registration are unchanged; the driver loads
the image that matches the GPU (the kept one) and never reads the zeroed ones, which xz then compresses to nothing.

    python3 keep_arch.py libcuvs.so 90     # in place; prints the bytes kept and zeroed
"""

from __future__ import annotations

import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
SASS = 2  # an entry's kind: 1 PTX, 2 ELF (SASS)


def section(path: str, name: str) -> tuple[int, int]:
    """File offset and size of a section, from readelf."""
    for line in subprocess.run(
        ["readelf", "-SW", path], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[4], 16), int(fields[5], 16)
    raise SystemExit(f"{path}: no section {name}")


def keep_arch(path: str, arch: int) -> tuple[int, int]:
    offset, size = section(path, ".nv_fatbin")
    with open(path, "r+b") as f:
        f.seek(offset)
        data = bytearray(f.read(size))
        kept = zeroed = pos = 0
        while pos + 16 <= len(data):
            magic, _, header, body = struct.unpack_from("<IHHQ", data, pos)
            if magic != FATBIN_MAGIC:  # fat binaries are 8-byte aligned, padded between
                pos += 8
                continue
            entry, end = pos + header, pos + header + body
            while entry < end:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
                entry_arch = struct.unpack_from("<I", data, entry + 28)[0]
                start = entry + entry_header
                if kind == SASS and entry_arch == arch:
                    kept += payload
                else:
                    data[start : start + payload] = bytes(payload)
                    zeroed += payload
                entry = start + payload
            pos = end
        if not kept:
            raise SystemExit(f"{path}: no SASS for sm_{arch}; left unchanged")
        f.seek(offset)
        f.write(data)
    return kept, zeroed


if __name__ == "__main__":
    kept, zeroed = keep_arch(sys.argv[1], int(sys.argv[2]))
    print(f"{sys.argv[1]}: kept {kept / 1e6:.1f} MB of sm_{sys.argv[2]} SASS, zeroed {zeroed / 1e6:.1f} MB")
