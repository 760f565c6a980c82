"""memalloc.py: a python3 workload that allocates heavily (issue 15's real programs): buffers of
1 KiB to 16 MiB made, filled, joined and dropped, many small objects in dicts and lists, a big
JSON round trip; prints a digest of everything computed, so runs can be compared byte for byte.
python3 memalloc.py ROUNDS"""

import hashlib
import json
import sys


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    digest = hashlib.sha256()
    for r in range(rounds):
        # Large buffers: each above glibc's mmap threshold is an mmap and a munmap.
        sizes = [1 << k for k in range(10, 25)]
        blocks = [bytes([(r + k) & 0xFF]) * n for k, n in enumerate(sizes)]
        digest.update(b"".join(b[:64] + b[-64:] for b in blocks))
        joined = b"".join(blocks)
        digest.update(hashlib.sha256(joined).digest())
        del blocks, joined
        # Many small objects: dicts of lists of strings, sorted and dropped.
        table = {f"k{r}-{i}": [str(i * j) for j in range(20)] for i in range(20000)}
        digest.update(str(sum(len(v) for v in table.values())).encode())
        text = json.dumps(table, sort_keys=True)
        digest.update(hashlib.sha256(text.encode()).digest())
        back = json.loads(text)
        digest.update(str(len(back)).encode())
        del table, text, back
    print(digest.hexdigest())


if __name__ == "__main__":
    main()
